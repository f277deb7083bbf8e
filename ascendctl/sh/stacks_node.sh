#!/bin/sh
# stacks_node.sh MARKER DIR STAMP SIG SIGNUM WAIT_MS MAX_BYTES NONCE SPY_MS [FR_BYTES]: the Python stack of every rank of one
# node's part of a job (`ascendctl stacks`), taken at once, kept in DIR/stacks/STAMP/ and printed back framed.
#
# MARKER: ASCENDCTL_JOB=<job>/<node>, in the environment of every process of the job. DIR: the node's job directory.
# The ranks are the marked processes whose environment says so (torchrun: RANK and LOCAL_RANK; msrun: MS_ROLE=MS_WORKER
# with RANK_ID or MS_NODE_ID, DEVICE_ID its local rank), never guessed. A rank's own children (DataLoader workers...)
# carry the same rank: only the topmost process of a rank that registered the hook is signalled (a Python process of a
# rank without the hook is listed as such; other programs with a rank's variables are not ranks). The hook (launch's
# sitecustomize.py) writes DIR/stacks/live/rank-<rank>.<pid>.txt: its first line, then each dump appended.
#
# Every rank is sent SIG (WINCH) with one `kill`, where /proc/PID/status says it catches SIGNUM; then the script waits
# (at most WAIT_MS) until each file has grown and stopped growing, or its process is gone. Each dump (the file's first
# line and what the signal added) goes to DIR/stacks/STAMP/ (STAMP-2, ... when it exists: never overwritten), with
# ranks.txt. Where py-spy is on PATH it also dumps every rank (--json, --native where it can), bounded by SPY_MS.
# A rank started by `launch --flight-recorder` (ASCENDCTL_FLIGHT_RECORDER=1 in its environment) is also asked for its
# torch Flight Recorder: live/fr-rank-<rank>.<pid>.request, which the hook's thread answers with live/fr-rank-<rank>.
# <pid>.json (the wait covers it too); kept as rank-<rank>.<pid>.fr.json, printed back (FR_BYTES at most) as kind
# flight-recorder. Without the flag nothing of this happens.
#
# Output, each frame a line @@NONCE ...@@: `node INCIDENT_DIR SENT_EPOCH PYSPY(yes|no)`, then per rank `rank PID RANK
# LOCAL LAUNCHER STATUS` (STATUS dumped, timeout, exited, nohook, nohandler) followed by its files, each `file PID KIND
# BYTES`, at most MAX_BYTES of it, a newline, `end`; last `done`. POSIX sh and the tools busybox has too.
marker=$1 dir=$2 stamp=$3 sig=$4 signum=$5 wait_ms=$6 max_bytes=$7 nonce=$8 spy_ms=${9:-10000} fr_bytes=${10:-$7}
live=$dir/stacks/live
nl='
'
frame() { printf '@@%s %s@@\n' "$nonce" "$*"; }
digits() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }
# now: centiseconds since boot (the fraction of /proc/uptime has two digits; 1 in front keeps "08" from being octal)
uptime_cs() {
    read -r up _ </proc/uptime 2>/dev/null || return 1
    now=$((${up%.*} * 100 + 1${up#*.} - 100))
}
# epoch: now as seconds since 1970, with a fraction where `date` has %N (busybox's may print it as is)
epoch() {
    t=$(date +%s.%N 2>/dev/null)
    case $t in '' | *[!0-9.]*) t=$(date +%s) ;; esac
}
nap() { sleep 0.05 2>/dev/null || sleep 1; }
# alive PID: the process runs (a zombie, ended but not yet reaped by its launcher, does not: it will never answer)
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    while IFS= read -r line; do
        case $line in State:*Z* | State:*X*) return 1 ;; State:*) return 0 ;; esac
    done <"/proc/$1/status" 2>/dev/null
    return 0
}
size_of() { s=$(wc -c <"$1" 2>/dev/null) && s=$((s + 0)) || s=0; }

