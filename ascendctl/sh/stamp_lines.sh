#!/bin/sh
# stamp_lines.sh [SCRATCH_DIR]: copy stdin to stdout with every line prefixed by the node's local time,
#   "2026-11-23T10:00:00.123456 | line" (triage reads it: ascendctl/triage/times.py STAMP_RX).
# stamp_lines.sh --note TEXT: print TEXT as one stamped line (job_wrapper.sh's notes in launcher.log).
#
# Used by `ascendctl launch` between a node's launcher and its launcher.log (job_wrapper.sh, through a FIFO).
# It must never slow or block the job: it reads what is there in big chunks and stamps every line of a chunk
# with the time the chunk was read (per chunk, not per line). With python3 on the node (wherever torchrun and
# msrun run) a small Python program does it: its reading never waits for its writing (a thread of its own), so a job's
# output is taken from the FIFO as fast as the job writes it; when launcher.log's writing falls behind by
# BUDGET bytes, the oldest output not yet written is dropped and counted (the newest, a crash's last words,
# stays), and a line says so where it was ("ascendctl: N lines (M bytes) dropped: output faster than the
# stamper"). Without python3 (busybox, dash-only nodes) a POSIX sh loop reads chunks with dd and one awk stamps
# them (80-200k lines/s on a 2-core machine, bench/stamper.py; python3's: 330-550k; it waits rather than drops).
# A line longer than PIECE bytes is written as several stamped lines of at most PIECE bytes each, so each
# stamped line stays within 64 KiB (ascendctl's MAX_LINE, tests/test_shell_programs.py checks the two agree)
# and memory stays bounded whatever the job prints; an unterminated last line is stamped too.
# Signals are ignored: the stamper ends at end of input, after the last process writing to it, so a
# launcher's last words (its failure report) are never cut off by a teardown.
trap '' TERM INT HUP
PIECE=65472   # bytes of a line per stamped line: 64 KiB less room for the stamp
BUDGET=16777216   # bytes read but not yet written (python3 only) before output is dropped

# clock: $now, the stamp of this moment; busybox's date has no %N (it prints "%6N"): whole seconds there
fine=0
case $(date +%6N 2>/dev/null) in [0-9][0-9][0-9][0-9][0-9][0-9]) fine=1 ;; esac
clock() {
    if [ "$fine" = 1 ]; then now=$(date +%Y-%m-%dT%H:%M:%S.%6N); else now=$(date +%Y-%m-%dT%H:%M:%S).000000; fi
}

if [ "${1-}" = --note ]; then
    clock
    printf '%s | %s\n' "$now" "$2"
    exit 0
fi

# The Python stamper: python3 -I -S (the job's PYTHONPATH/PYTHONHOME are not ours); Python 3.6 and newer.
# shellcheck disable=SC2016  # Python source, not shell: nothing in it is to be expanded
stamper_py='
import os, signal, sys, threading, time
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
PIECE, BUDGET = int(sys.argv[1]), int(sys.argv[2])
STEP = PIECE // 2
CAPACITY = 65536  # of the FIFO: made bigger where Linux lets us (more room while the reader waits for its turn)
try:
    import fcntl
    fcntl.fcntl(0, 1031, 1 << 20)  # F_SETPIPE_SZ
    CAPACITY = fcntl.fcntl(0, 1032)  # F_GETPIPE_SZ
except Exception:
    pass
cond = threading.Condition()
items = []  # (time read, bytes), or (None, lines, bytes) where input was dropped
held = [0]  # bytes read and not yet written
ended = [False]
clock = [None, b""]

def stamp(t):
    sec = int(t)
    if clock[0] != sec:
        clock[0], clock[1] = sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(sec)).encode()
    return clock[1] + b".%06d | " % int((t - sec) * 1e6)

def pieces(line):
    return [line[i:i + PIECE] for i in range(0, len(line), PIECE)] or [b""]

def stamp_chunk(prefix, data, out):
    """Stamp the complete lines of data into out; return the unfinished rest (at most PIECE bytes)."""
    sep = b"\n" + prefix
    end = data.rfind(b"\n")
    rest = data[end + 1:] if end >= 0 else data
    if end >= 0:
        body = data[:end]
        # a line longer than PIECE holds a whole STEP-aligned window without a newline: one find per window
        if any(body.find(b"\n", k, k + STEP) < 0 for k in range(0, len(body) - STEP + 1, STEP)):
            out.extend((prefix, sep.join([p for line in body.split(b"\n") for p in pieces(line)]), b"\n"))
        else:
            out.extend((prefix, body.replace(b"\n", sep), b"\n"))
    if len(rest) > PIECE:  # a line still arriving: its full pieces go out now (views: written, never copied)
        keep = len(rest) % PIECE or PIECE
        view = memoryview(rest)
        for i in range(0, len(rest) - keep, PIECE):
            out.extend((prefix, view[i:i + PIECE], b"\n"))
        rest = rest[len(rest) - keep:]
    return rest

def write_all(bufs):
    done = os.writev(1, bufs) if len(bufs) < 1000 else 0
    if done < sum(map(len, bufs)):
        view = memoryview(b"".join(bufs))[done:]
        while view:
            view = view[os.write(1, view):]

