#!/bin/sh
# follow_log.sh DIR PID NONCE [OFFSET [BEAT]]: print DIR/launcher.log from byte OFFSET as it grows, until the launcher's
# shell (PID) has ended, then a last line "@@NONCE exit RC TIME@@" (RC: the exit status, or "none" when the
# launcher vanished without one; TIME: the exit file's mtime, epoch seconds).
# With BEAT (whole seconds, > 0): "@@NONCE alive@@" and a newline whenever BEAT seconds passed with nothing sent, so
# the reader can tell a quiet job (training may print nothing for minutes) from a node that went dark; it is written
# between reads of the log, never inside one, and the reader removes it wherever it lands (also after a partial line).
# Whether the launcher is done is decided before each read, so the last read sees all of its output.
# POSIX sh plus stat -c, head -c, date -r and date +%s, which GNU coreutils and busybox both have; busybox's date has
# no %N (it prints "%N"), so TIME then has whole seconds; a sleep of whole seconds only (POSIX's) polls once a second.
dir=$1 pid=$2 nonce=$3 off=${4:-0} beat=${5:-0}
log="$dir/launcher.log" exit_file="$dir/exit_code"
# clock: whole seconds on a monotonic clock, read by the shell itself (no process every poll); date where /proc is not
tick() { if read -r clock _ < /proc/uptime 2>/dev/null; then clock=${clock%.*}; else clock=$(date +%s); fi; }
tick; sent=$clock
while :; do
    fin=0
    [ -f "$exit_file" ] && fin=1
    kill -0 "$pid" 2>/dev/null || fin=1
    size=$(stat -c %s "$log" 2>/dev/null || echo 0)
    if [ "$size" -gt "$off" ]; then
        tail -c +$((off + 1)) "$log" | head -c $((size - off))
        off=$size
        tick; sent=$clock
    fi
    [ "$fin" = 1 ] && break
    if [ "$beat" -gt 0 ]; then
        tick
        if [ $((clock - sent)) -ge "$beat" ]; then
            printf '@@%s alive@@\n' "$nonce"
            sent=$clock
        fi
    fi
    sleep 0.2 2>/dev/null || sleep 1
done
rc=$(cat "$exit_file" 2>/dev/null)
t=$(date -r "$exit_file" +%s.%N 2>/dev/null)
case $t in *[!0-9.]*) t=$(date -r "$exit_file" +%s 2>/dev/null) ;; esac
printf '\n@@%s exit %s %s@@\n' "$nonce" "${rc:-none}" "${t:-none}"