# "RANK LOCAL LAUNCHER" of a rank of the job, from its environment; nothing for any other process
rank_of() {
    tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | {
        r='' l='' role='' rid='' nid='' dev=''
        while IFS= read -r kv; do
            case $kv in
            RANK=*) r=${kv#RANK=} ;;
            LOCAL_RANK=*) l=${kv#LOCAL_RANK=} ;;
            MS_ROLE=*) role=${kv#MS_ROLE=} ;;
            RANK_ID=*) rid=${kv#RANK_ID=} ;;
            MS_NODE_ID=*) nid=${kv#MS_NODE_ID=} ;;
            DEVICE_ID=*) dev=${kv#DEVICE_ID=} ;;
            esac
        done
        if digits "$r" && digits "$l"; then
            echo "$r $l torchrun"
        elif [ "$role" = MS_WORKER ]; then
            [ -n "$rid" ] || rid=$nid
            digits "$dev" || dev=-
            ! digits "$rid" || echo "$rid $dev msrun"
        fi
    }
}

# 1. the job's ranks: "pid rank local launcher ppid caught" lines (caught: SIGNUM has a handler)
workers=''
pids=$(grep -lzxF "$marker" /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/\([0-9]*\)/environ$|\1|')
for p in $pids; do
    info=$(rank_of "$p")
    [ -n "$info" ] || continue
    ppid=0 mask=0
    while read -r key value _; do
        case $key in PPid:) ppid=$value ;; SigCgt:) mask=$value ;; esac
    done <"/proc/$p/status" 2>/dev/null
    # the hex digit of SigCgt holding SIGNUM's bit (bit SIGNUM-1, counted from the right)
    rest=$mask k=0
    while [ "$k" -lt $(((signum - 1) / 4)) ] && [ -n "$rest" ]; do rest=${rest%?} k=$((k + 1)); done
    d=${rest#"${rest%?}"}
    caught=0
    case $d in [0-9a-fA-F]) caught=$(((0x$d >> ((signum - 1) % 4)) & 1)) ;; esac
    workers="$workers$nl$p $info $ppid $caught"
done
workers="$workers$nl"

# 2. which to signal: the topmost registered process of each rank (its parent is not a registered one of that rank)
targets='' roots=''
while IFS=' ' read -r p rank lrank launcher ppid caught; do
    [ -n "$p" ] || continue
    if [ -f "$live/rank-$rank.$p.txt" ]; then
        case $workers in *"$nl$ppid $rank "*) [ -f "$live/rank-$rank.$ppid.txt" ] && continue ;; esac
        if [ "$caught" = 1 ]; then
            size_of "$live/rank-$rank.$p.txt"
            targets="$targets $p" roots="$roots$nl$p $rank $lrank $launcher signalled $s"
        else
            roots="$roots$nl$p $rank $lrank $launcher nohandler 0"
        fi
    else
        case $workers in *"$nl$ppid $rank "*) continue ;; esac # a rank's own child, the hook or not
        # a Python without the hook; not a helper that inherited the rank's variables (msrun's `tail -f` of its log)
        exe=$(readlink "/proc/$p/exe" 2>/dev/null)
        case ${exe##*/} in python* | pypy*) ;; *) continue ;; esac
        roots="$roots$nl$p $rank $lrank $launcher nohook 0"
    fi
done <<EOF
$workers
EOF

# the Flight Recorder requests (launch --flight-recorder): "pid:rank" of each rank with the hook and the flag
flight=''
while IFS=' ' read -r p rank _ _ state _; do
    case $state in signalled | nohandler) ;; *) continue ;; esac
    grep -qzxF ASCENDCTL_FLIGHT_RECORDER=1 "/proc/$p/environ" 2>/dev/null || continue
    rm -f "$live/fr-rank-$rank.$p.json"
    : >"$live/fr-rank-$rank.$p.request" 2>/dev/null && flight="$flight $p:$rank"
done <<EOF
$roots
EOF

epoch
sent=$t
# shellcheck disable=SC2086  # a list of pids
[ -z "$targets" ] || kill -s "$sig" $targets 2>/dev/null

# 3. wait until every signalled rank's file grew and stopped growing, or its process is gone (WAIT_MS at most)
start='' waited=0 last=''
uptime_cs && start=$now
while [ -n "$targets$flight" ]; do
    sizes='' pending=0
    for pr in $flight; do # a request is removed by the rank's thread once it has written the dump
        [ -e "$live/fr-rank-${pr#*:}.${pr%%:*}.request" ] && alive "${pr%%:*}" && pending=1
    done
    while IFS=' ' read -r p rank lrank launcher state pre; do
        [ "$state" = signalled ] || continue
        size_of "$live/rank-$rank.$p.txt"
        sizes="$sizes $p:$s"
        if [ "$s" -le "$pre" ]; then
            alive "$p" && pending=1
        fi
    done <<EOF
