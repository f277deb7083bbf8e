#!/bin/sh
# teardown_job.sh MARKER GRACE_MS: SIGTERM every process whose environment holds MARKER (ASCENDCTL_JOB=<job>/<node>),
# SIGKILL what is left after GRACE_MS. Prints term (all ended after TERM), kill (KILL was needed) or none.
# msrun and torchrun start their workers in new sessions, so processes are found by the marker, not by group.
marker=$1 grace_ms=$2
pids() { grep -lzxF "$marker" /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/\([0-9]*\)/environ$|\1|'; }
p=$(pids)
[ -z "$p" ] && { echo none; exit 0; }
# shellcheck disable=SC2086  # a list of pids
kill -TERM $p 2>/dev/null
end=$(( $(date +%s%3N) + grace_ms ))
while [ -n "$(pids)" ] && [ "$(date +%s%3N)" -lt "$end" ]; do sleep 0.1; done
[ -z "$(pids)" ] && { echo term; exit 0; }
for _ in 1 2 3 4 5; do
    p=$(pids)
    [ -z "$p" ] && break
    # shellcheck disable=SC2086  # a list of pids
    kill -KILL $p 2>/dev/null
    sleep 0.05
done
echo kill
[ -z "$(pids)" ]
