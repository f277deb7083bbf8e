#!/bin/sh
# job_wrapper.sh DIR: run one node's launcher for `ascendctl launch`, started detached under setsid.
#
# DIR holds what `ascendctl launch` unpacked there (umask 077): .job.env (exports; read, then deleted before
# anything else, so no value is ever in a command line or left on disk), .job.cmd (the launcher command line)
# and stamp_lines.sh. POSIX sh, the stamper too (python3 makes it faster where the node has it).
# The launcher writes into a FIFO read by the stamper, so the launcher runs in this shell, whose TERM handler
# keeps it alive to record the exit status; the stamper ignores signals and ends after the last writer.
# Writes: pid, launcher.log (every line stamped with this node's time; appended to, so the notes of this
# shell and the stamper's lines never overwrite each other), exit_code (atomically, at the end).
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
if [ -r "$dir/stamp_lines.sh" ]; then
    /bin/sh "$dir/stamp_lines.sh" "$dir" < "$fifo" >> "$dir/launcher.log" 2>&1 &
else
    cat < "$fifo" >> "$dir/launcher.log" &  # never a FIFO without a reader: the launcher would die of SIGPIPE
fi
stamper=$!
# shellcheck disable=SC1091  # written by ascendctl at start
. "$dir/.job.cmd" < /dev/null > "$fifo" 2>&1
rc=$?
# The stamper ends when the last writer is gone, once it wrote what it holds (a long line, a burst): wait for it while
# launcher.log grows. It may never end: a child of the launcher that outlives it keeps the FIFO open. So stop waiting
# after 5 s without progress, or 300 s in all, and say so in the log (the exit status must be recorded).
log="$dir/launcher.log"
size() { stat -c %s "$log" 2>/dev/null || wc -c < "$log" 2>/dev/null || echo 0; }
last=$(size) still=0 waited=0
while kill -0 "$stamper" 2>/dev/null; do
    if [ "$still" -ge 5000 ] || [ "$waited" -ge 300000 ]; then
        if [ "$still" -ge 5000 ]; then why="for 5 s nothing more was written"; else why="it was still writing after 300 s"; fi
        /bin/sh "$dir/stamp_lines.sh" --note "ascendctl: the launcher exited with status $rc; stopped waiting for the rest of its output ($why): a process it started still holds its output open" >> "$log"
        break
    fi
    # a tenth of a second; a whole one where sleep takes whole seconds only (POSIX's)
    if sleep 0.1 2>/dev/null; then step=100; else sleep 1; step=1000; fi
    waited=$((waited + step))
    now=$(size)
    if [ "$now" = "$last" ]; then still=$((still + step)); else last=$now still=0; fi
done
rm -f "$fifo"
echo "$rc" > "$dir/exit_code.tmp" && mv "$dir/exit_code.tmp" "$dir/exit_code"
