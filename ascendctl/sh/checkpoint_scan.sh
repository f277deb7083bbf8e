#!/bin/sh
# checkpoint_scan.sh DIR WAIT_S: what `launch --restarts --checkpoint-dir DIR` may resume from (jobs/checkpoints.py).
# Prints one line per entry of DIR, twice, WAIT_S seconds apart (a size that changed: still being written):
#   entry<TAB>PASS<TAB>KIND<TAB>MTIME<TAB>KIB<TAB>MARKERS<TAB>NAME
# KIND d (directory) or f (file); MTIME epoch seconds of the entry; KIB what it holds (du -sk: nothing is read);
# MARKERS the completion markers found in a directory (comma-separated), of the frameworks that write one. Then, when DIR has them,
# `latest<TAB>FILE<TAB>TEXT` for the pointer files naming the newest complete checkpoint (Megatron, DeepSpeed), and `done`.
# POSIX sh and the tools every node has (du, cut, head, tr; stat or date -r); never follows links out of DIR; names with a tab or a
# newline are left out.
dir=$1 wait_s=${2:-2}
[ -d "$dir" ] || { echo "nodir"; exit 0; }
tab=$(printf '\t')
MARKERS=".metadata trainer_state.json model.safetensors.index.json latest zero_to_fp32.py"
mtime() { stat -c %Y "$1" 2>/dev/null || date -r "$1" +%s 2>/dev/null || echo 0; }
kib() { du -sk "$1" 2>/dev/null | cut -f1; }  # POSIX du: KiB in use, files below included (never read)
scan() {
    for e in "$dir"/* "$dir"/.[!.]*; do
        [ -e "$e" ] || continue
        [ -L "$e" ] && continue
        name=${e##*/}
        case $name in *"$tab"* | *'
'*) continue ;; esac
        if [ -d "$e" ]; then
            kind=d markers=''
            for m in $MARKERS; do [ -e "$e/$m" ] && markers="$markers${markers:+,}$m"; done
        else
            kind=f markers=''
        fi
        printf 'entry\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$kind" "$(mtime "$e")" "$(kib "$e")" "$markers" "$name"
    done
}
scan 1
sleep "$wait_s"
scan 2
for p in latest_checkpointed_iteration.txt latest; do
    [ -f "$dir/$p" ] && printf 'latest\t%s\t%s\n' "$p" "$(head -c 200 "$dir/$p" | tr -d '\n\t')"
done
echo "done"
