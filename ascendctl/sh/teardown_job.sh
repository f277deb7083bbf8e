#!/bin/sh
# teardown_job.sh MARKER GRACE_MS [JOB_DIR]: SIGTERM every process whose environment holds MARKER
# (ASCENDCTL_JOB=<job>/<node>), SIGKILL what is left after GRACE_MS. Prints term (all ended after TERM), kill (KILL
# was needed) or none. msrun and torchrun start their workers in new sessions, so processes are found by the marker,
# not by group. JOB_DIR: the node's job directory, whose env file (.job.env, the job's secrets) is removed at the end:
# a wrapper stopped before it read (and deleted) it leaves it behind.
#
# POSIX sh and the tools every node has, GNU or busybox (grep -z, sed): the grace is measured with the shell's own
# `read` of /proc/uptime, never with a `date` format (busybox's date has no %N: `date +%s%3N` printed "...%3N", the
# arithmetic failed, the script stopped before the SIGKILL and a TERM-ignoring process survived); where /proc/uptime
# cannot be read, by counting the sleeps.
marker=$1 grace_ms=$2 dir=${3:-}
pids() { grep -lzxF "$marker" /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/\([0-9]*\)/environ$|\1|'; }
# now: centiseconds since boot (the fraction of /proc/uptime has two digits; 1 in front keeps "08" from being octal)
uptime_cs() {
    read -r up _ </proc/uptime 2>/dev/null || return 1
    now=$((${up%.*} * 100 + 1${up#*.} - 100))
}
forget_env() { [ -z "$dir" ] || rm -f "$dir/.job.env"; }
p=$(pids)
[ -z "$p" ] && { forget_env; echo none; exit 0; }
# shellcheck disable=SC2086  # a list of pids
kill -TERM $p 2>/dev/null
start='' waited=0
uptime_cs && start=$now
while [ -n "$(pids)" ]; do
    if [ -n "$start" ] && uptime_cs; then elapsed=$(((now - start) * 10)); else elapsed=$waited; fi
    [ "$elapsed" -ge "$grace_ms" ] && break
    # a tenth of a second; a whole one where sleep takes whole seconds only (POSIX's)
    if sleep 0.1 2>/dev/null; then waited=$((waited + 100)); else sleep 1; waited=$((waited + 1000)); fi
done
[ -z "$(pids)" ] && { forget_env; echo term; exit 0; }
for _ in 1 2 3 4 5; do
    p=$(pids)
    [ -z "$p" ] && break
    # shellcheck disable=SC2086  # a list of pids
    kill -KILL $p 2>/dev/null
    sleep 0.05 2>/dev/null || sleep 1
done
forget_env
echo kill
[ -z "$(pids)" ]