def writer():
    carry, carry_time = b"", 0.0
    lost = [0, 0, ""]  # lines and bytes that could not be written, and why
    while True:
        with cond:
            while not items and not ended[0]:
                cond.wait()
            batch, size = [], 0
            while items and size < 4 << 20:  # what is taken here is written: the reader drops only what is left
                batch.append(items.pop(0))
                size += len(batch[-1][1]) if batch[-1][0] is not None else 0
            last = ended[0] and not items
        out = []
        for item in batch:
            if item[0] is None:
                if carry:
                    out.extend((stamp(carry_time), carry, b"\n"))
                    carry = b""
                out.append(stamp(time.time()) + b"ascendctl: %d lines (%d bytes) dropped: output faster than the stamper\n"
                           % (item[1], item[2]))
            else:
                carry_time = item[0]
                carry = stamp_chunk(stamp(item[0]), carry + item[1] if carry else item[1], out)
        if last and carry:
            out.extend((stamp(carry_time), carry, b"\n"))
        if lost[1] and out:
            out.insert(0, stamp(time.time()) + b"ascendctl: %d lines (%d bytes) could not be written to this log: %s\n"
                       % (lost[0], lost[1], lost[2].encode()))
        try:
            if out:
                write_all(out)
            lost = [0, 0, ""]
        except OSError as exc:  # a full disk, a closed pipe: keep taking the output (the job must not block)
            lost = [lost[0] + sum(bytes(b).count(b"\n") for b in out), lost[1] + sum(map(len, out)), exc.strerror or str(exc)]
        with cond:
            held[0] -= size
        if last:
            return

def reader():
    while True:
        try:
            chunk = os.read(0, 1 << 20)
        except OSError:
            chunk = b""
        now = time.time()
        with cond:
            # behind by BUDGET: the oldest output not yet taken by the writer goes, the newest (last words) stays
            lines = size = 0
            while items and held[0] + len(chunk) > BUDGET:
                old = items.pop(0)
                if old[0] is None:
                    lines, size = lines + old[1], size + old[2]
                else:
                    lines, size = lines + old[1].count(b"\n"), size + len(old[1])
                    held[0] -= len(old[1])
            if size:
                items.insert(0, (None, lines, size))
            if chunk:
                items.append((now, chunk))
                held[0] += len(chunk)
            else:
                ended[0] = True
            cond.notify()
        if not chunk:
            return
        if len(chunk) < CAPACITY // 4:
            # the FIFO was nearly empty: let more gather before the next read (it has room for far more than the job
            # writes meanwhile), so a job printing in small writes costs a read, a wake-up and a write per many of them
            time.sleep(0.002)

thread = threading.Thread(target=writer)
thread.start()
reader()
thread.join()
'

if command -v python3 >/dev/null 2>&1 && python3 -I -S -c 'import fcntl, threading' >/dev/null 2>&1; then
    python3 -I -S -c "$stamper_py" "$PIECE" "$BUDGET" && exit 0
    status=$?
    clock
    printf '%s | ascendctl: the line stamper failed (python3 exit %s): the rest of the output is not stamped\n' "$now" "$status"
    exec cat
fi

if ! command -v dd >/dev/null 2>&1 || ! command -v awk >/dev/null 2>&1; then
    exec cat  # no way to stamp: the output as it is
fi

# The POSIX fallback: dd count=1 is one read of what is there (up to 64 KiB), passed on to awk as it is; after it a
# marker line carries the stamp (the time it was read). awk holds the chunk's lines until that marker, then writes
# them stamped and flushes, so what was read is in the log at once. A marker lands inside a line when a chunk ends
# mid-line: awk keeps that line's start and goes on with it. Per chunk two processes (dd, date), none per line.
scratch=${1:-${TMPDIR:-/tmp}}
records=$(mktemp "$scratch/.stamp_dd.XXXXXX" 2>/dev/null) || records="$scratch/.stamp_dd.$$"
marker=$(printf '\036ascendctl-stamp-%s-%s\036' "$$" "$(date +%s)")
# shellcheck disable=SC2016  # awk source, not shell
stamper_awk='
function put(s) {
    while (length(s) > max) { print t " | " substr(s, 1, max); s = substr(s, max + 1) }
    print t " | " s
}
BEGIN { ml = length(m); n = 0; p = "" }
{
    i = index($0, m)
    if (!i) { held[++n] = p $0; p = ""; next }
    p = p substr($0, 1, i - 1)
    t = substr($0, i + ml)
    for (k = 1; k <= n; k++) put(held[k])
    n = 0
    while (length(p) > max) { print t " | " substr(p, 1, max); p = substr(p, max + 1) }
    fflush()
}
END {
    for (k = 1; k <= n; k++) put(held[k])
    if (p != "") put(p)
}
'
# mawk fills its input buffer before it looks at it: a quiet job's last lines would wait there for more output.
# -W interactive makes it take lines as they come; other awks (busybox, gawk) already do.
option=-v value=_=0
case $(awk -W version < /dev/null 2>&1) in *mawk*) option=-W value=interactive ;; esac
while LC_ALL=C dd bs=65536 count=1 2>"$records"; do
    IFS= read -r read_records < "$records"
    case $read_records in 0+0*) break ;; esac  # "0+0 records in": the end of input
    clock
    printf '%s%s\n' "$marker" "$now"
done | LC_ALL=C awk "$option" "$value" -v m="$marker" -v max="$PIECE" "$stamper_awk"
rm -f "$records"
# awk gone before the end of input (it failed): the rest unstamped, never a closed pipe for the job
exec cat
