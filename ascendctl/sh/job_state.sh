#!/bin/sh
# job_state.sh DIR PID MARKER: one node's part of a job: "exit RC" (its launcher ended), "running" (its launcher or,
# after the launcher was lost, any process of the job still runs) or "gone" (nothing of it is left).
dir=$1 pid=$2 marker=$3
if [ -f "$dir/exit_code" ]; then
    echo "exit $(cat "$dir/exit_code")"
elif [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    echo running
elif grep -lzxF "$marker" /proc/[0-9]*/environ >/dev/null 2>&1; then
    echo running
else
    echo gone
fi
