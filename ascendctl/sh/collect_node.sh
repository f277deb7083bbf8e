#!/bin/sh
# Collect one node for `ascendctl collect`: run the vendor and kernel commands into a staging
# directory, choose the log files that fit the node's byte budget (by priority, then newest first; no
# file takes more than a quarter of the budget while others wait, a big one keeps its newest bytes),
# and write one tar stream to stdout.
#
# usage: sh -s -- NONCE TOOL_PATH SECTION_TIMEOUT SILENCE BUDGET MIN_TAIL SINCE UNTIL LOG_BASE MSPROF_DIR \
#                  PROFILE_DIR TASK_GAP [NAME TOOL COMMAND]... -- [LAUNCHER_PATH]...
#   SILENCE        whole seconds the node may send nothing (ascendctl's command_timeout): ascendctl calls a node
#                  that sends nothing for that long lost, so this script says it is alive (a NUL byte on stderr)
#                  while it works, and stops tar when tar could write nothing for that long (its reader is gone)
#   SINCE, UNTIL   epoch seconds of the log window, or empty for none
#   LOG_BASE       $ASCEND_PROCESS_LOG_PATH (or ~/ascend/log) without a trailing slash ("" for /)
#   MSPROF_DIR     msprof output directory, or empty
#   PROFILE_DIR    per-rank profiles (torch_npu *_ascend_pt directories, torch.profiler traces), or empty: only the
#                  newest task's files that `ascendctl perf` reads are taken (see profile_task below)
#   TASK_GAP       seconds: profiles written further apart than this belong to different tasks
#   NAME TOOL COMMAND  one command: its output goes to commands/NAME.txt; skipped when TOOL is missing
#   LAUNCHER_PATH  the job's files (launcher log, exit_code, pid) and its launcher's log directory
#
# Priority, highest first (lower ones never displace a file of a higher one): 1 the job's own files (each
# LAUNCHER_PATH that is not a directory), 2 plogs, 3 the launcher's log directory (each rank's log), 4 device
# logs, 5 msprof summaries, 6 profiles (a profile is taken whole or not at all); newest first within each.
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
nonce=$1 tool_path=$2 section_timeout=$3 silence=$4 budget=$5 min_tail=$6 since=$7 until=$8 log_base=$9
msprof_dir=${10} profile_dir=${11} task_gap=${12}
shift 12
PATH="$PATH:$tool_path"; LC_ALL=C; export PATH LC_ALL
tab=$(printf '\t')
max_refused=1000  # records of .meta/refused sent; the count of the others goes to .meta/refused.more
# a heartbeat every few seconds, well inside the silence ascendctl allows
beat=$((silence / 4)); [ "$beat" -ge 1 ] || beat=1; [ "$beat" -le 5 ] || beat=5
T=$(mktemp -d "${TMPDIR:-/tmp}/ascendctl-collect.XXXXXX") || exit 70
helpers=  # background processes of this script (heartbeat, watchdog): stopped with it
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    # shellcheck disable=SC2086  # a list of pids
    [ -z "$helpers" ] || kill $helpers 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
# a signal, or stderr gone (ascendctl closed the channel): end here, through cleanup
trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 141' PIPE; trap 'exit 143' TERM
S="$T/$nonce"; M="$S/.meta"
mkdir -p "$S/commands" "$S/files" "$M" || exit 70
: > "$M/status.tsv"; : > "$M/cand.tsv"; : > "$M/roots"; : > "$M/refused"

if command -v timeout >/dev/null 2>&1; then
    # the text of ascendctl.remote.transport.bounded_run (tests/test_shell_programs.py keeps them equal)
    run() { timeout -k 2 "$section_timeout" sh -c "$1" 2>&1 </dev/null & p=$!; wait "$p"; rc=$?; if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then kill -0 -"$p" 2>/dev/null && { sleep 2; kill -KILL -"$p" 2>/dev/null; }; fi; return "$rc"; }
else
    run() { sh -c "$1" 2>&1 </dev/null; }
fi

# alive: tell ascendctl this node is still at work (a NUL byte on stderr, which ascendctl drops)
alive() { printf '\000' >&2; }

# heartbeat: alive every $beat seconds while the (bounded) vendor commands run, until this script is gone. Its
# sleep holds neither stdout nor stderr: sshd ends the session only once every writer of both has closed them.
heartbeat() {
    while kill -0 "$$" 2>/dev/null; do
        alive || exit
        sleep "$beat" > /dev/null 2>&1
    done
}

