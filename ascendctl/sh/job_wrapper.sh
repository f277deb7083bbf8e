#!/bin/sh
# job_wrapper.sh DIR: run one node's launcher for `ascendctl launch`, started detached under setsid.
#
# DIR holds what `ascendctl launch` unpacked there (umask 077): .job.env (exports; read, then deleted, so no
# value is ever in a command line or left on disk), .job.cmd (the launcher command line) and stamp_lines.sh.
# The launcher writes into a FIFO read by the stamper, so the launcher runs in this shell, whose TERM handler
# keeps it alive to record the exit status; the stamper ignores signals and ends after the last writer.
# Writes: pid, launcher.log (every line stamped with this node's time), exit_code (atomically, at the end).
dir=$1
echo "$$" > "$dir/pid"
# A handler (not an ignore, which children would inherit) keeps this shell alive to record the status.
trap : TERM INT HUP
# shellcheck disable=SC1091  # written by ascendctl at start
. "$dir/.job.env"
rm -f "$dir/.job.env"
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
# the stamper ends when the last writer is gone; give it a moment to write the launcher's last lines
i=0
while kill -0 "$stamper" 2>/dev/null && [ "$i" -lt 50 ]; do
    sleep 0.1
    i=$((i + 1))
done
rm -f "$fifo"
echo "$rc" > "$dir/exit_code.tmp" && mv "$dir/exit_code.tmp" "$dir/exit_code"
