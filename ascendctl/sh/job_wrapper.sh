#!/bin/sh
# job_wrapper.sh DIR: run one node's launcher for `ascendctl launch`, started detached under setsid.
#
# DIR holds what `ascendctl launch` unpacked there (umask 077): .job.env (exports; read, then deleted before
# anything else, so no value is ever in a command line or left on disk), .job.cmd (the launcher command line)
# and stamp_lines.sh. POSIX sh; bash only for the stamper, when the node has it.
# The launcher writes into a FIFO read by the stamper, so the launcher runs in this shell, whose TERM handler
# keeps it alive to record the exit status; the stamper ignores signals and ends after the last writer.
# Writes: pid, launcher.log (every line stamped with this node's time), exit_code (atomically, at the end).
dir=$1
# A handler (not an ignore, which children would inherit) keeps this shell alive to record the status.
trap : TERM INT HUP
# The environment first: read, then deleted before anything that can fail (a full disk, no mkfifo), so none of
# its values is left on disk whatever happens next. Unreadable: the job cannot run as planned; say so and stop.
if ! job_env=$(cat "$dir/.job.env"); then
    rm -f "$dir/.job.env"
    echo "ascendctl: cannot read the job's environment ($dir/.job.env)" >> "$dir/launcher.log"
    echo 1 > "$dir/exit_code.tmp" && mv "$dir/exit_code.tmp" "$dir/exit_code"
    exit 1
fi
rm -f "$dir/.job.env"
eval "$job_env"
unset job_env
echo "$$" > "$dir/pid"
fifo="$dir/.launcher.out"
rm -f "$fifo" && mkfifo "$fifo" || exit 1
if command -v bash >/dev/null 2>&1; then
    bash "$dir/stamp_lines.sh" < "$fifo" > "$dir/launcher.log" 2>&1 &
else
    cat < "$fifo" > "$dir/launcher.log" &
fi
stamper=$!
# shellcheck disable=SC1091  # written by ascendctl at start
. "$dir/.job.cmd" < /dev/null > "$fifo" 2>&1
rc=$?
# the stamper ends when the last writer is gone; give it a moment (5 s) to write the launcher's last lines
waited=0
while kill -0 "$stamper" 2>/dev/null && [ "$waited" -lt 5000 ]; do
    # a tenth of a second; a whole one where sleep takes whole seconds only (POSIX's)
    if sleep 0.1 2>/dev/null; then waited=$((waited + 100)); else sleep 1; waited=$((waited + 1000)); fi
done
rm -f "$fifo"
echo "$rc" > "$dir/exit_code.tmp" && mv "$dir/exit_code.tmp" "$dir/exit_code"