# watchdog PID: stop PID (tar) when what it wrote (wchar, /proc/PID/io) has not grown for $silence seconds. Its reader,
# sshd, takes nothing when the client is gone (a link cut: sshd may not notice for many minutes), so tar would
# wait in write() for ever; a node without /proc/PID/io has no watchdog. Its sleeps hold no output (see heartbeat).
watchdog() {
    trap '' PIPE  # its message is a courtesy: a closed stderr must not stop it
    last='' still=0
    while kill -0 "$1" 2>/dev/null; do
        written=
        while IFS=' ' read -r key value; do
            if [ "$key" = "wchar:" ]; then written=$value; fi
        done < "/proc/$1/io" || return 0
        [ -n "$written" ] || return 0
        if [ "$written" = "$last" ]; then still=$((still + 1)); else still=0 last=$written; fi
        if [ "$still" -ge "$silence" ]; then
            echo "collect_node.sh: tar could send nothing for ${silence}s: stopped" >&2
            kill -TERM "$1" 2>/dev/null
            sleep 2 > /dev/null 2>&1
            kill -KILL "$1" 2>/dev/null
            return 0
        fi
        sleep 1 > /dev/null 2>&1
    done
}

# sect NAME TOOL COMMAND: status.tsv gets "NAME<tab>exit status<tab>TOOL", or "absent" for a missing tool
sect() {
    if ! command -v "$2" >/dev/null 2>&1; then
        printf '%s\tabsent\t%s\n' "$1" "$2" >> "$M/status.tsv"
        return
    fi
    run "$3" > "$S/commands/$1.txt"
    printf '%s\t%s\t%s\n' "$1" "$?" "$2" >> "$M/status.tsv"
}

