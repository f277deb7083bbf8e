#!/bin/sh
# Collect one node for `ascendctl collect`: run the vendor and kernel commands into a staging
# directory, choose the newest log files that fit the node's byte budget (a file that does not
# fit keeps its newest bytes when enough budget is left), and write one tar stream to stdout.
#
# usage: sh -s -- NONCE TOOL_PATH SECTION_TIMEOUT BUDGET MIN_TAIL SINCE UNTIL LOG_BASE MSPROF_DIR \
#                  [NAME TOOL COMMAND]... -- [LAUNCHER_PATH]...
#   SINCE, UNTIL   epoch seconds of the log window, or empty for none
#   LOG_BASE       $ASCEND_PROCESS_LOG_PATH (or ~/ascend/log) without a trailing slash ("" for /)
#   MSPROF_DIR     msprof output directory, or empty
#   NAME TOOL COMMAND  one command: its output goes to commands/NAME.txt; skipped when TOOL is missing
#
# Tar members: NONCE/... is the staging directory (commands/, .meta/ with status.tsv, cand.tsv,
# selection.tsv, roots and refused, files/ with the tails of truncated files); any other member is a
# whole file named relative to /. GNU find (-newermt, -printf, -fprintf), GNU tar (-T,
# --verbatim-files-from, --ignore-failed-read) and GNU head (-z) are assumed.
#
# File names are written by whoever writes the logs (any user's job), so a name is never trusted to
# hold no separator: the tab/newline lists (cand.tsv, selection.tsv, the tar list) only ever hold names
# free of control characters; a file whose path has one, a symbolic link and a FIFO, socket or device
# are listed in .meta/refused instead ("CATEGORY<tab>REASON<tab>PATH", each record ended by a NUL,
# which no path can hold), as is a chosen file that, just before it is read, is not a regular file
# any more, or is not under a searched directory, or has a ".." component. tar adds exactly the listed
# files: no recursion, each list line a name as it is (never an option, no backslash escapes).
nonce=$1 tool_path=$2 section_timeout=$3 budget=$4 min_tail=$5 since=$6 until=$7 log_base=$8 msprof_dir=$9
shift 9
PATH="$PATH:$tool_path"; LC_ALL=C; export PATH LC_ALL
tab=$(printf '\t')
max_refused=1000  # records of .meta/refused sent; the count of the others goes to .meta/refused.more
T=$(mktemp -d "${TMPDIR:-/tmp}/ascendctl-collect.XXXXXX") || exit 70
trap 'rm -rf "$T"' EXIT HUP INT TERM
S="$T/$nonce"; M="$S/.meta"
mkdir -p "$S/commands" "$S/files" "$M" || exit 70
: > "$M/status.tsv"; : > "$M/cand.tsv"; : > "$M/roots"; : > "$M/refused"

if command -v timeout >/dev/null 2>&1; then
    # the text of ascendctl.transport.bounded_run (tests/test_shell_programs.py keeps them equal)
    run() { timeout -k 2 "$section_timeout" sh -c "$1" 2>&1 </dev/null & p=$!; wait "$p"; rc=$?; if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then kill -0 -"$p" 2>/dev/null && { sleep 2; kill -KILL -"$p" 2>/dev/null; }; fi; return "$rc"; }
else
    run() { sh -c "$1" 2>&1 </dev/null; }
fi

# sect NAME TOOL COMMAND: status.tsv gets "NAME<tab>exit status<tab>TOOL", or "absent" for a missing tool
sect() {
    if ! command -v "$2" >/dev/null 2>&1; then
        printf '%s\tabsent\t%s\n' "$1" "$2" >> "$M/status.tsv"
        return
    fi
    run "$3" > "$S/commands/$1.txt"
    printf '%s\t%s\t%s\n' "$1" "$?" "$2" >> "$M/status.tsv"
}

