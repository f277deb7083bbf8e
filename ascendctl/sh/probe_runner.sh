#!/bin/sh
# The probe's section runner (ascendctl/remote/probe.py puts this text in front of the sections it frames).
#
# Every section runs in a forked subshell (no exec: a probe has twenty sections and a node's CPU is its
# budget too); one watchdog per probe stops a section that outlives its limit: TERM to the section and
# everything it started, KILL GRACE centiseconds later to whatever ignored TERM, as `timeout -k` would,
# but without a `timeout` and an `sh` process per section. The watchdog learns of each section start and end
# over a pipe (fd 3) and wakes twice a second from a ticker; it needs no file, no `timeout`, no `setsid`.
#
# Set by probe.py before this text: SECTION_CS (a section's limit, centiseconds), GRACE_CS (TERM to KILL),
# BUDGET_CS (the whole probe's time, centiseconds; empty: no budget), BUDGET_TEXT (the budget as said).
: "${SECTION_CS:=1000}" "${GRACE_CS:=200}" "${BUDGET_CS:=}" "${BUDGET_TEXT:=}"
# set by the probe when it starts (now + BUDGET_CS)
budget_end=${budget_end:-0}

# asct_now: centiseconds since boot through the shell's own `read` (no process); `date` where /proc is not there
asct_now() {
    if read -r up _ </proc/uptime 2>/dev/null; then now=${up%.*}${up#*.}; else now=$(date +%s)00; fi
}

# asct_tree PID: the pid and all its descendants, from /proc (a section's tools and what they started)
asct_tree() {
    all=" $1 "
    more=1
    while [ -n "$more" ]; do
        more=
        for f in /proc/[0-9]*/stat; do
            read -r line <"$f" 2>/dev/null || continue
            # shellcheck disable=SC2086  # the fields after `(comm) ` are words: state ppid ...
            set -- ${line##*) }
            case "$all" in
            *" $2 "*)
                q=${f#/proc/}
                q=${q%/stat}
                case "$all" in *" $q "*) ;; *) all="$all$q " more=1 ;; esac
                ;;
            esac
        done
    done
    echo "$all"
}

# asct_reap: KILL what was TERMed GRACE_CS ago and still lives, with whatever it started since
asct_reap() {
    keep=
    for e in $pending; do
        if [ "$now" -ge "${e#*@}" ]; then
            kill -0 "${e%@*}" 2>/dev/null || continue
            for q in $(asct_tree "${e%@*}"); do kill -KILL "$q" 2>/dev/null; done
        else
            keep="$keep $e"
        fi
    done
    pending=$keep
}

# asct_watch: reads `s PID LIMIT_CS` (a section started), `d PID` (it ended) and ticks `t` on stdin
asct_watch() {
    current='' deadline='' pending=''
    while read -r event pid limit; do
        asct_now
        case "$event" in
        s) current=$pid deadline=$((now + limit)) ;;
        d) [ "$pid" = "$current" ] && current= ;;
        esac
        if [ -n "$current" ] && [ "$now" -ge "$deadline" ]; then
            for q in $(asct_tree "$current"); do
                kill -TERM "$q" 2>/dev/null && pending="$pending $q@$((now + GRACE_CS))"
            done
            current=
        fi
        [ -z "$pending" ] || asct_reap
    done
    # the probe is done; what ignored TERM still holds the output open until its KILL
    while [ -n "$pending" ]; do
        sleep 0.5 2>/dev/null || sleep 1
        asct_now
        asct_reap
    done
    return 0
}

# asct_tick PID: wakes the watchdog twice a second (once where `sleep` takes whole seconds only) until the probe kills
# it, or PID (the sections' shell) is gone another way (its output closed): else the two would live on
asct_tick() {
    while { sleep 0.5 || sleep 1; } >/dev/null 2>&1 </dev/null 3>&- 4>&-; do
        [ -z "$1" ] || kill -0 "$1" 2>/dev/null || return 0
        echo t || return 0
    done
}

# asct_start_ticker: `asct_tick` in the background, told the pid of the shell that runs the sections (its own pid read from
# /proc: `$$` is the top shell's in a subshell)
asct_start_ticker() {
    self=
    if read -r line </proc/self/stat 2>/dev/null; then self=${line%% *}; fi
    asct_tick "$self" >&3 4>&- &
    ticker=$!
}

asct_stop_ticker() {
    kill "$ticker" 2>/dev/null
}

# asct_run SCRIPT: one section, its output and errors on the probe's output, its exit status returned
# (124: stopped at its limit, 137: killed after ignoring TERM, 125: not run, the probe's budget was spent)
asct_run() {
    asct_now
    limit=$SECTION_CS
    if [ -n "$BUDGET_CS" ]; then
        left=$((budget_end - now))
        if [ "$left" -le 0 ]; then
            echo "not run: the probe spent its ${BUDGET_TEXT} on earlier sections"
            return 125
        fi
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    started=$now
    section=$1
    (
        set --
        eval "$section"
    ) </dev/null 2>&1 3>&- 4>&- &
    pid=$!
    echo "s $pid $limit" >&3
    wait "$pid"
    rc=$?
    echo "d $pid" >&3
    if [ "$rc" = 143 ] || [ "$rc" = 137 ]; then
        asct_now
        if [ $((now - started)) -ge "$limit" ]; then
            [ "$rc" = 143 ] && rc=124
        fi
    fi
    return "$rc"
}