$roots
EOF
    [ "$pending" = 0 ] && [ "$sizes" = "$last" ] && break
    last=$sizes
    if [ -n "$start" ] && uptime_cs; then elapsed=$(((now - start) * 10)); else elapsed=$waited; fi
    [ "$elapsed" -ge "$wait_ms" ] && break
    nap
    waited=$((waited + 50))
done

# 4. this capture's folder, never one that exists
incident=''
if [ -n "$roots" ]; then
    mkdir -p "$dir/stacks" 2>/dev/null
    incident=$dir/stacks/$stamp n=1
    while ! mkdir "$incident" 2>/dev/null; do
        if [ ! -e "$incident" ] || [ "$n" -ge 1000 ]; then
            incident=''
            break
        fi
        n=$((n + 1)) incident=$dir/stacks/$stamp-$n
    done
fi
frame node "${incident:--}" "$sent" "$(command -v py-spy >/dev/null 2>&1 && echo yes || echo no)"

# 5. each rank's dump into the folder; py-spy where the node has it (all ranks at once, bounded by SPY_MS)
table=''
while IFS=' ' read -r p rank lrank launcher state pre; do
    [ -n "$p" ] || continue
    status=$state
    if [ "$state" = signalled ]; then
        f=$live/rank-$rank.$p.txt
        size_of "$f"
        if [ "$s" -gt "$pre" ]; then status=dumped; elif alive "$p"; then status=timeout; else status=exited; fi
        if [ "$status" = dumped ] && [ -n "$incident" ]; then
            { head -n 1 "$f"; tail -c +$((pre + 1)) "$f"; } >"$incident/rank-$rank.$p.txt" 2>/dev/null
        fi
    fi
    table="$table$nl$p $rank $lrank $launcher $status"
done <<EOF
$roots
EOF
[ -z "$incident" ] || printf '%s\n' "pid rank local_rank launcher status$table" >"$incident/ranks.txt"
for pr in $flight; do
    p=${pr%%:*} rank=${pr#*:}
    rm -f "$live/fr-rank-$rank.$p.request"
    [ -n "$incident" ] && [ -f "$live/fr-rank-$rank.$p.json" ] && mv -f "$live/fr-rank-$rank.$p.json" "$incident/rank-$rank.$p.fr.json"
done
if [ -n "$incident" ] && command -v py-spy >/dev/null 2>&1; then
    bound=''
    command -v timeout >/dev/null 2>&1 && bound="timeout $((spy_ms / 1000 + 1))"
    while IFS=' ' read -r p rank _; do
        [ -n "$p" ] || continue
        out=$incident/rank-$rank.$p.py-spy.json
        # shellcheck disable=SC2086  # $bound: `timeout SECONDS`, or nothing
        { $bound py-spy dump --pid "$p" --json --native </dev/null >"$out" 2>"$out.err" ||
            $bound py-spy dump --pid "$p" --json </dev/null >"$out" 2>"$out.err"; } && rm -f "$out.err" &
    done <<EOF
$table
EOF
    wait
fi

# 6. everything printed back, framed, each file at most MAX_BYTES
show() { # PID KIND FILE [MAX_BYTES]
    [ -s "$3" ] || return 0
    size_of "$3"
    frame file "$1" "$2" "$s"
    head -c "${4:-$max_bytes}" "$3"
    printf '\n'
    frame end
}
while IFS=' ' read -r p rank lrank launcher status; do
    [ -n "$p" ] || continue
    frame rank "$p" "$rank" "$lrank" "$launcher" "$status"
    [ -n "$incident" ] || continue
    show "$p" faulthandler "$incident/rank-$rank.$p.txt"
    show "$p" py-spy "$incident/rank-$rank.$p.py-spy.json"
    show "$p" py-spy-error "$incident/rank-$rank.$p.py-spy.json.err"
    show "$p" flight-recorder "$incident/rank-$rank.$p.fr.json" "$fr_bytes"
done <<EOF
$table
EOF
frame "done"