# cand CATEGORY ROOT... [FIND TESTS]: regular files under the ROOTs (absolute paths) passing the tests, as
# "mtime<tab>size<tab>category<tab>path" lines in cand.tsv; the ROOTs go to roots (a root whose own name has a
# control character is left out: everything under it is refused); what passes the tests but is no candidate
# (see the top) goes to refused
cand() {
    c=$1; shift
    for a in "$@"; do
        case $a in
        /*) case $a in *[[:cntrl:]]*) ;; *) while [ "${a%/}" != "$a" ]; do a=${a%/}; done; printf '%s\n' "$a" >> "$M/roots" ;; esac ;;
        *) break ;;
        esac
    done
    find "$@" ! -type d \( \
        -path '*[[:cntrl:]]*' -fprintf "$M/refused.$c" "$c\tcontrol character in the path\t%p\0" \
        -o -type f -printf "%T@\t%s\t$c\t%p\n" \
        -o -type l -fprintf "$M/refused.$c" "$c\tsymbolic link\t%p\0" \
        -o -fprintf "$M/refused.$c" "$c\tnot a regular file\t%p\0" \) 2>/dev/null >> "$M/cand.tsv"
    cat "$M/refused.$c" >> "$M/refused" 2>/dev/null
    rm -f "$M/refused.$c"
}

# cand_in_window CATEGORY PATH...: candidates modified inside [SINCE, UNTIL]
cand_in_window() {
    category=$1; shift
    if [ -n "$since" ]; then set -- "$@" -newermt "@$since"; fi
    if [ -n "$until" ]; then set -- "$@" ! -newermt "@$until"; fi
    cand "$category" "$@"
}

# readable PATH: PATH is a regular file (not a link), under one of the roots, with no ".." component; else false,
# with the reason in $why. Checked again just before the file is read: it may have been swapped since find saw it.
readable() {
    case "$1/" in */../*) why="a .. component in the path"; return 1 ;; esac
    under=
    while IFS= read -r root; do
        case $1 in "$root" | "$root"/*) under=1; break ;; esac
    done < "$M/roots"
    if [ -z "$under" ]; then why="not under a searched directory"; return 1; fi
    if [ -h "$1" ] || [ ! -f "$1" ]; then why="not a regular file when read"; return 1; fi
}

while [ "$#" -ge 3 ] && [ "$1" != "--" ]; do
    sect "$1" "$2" "$3"
    shift 3
done
[ "${1-}" = "--" ] && shift

cand_in_window plog "$log_base/run/plog" "$log_base/debug/plog"
cand_in_window device_log "$log_base"/run/device-* "$log_base"/debug/device-* /var/log/npu/slog
if [ "$#" -gt 0 ]; then
    cand launcher "$@"
fi
if [ -n "$msprof_dir" ]; then
    cand msprof "$msprof_dir" -path '*/mindstudio_profiler_output/*' -name '*.csv'
fi
# a directory of a million hostile names must not take the budget of the logs
refused=$(tr -cd '\000' < "$M/refused" | wc -c)
if [ "$refused" -gt "$max_refused" ]; then
    head -z -n "$max_refused" "$M/refused" > "$M/refused.head" && mv "$M/refused.head" "$M/refused"
    echo $((refused - max_refused)) > "$M/refused.more"
fi

used=$(du -sk "$S" | cut -f1)
budget=$((budget - used * 1024))
# newest first; a path seen twice (a launcher dir inside the plog dir) counts once
sort -t "$tab" -k1,1 -g -r "$M/cand.tsv" | awk -F "$tab" -v budget="$budget" -v mintail="$min_tail" '
    BEGIN { OFS = "\t" }
    seen[$4]++ { next }
    {
        if ($2 + 0 <= budget) { budget -= $2; print "keep", $2, $2, $1, $3, $4 }
        else if (budget >= mintail) { print "tail", budget, $2, $1, $3, $4; budget = 0 }
        else print "drop", 0, $2, $1, $3, $4
    }' > "$T/chosen.tsv"
# each chosen file checked again, then its tail copied or its name listed for tar; a refused one leaves the selection
while IFS="$tab" read -r action keep size mtime category path; do
    if [ "$action" != drop ] && ! readable "$path"; then
        printf '%s\t%s\t%s\0' "$category" "$why" "$path" >> "$M/refused"
        continue
    fi
    case $action in
    keep) printf '%s\n' "${path#/}" >&3 ;;
    tail) mkdir -p "$S/files${path%/*}" && tail -c "$keep" -- "$path" > "$S/files$path" ;;
    esac
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$action" "$keep" "$size" "$mtime" "$category" "$path"
done < "$T/chosen.tsv" > "$M/selection.tsv" 3> "$T/list"
tar -cf - -C "$T" "$nonce" -C / --ignore-failed-read --no-recursion --verbatim-files-from --no-unquote -T "$T/list"
rc=$?
# GNU tar exits 1 when a file changed while it was read: the bundle is still good
[ "$rc" -le 1 ] && exit 0
exit "$rc"
