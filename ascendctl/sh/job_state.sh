#!/bin/sh
# job_state.sh DIR PID MARKER: one node's part of a job, two lines. First: "exit RC [WHEN]" (its launcher ended; WHEN is
# the epoch second its exit_code was written, where `date -r` works), "running"
# (its launcher or, after the launcher was lost, any process of the job still runs) or "gone" (nothing of it is left).
# Second: "pids" and the pids of every process still carrying MARKER (ASCENDCTL_JOB=<job>/<node>), whatever the first.
dir=$1 pid=$2 marker=$3
left=$(grep -lzxF "$marker" /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/\([0-9]*\)/environ$|\1|' | tr '\n' ' ' | sed 's/ $//')
if [ -f "$dir/exit_code" ]; then
    echo "exit $(cat "$dir/exit_code") $(date -r "$dir/exit_code" +%s 2>/dev/null)"
elif [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    echo running
elif [ -n "$left" ]; then
    echo running
else
    echo gone
fi
echo "pids${left:+ $left}"
