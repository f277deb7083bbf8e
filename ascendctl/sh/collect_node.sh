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
# Tar members: NONCE/... is the staging directory (commands/, .meta/ with status.tsv, cand.tsv and
# selection.tsv, files/ with the tails of truncated files); any other member is a whole file named
# relative to /. GNU find (-newermt, -printf) and GNU tar (-T, --ignore-failed-read) are assumed.
nonce=$1 tool_path=$2 section_timeout=$3 budget=$4 min_tail=$5 since=$6 until=$7 log_base=$8 msprof_dir=$9
shift 9
PATH="$PATH:$tool_path"; LC_ALL=C; export PATH LC_ALL
tab=$(printf '\t')
T=$(mktemp -d "${TMPDIR:-/tmp}/ascendctl-collect.XXXXXX") || exit 70
trap 'rm -rf "$T"' EXIT HUP INT TERM
S="$T/$nonce"; M="$S/.meta"
mkdir -p "$S/commands" "$S/files" "$M" || exit 70
: > "$M/status.tsv"; : > "$M/cand.tsv"

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

# cand CATEGORY PATH... [FIND TESTS]: candidate files as "mtime<tab>size<tab>category<tab>path"
cand() {
    c=$1; shift
    find "$@" -type f -printf "%T@\t%s\t$c\t%p\n" 2>/dev/null >> "$M/cand.tsv"
}

# cand_in_window CATEGORY PATH...: candidates modified inside [SINCE, UNTIL]
cand_in_window() {
    category=$1; shift
    if [ -n "$since" ]; then set -- "$@" -newermt "@$since"; fi
    if [ -n "$until" ]; then set -- "$@" ! -newermt "@$until"; fi
    cand "$category" "$@"
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
    }' > "$M/selection.tsv"
awk -F "$tab" '$1 == "tail"' "$M/selection.tsv" | while IFS="$tab" read -r _ keep _ _ _ path; do
    mkdir -p "$S/files$(dirname "$path")" && tail -c "$keep" "$path" > "$S/files$path"
done
awk -F "$tab" '$1 == "keep" { print substr($6, 2) }' "$M/selection.tsv" > "$M/list"
tar -cf - -C "$T" "$nonce" -C / --ignore-failed-read -T "$M/list"
rc=$?
# GNU tar exits 1 when a file changed while it was read: the bundle is still good
[ "$rc" -le 1 ] && exit 0
exit "$rc"
