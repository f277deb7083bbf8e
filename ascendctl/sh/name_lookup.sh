#!/bin/sh
# Name resolution as a training job meets it (preflight's `name_resolution` check). A section of preflight's
# cross-node round, so it runs under the probe runner's watchdog (section_timeout); it also stands alone.
#
# Usage: name_lookup.sh MAX_CS STOP_S JOBS SLOW_CAP ADDRESS...
#   MAX_CS    a lookup that takes longer (centiseconds) is slow
#   STOP_S    each lookup is stopped after this many seconds, where `timeout` works (a stalled resolver takes 10 s+)
#   JOBS      lookers running side by side; looker J takes every JOBS-th address from the J-th
#   SLOW_CAP  a looker stops after this many slow lookups: a stalled resolver makes every lookup slow
#
# What gloo and torch do: gethostname() + getaddrinfo() for the node's own address, and getnameinfo() (a reverse
# lookup) of every peer it connects to. Prints one line per lookup (words; `-` where there is nothing):
#   asked N                                   how many addresses were given
#   host NAME CS RC ADDR...                   `getent ahosts $(uname -n)`: centiseconds, exit status, its addresses
#   addr ADDR CS RC NAME FCS FRC OK FADDR...  `getent hosts ADDR`, then `getent ahosts NAME`: OK is 1 when NAME maps
#                                             back to ADDR; FADDR: NAME's first three addresses
#   stopped N                                 a looker stopped after SLOW_CAP slow lookups, N addresses unchecked
#   getent missing
# RC 124 (137, 143): `timeout` stopped the lookup. Times come from /proc/uptime through `read` (no process); a slow
# lookup that answered is asked once more and the faster time counts, so a busy node is not taken for a slow resolver.
set -f
max=$1 stop_s=$2 nj=$3 cap=$4
shift 4
list=$*
echo "asked $#"
command -v getent >/dev/null 2>&1 || { echo 'getent missing'; exit 0; }
stop=
if command -v timeout >/dev/null 2>&1 && timeout "$stop_s" true 2>/dev/null; then stop="timeout $stop_s"; fi

# now: centiseconds since boot (leading zeros dropped: the shell's arithmetic reads them as octal)
now() {
    if read -r up _ </proc/uptime 2>/dev/null; then
        t=${up%.*}${up#*.}
        t=${t#"${t%%[!0]*}"}
        now=${t:-0}
    else
        now=$(date +%s)00
    fi
}

# look_once KIND KEY: `getent KIND KEY`, bounded by `timeout` where it works; sets out, rc and cs (its centiseconds)
look_once() {
    now
    t0=$now
    # shellcheck disable=SC2086  # $stop is empty or the words `timeout N`
    out=$($stop getent "$1" "$2" 2>/dev/null)
    rc=$?
    now
    cs=$((now - t0))
}

stopped() {
    [ "$rc" = 124 ] || [ "$rc" = 137 ] || [ "$rc" = 143 ]
}

# slow: was the last lookup slower than MAX_CS, or stopped?
slow() {
    [ "$cs" -gt "$max" ] || stopped
}

# look KIND KEY: look_once, asked again when it was slow but answered (a busy node may just not have run getent
# for a while; a stalled resolver is slow again): the faster answer counts. A stopped lookup is not asked again.
look() {
    look_once "$1" "$2"
    if slow && ! stopped; then
        o1=$out r1=$rc c1=$cs
        look_once "$1" "$2"
        if stopped || [ "$cs" -gt "$c1" ]; then out=$o1 rc=$r1 cs=$c1; fi
    fi
}

# addrs_of TEXT: the distinct first words of getent's lines, as " a b c " (its own variables start with w_: a shell
# function shares the caller's)
addrs_of() {
    addrs=' '
    w_nl='
'
    w_rest=$1
    while [ -n "$w_rest" ]; do
        w_line=${w_rest%%"$w_nl"*}
        case "$w_rest" in *"$w_nl"*) w_rest=${w_rest#*"$w_nl"} ;; *) w_rest= ;; esac
        w_a=${w_line%%[	 ]*}
        [ -n "$w_a" ] || continue
        case "$addrs" in *" $w_a "*) ;; *) addrs="$addrs$w_a " ;; esac
    done
}

# looker J: reverse-resolves its share of the addresses, then forward-resolves the names they give
looker() {
    j=$1 i=0 n_slow=0 left=0
    for a in $list; do
        i=$((i + 1))
        [ $(((i - 1) % nj)) -eq "$j" ] || continue
        if [ "$n_slow" -ge "$cap" ]; then
            left=$((left + 1))
            continue
        fi
        look hosts "$a"
        rcs=$cs rrc=$rc name=-
        if slow; then n_slow=$((n_slow + 1)); fi
        if [ "$rc" = 0 ]; then
            # shellcheck disable=SC2086  # getent's words: ADDRESS NAME ALIASES...
            set -- $out
            name=${2:--}
        fi
        fcs=- frc=- ok=- first=
        if [ "$name" != - ] && [ "$n_slow" -lt "$cap" ]; then
            look ahosts "$name"
            fcs=$cs frc=$rc ok=0
            if slow; then n_slow=$((n_slow + 1)); fi
            addrs_of "$out"
            case "$addrs" in *" $a "*) ok=1 ;; esac
            # shellcheck disable=SC2086  # the addresses are words
            set -- $addrs
            first="$1 $2 $3"
        fi
        echo "addr $a $rcs $rrc $name $fcs $frc $ok $first"
    done
    [ "$left" = 0 ] || echo "stopped $left"
}

(
    h=$(uname -n 2>/dev/null)
    if [ -n "$h" ]; then
        look ahosts "$h"
        addrs_of "$out"
        echo "host $h $cs $rc$addrs"
    else
        echo "host - 0 2"
    fi
) &
j=0
while [ "$j" -lt "$nj" ]; do
    looker "$j" &
    j=$((j + 1))
done
wait