# cand PRIORITY CATEGORY ROOT... [FIND TESTS]: regular files under the ROOTs (absolute paths) passing the tests, as
# "priority<tab>mtime<tab>size<tab>category<tab>path" lines in cand.tsv; the ROOTs go to roots (a root whose own name
# has a control character is left out: everything under it is refused); what passes the tests but is no candidate
# (see the top) goes to refused
cand() {
    prio=$1 c=$2; shift 2
    for a in "$@"; do
        case $a in
        /*) case $a in *[[:cntrl:]]*) ;; *) while [ "${a%/}" != "$a" ]; do a=${a%/}; done; printf '%s\n' "$a" >> "$M/roots" ;; esac ;;
        *) break ;;
        esac
    done
    find "$@" ! -type d \( \
        -path '*[[:cntrl:]]*' -fprintf "$M/refused.$c" "$c\tcontrol character in the path\t%p\0" \
        -o -type f -printf "$prio\t%T@\t%s\t$c\t%p\n" \
        -o -type l -fprintf "$M/refused.$c" "$c\tsymbolic link\t%p\0" \
        -o -fprintf "$M/refused.$c" "$c\tnot a regular file\t%p\0" \) 2>/dev/null >> "$M/cand.tsv"
    cat "$M/refused.$c" >> "$M/refused" 2>/dev/null
    rm -f "$M/refused.$c"
    alive
}

# cand_in_window PRIORITY CATEGORY PATH...: candidates modified inside [SINCE, UNTIL]
cand_in_window() {
    if [ -n "$since" ]; then set -- "$@" -newermt "@$since"; fi
    if [ -n "$until" ]; then set -- "$@" ! -newermt "@$until"; fi
    cand "$@"
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

# profile_task DIR: the newest profiling task under DIR. A profile is a torch_npu *_ascend_pt directory (the one holding
# a profiler_info_<rank>.json) or a torch.profiler trace file (*.pt.trace.json[.gz]), dated by that file's mtime; the
# task is the newest profile and every profile written at most TASK_GAP seconds before the one after it (the ranks of
# one run stop profiling together; runs are apart). Its files that ascendctl perf reads become candidates (priority 6);
# the older profiles go to .meta/profile_left ("mtime<tab>path" lines, at most max_refused of them, then a count).
profile_task() {
    find "$1" \( -name 'profiler_info_*.json' -o -name '*.pt.trace.json' -o -name '*.pt.trace.json.gz' \) -type f \
        ! -path '*[[:cntrl:]]*' -printf '%T@\t%p\n' 2>/dev/null | sort -t "$tab" -k1,1gr | awk -F "$tab" -v gap="$task_gap" '
        BEGIN { OFS = "\t" }
        { unit = $2; if (unit ~ /\/profiler_info_[0-9]+\.json$/) sub(/\/[^\/]*$/, "", unit) }
        seen[unit]++ { next }
        !cut && (n++ == 0 || last - $1 <= gap) { print "task", unit; last = $1; next }
        { cut = 1; print "left", $1, unit }' > "$T/units"
    while IFS="$tab" read -r what a b; do
        if [ "$what" = left ]; then printf '%s\t%s\n' "$a" "$b"; continue; fi
        if [ -d "$a" ]; then
            cand 6 profile "$a" \( -name 'profiler_info_*.json' -o -path '*/ASCEND_PROFILER_OUTPUT/*' \( \
                -name step_trace_time.csv -o -name communication.json -o -name communication_matrix.json \) \)
        else
            cand 6 profile "$a"
        fi
    done < "$T/units" > "$T/left"
    left=$(wc -l < "$T/left")
    head -n "$max_refused" "$T/left" > "$M/profile_left"
    [ "$left" -le "$max_refused" ] || echo $((left - max_refused)) > "$M/profile_left.more"
    alive
}

alive
heartbeat > /dev/null &
beating=$!
helpers=$beating
while [ "$#" -ge 3 ] && [ "$1" != "--" ]; do
    sect "$1" "$2" "$3"
    shift 3
done
[ "${1-}" = "--" ] && shift
kill "$beating" 2>/dev/null
helpers=
# from here on each step says it is alive when it ends

for p in "$@"; do
    if [ -d "$p" ]; then cand 3 launcher "$p"; else cand 1 launcher "$p"; fi
done
cand_in_window 2 plog "$log_base/run/plog" "$log_base/debug/plog"
cand_in_window 4 device_log "$log_base"/run/device-* "$log_base"/debug/device-* /var/log/npu/slog
if [ -n "$msprof_dir" ]; then
    cand 5 msprof "$msprof_dir" -path '*/mindstudio_profiler_output/*' -name '*.csv'
fi
if [ -n "$profile_dir" ]; then
    profile_task "$profile_dir"
fi
# a directory of a million hostile names must not take the budget of the logs
refused=$(tr -cd '\000' < "$M/refused" | wc -c)
if [ "$refused" -gt "$max_refused" ]; then
    head -z -n "$max_refused" "$M/refused" > "$M/refused.head" && mv "$M/refused.head" "$M/refused"
    echo $((refused - max_refused)) > "$M/refused.more"
fi

used=$(du -sk "$S" | cut -f1)
budget=$((budget - used * 1024))
# By priority, then newest first; a path seen twice (a launcher dir inside the plog dir) counts once, at its
# higher priority. Each file in turn gets what it needs, at most a share of the budget (a quarter) and at most
# what is left: all of it (keep), else its newest bytes when at least MIN_TAIL (tail), else nothing (drop). So a
# huge file, however new, keeps a tail and leaves room for the files after it. Then what is left goes to the
# files cut short, in the same order.
sort -t "$tab" -k1,1n -k2,2gr "$M/cand.tsv" | awk -F "$tab" -v budget="$budget" -v mintail="$min_tail" '
    BEGIN { OFS = "\t"; n = 0 }
    seen[$5]++ { next }
    { n++; size[n] = $3 + 0; rest[n] = $3 OFS $2 OFS $4 OFS $5; whole[n] = ($4 == "profile") }
    END {
        left = budget
        share = int(budget / 4); if (share < mintail) share = mintail
        for (i = 1; i <= n; i++) {
            want = size[i]; if (want > share) want = share; if (want > left) want = left
            got[i] = (want == size[i] || (want >= mintail && !whole[i])) ? want : 0
            left -= got[i]
        }
        for (i = 1; i <= n && left > 0; i++) {
            more = size[i] - got[i]; if (more > left) more = left
            if (more > 0 && (got[i] + more == size[i] || (got[i] + more >= mintail && !whole[i]))) { got[i] += more; left -= more }
        }
        for (i = 1; i <= n; i++)
            print (got[i] == size[i] ? "keep" : got[i] > 0 ? "tail" : "drop"), got[i], rest[i]
    }' > "$T/chosen.tsv"
# each chosen file checked again, then its tail copied or its name listed for tar; a refused one leaves the selection
while IFS="$tab" read -r action keep size mtime category path; do
    if [ "$action" != drop ] && ! readable "$path"; then
        printf '%s\t%s\t%s\0' "$category" "$why" "$path" >> "$M/refused"
        continue
    fi
    case $action in
    keep) printf '%s\n' "${path#/}" >&3 ;;
    tail) mkdir -p "$S/files${path%/*}" && tail -c "$keep" -- "$path" > "$S/files$path"; alive ;;
    esac
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$action" "$keep" "$size" "$mtime" "$category" "$path"
done < "$T/chosen.tsv" > "$M/selection.tsv" 3> "$T/list"
alive
# tar in the background (its stdout is still ours) so that the watchdog can stop it
tar -cf - -C "$T" "$nonce" -C / --ignore-failed-read --no-recursion --verbatim-files-from --no-unquote -T "$T/list" &
taring=$!
watchdog "$taring" > /dev/null &
watching=$!
helpers="$watching $taring"
wait "$taring"
rc=$?
helpers=$watching
# GNU tar exits 1 when a file changed while it was read: the bundle is still good
[ "$rc" -le 1 ] && exit 0
exit "$rc"
