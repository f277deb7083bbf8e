#!/usr/bin/env bash
# Run the whole ascendctl test suite, installing what it needs first:
# the Debian packages the real test hosts use (sshd, chronyd, libfaketime, ...),
# then a virtualenv in .venv with exactly the versions in requirements/test.lock (hashes checked).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k inventory`.
#
# `bash scripts/test.sh --lowest [PYTEST ARGS]` runs the same suite in .venv-lowest with ascendctl's
# dependencies at the lowest versions pyproject.toml allows (the test tools, torch and MindSpore as
# locked): the declared ranges are honest. Not run in CI; run it before changing a range.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
lowest=0
if [ "${1-}" = "--lowest" ]; then
    venv=.venv-lowest
    lowest=1
    shift
fi

packages=(openssh-server openssh-client chrony libfaketime iputils-ping iproute2 clustershell pdsh procps util-linux shellcheck chromium slurm-wlm munge busybox dash)
missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "scripts/test.sh: need root to install: ${missing[*]}" >&2
        exit 1
    fi
    # Installing chrony or openssh-server must not start the machine's own daemons:
    # a system chronyd would steer this machine's clock and reach for public servers.
    added_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        added_policy=1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

python=${PYTHON:-python3}
pip=(-m pip install -q --disable-pip-version-check)
# The venv is built anew whenever the lock, pyproject.toml or the mode changed: nothing left over from
# an earlier install can hide a package the lock lacks.
want="$(cat requirements/test.lock pyproject.toml | sha256sum | cut -d' ' -f1) lowest=$lowest"
if [ "$(cat "$venv/.ascendctl-installed" 2>/dev/null)" != "$want" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # Every package pinned with its hash; pip refuses the lot if one is missing from the lock.
    "$venv/bin/python" "${pip[@]}" --require-hashes -r requirements/test.lock
    if [ "$lowest" = 1 ]; then
        # ascendctl's dependencies at the floors of their ranges (what they need themselves, pip resolves)
        mapfile -t floors < <("$venv/bin/python" - <<'PY'
import re, tomllib
for spec in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    name, floor = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([^,;\s]+)", spec).groups()
    print(f"{name}=={floor}")
PY
)
        "$venv/bin/python" "${pip[@]}" "${floors[@]}"
        "$venv/bin/python" -m pip check
    fi
    # ascendctl itself, editable; its build backend (hatchling) is in the lock: nothing unpinned is fetched
    "$venv/bin/python" "${pip[@]}" --no-deps --no-build-isolation -e .
    echo "$want" > "$venv/.ascendctl-installed"
fi
# The type check is part of the suite: mypy --strict over the package (settings in pyproject.toml); with no arguments
# it runs once the two real-host lanes below have started.
# The whole suite (no arguments) runs in three lanes side by side, so that it ends within CI's 20 minutes on 2 cores:
# the real-host tests mostly wait on test hosts (timeouts, daemons, jobs), the unit tests mostly compute.
#   lane 1: the unit tests, then the real-host files of tests/cluster in `after_units`;
#   lane 2: tests/adversarial and the tests/cluster files in `beside_adversarial`;
#   lane 3: every other file of tests/cluster (a new file lands here).
# The lists keep the lanes about even (from per-file times of a whole run; move a file when one lane grows).
# The test hosts' harness takes a lock per cluster, so no two lanes share one. Each pytest prints its own report (lanes
# 2 and 3 at the end); the exit status is the first failure in lane order (mypy's first). With arguments: one pytest, as asked.
if [ "$#" -eq 0 ]; then
    after_units=(tests/cluster/test_slurm_hosts.py tests/cluster/test_launch_hosts.py)
    beside_adversarial=(tests/cluster/test_nonroot_hosts.py tests/cluster/test_ssh_config_hosts.py
                        tests/cluster/test_known_hosts_hosts.py tests/cluster/test_exec_hosts.py
                        tests/cluster/test_preflight_hosts.py tests/cluster/test_folding_hosts.py
                        tests/cluster/test_render_hosts.py tests/cluster/test_collect_hosts.py
                        tests/cluster/test_selection_hosts.py tests/cluster/test_json_schemas_hosts.py
                        tests/cluster/test_scale_hosts.py tests/cluster/test_harness.py)
    elsewhere=("${after_units[@]}" "${beside_adversarial[@]}")
    lane2_log=$(mktemp)
    lane3_log=$(mktemp)
    "$venv/bin/python" -m pytest tests/adversarial "${beside_adversarial[@]}" > "$lane2_log" 2>&1 &
    lane2=$!
    "$venv/bin/python" -m pytest tests/cluster "${elsewhere[@]/#/--ignore=}" > "$lane3_log" 2>&1 &
    lane3=$!
    # Every command here runs as a background job this script waits for (`run_lane1`): a signal this script traps
    # interrupts that wait at once, and every pid to stop is known. Lanes 2 and 3 ignore SIGINT, so a stop
    # (Ctrl-C, a CI timeout, a closed terminal) sends them SIGTERM, on which the harness tears its test hosts down before
    # the pytest ends (tests/cluster/harness.teardown_on_signals; a whole process group sent SIGTERM reaches it directly).
    # The whole suite also ends by a deadline (ASCENDCTL_SUITE_LIMIT, 50 minutes; CI allows 90 with the install): a
    # lane that hangs gets SIGTERM then (SIGKILL 2 minutes later), and every lane's report is still printed (a test still running after 10 minutes
    # has every thread's traceback dumped: faulthandler_timeout in pyproject.toml).
    lane1=
    limit_hit=0
    # shellcheck disable=SC2317  # called from the traps below
    stop_lanes() {
        kill -TERM "$lane2" "$lane3" ${lane1:+"$lane1"} 2>/dev/null || true
        wait "$lane2" "$lane3" ${lane1:+"$lane1"} 2>/dev/null || true
    }
    # shellcheck disable=SC2317
    deadline_reached() {
        limit_hit=1
        echo "scripts/test.sh: the suite's ${suite_limit}s limit is reached: every lane still running gets SIGTERM" >&2
        kill -TERM "$lane2" "$lane3" ${lane1:+"$lane1"} 2>/dev/null || true
    }
    suite_limit=${ASCENDCTL_SUITE_LIMIT:-3000}
    (
        trap 'kill "$timer" 2>/dev/null; exit 0' TERM
        sleep "$suite_limit" &
        timer=$!
        wait "$timer" && kill -USR1 $$ || exit 0
        sleep 120 &
        timer=$!
        wait "$timer" && kill -USR2 $$
    ) >/dev/null 2>&1 &
    watchdog=$!
    trap 'kill "$watchdog" 2>/dev/null; stop_lanes; exit 130' INT
    trap 'kill "$watchdog" 2>/dev/null; stop_lanes; exit 143' TERM
    trap 'kill "$watchdog" 2>/dev/null; stop_lanes; exit 129' HUP
    trap 'deadline_reached' USR1
    # two minutes after the SIGTERM, what still runs (a test that caught it, a teardown that hangs) is killed
    trap 'kill -KILL "$lane2" "$lane3" ${lane1:+"$lane1"} 2>/dev/null || true' USR2
    # wait_for PID: its exit status, once it has ended (a trapped signal cuts `wait` short; the job goes on)
    wait_for() {
        local rc=0
        while :; do
            rc=0
            wait "$1" || rc=$?
            kill -0 "$1" 2>/dev/null || return "$rc"
        done
    }
    # run_lane1 COMMAND...: a command of lane 1 as a waited-for background job; SIGINT as in the foreground
    # (`env --default-signal`: tests send it to what they start, which would inherit the background's SIG_IGN)
    run_lane1() {
        local rc=0
        if [ "$limit_hit" = 1 ]; then echo "scripts/test.sh: not run (the suite's limit): $*" >&2; return 124; fi
        env --default-signal=INT "$@" &
        lane1=$!
        wait_for "$lane1" || rc=$?
        lane1=
        return "$rc"
    }
    mypy_rc=0
    run_lane1 "$venv/bin/python" -m mypy || mypy_rc=$?
    units_rc=0
    run_lane1 "$venv/bin/python" -m pytest --ignore=tests/cluster --ignore=tests/adversarial || units_rc=$?
    echo "== lane 1: ${#after_units[@]} files of tests/cluster, after the unit tests =="
    after_rc=0
    run_lane1 "$venv/bin/python" -m pytest "${after_units[@]}" || after_rc=$?
    lane2_rc=0
    wait_for "$lane2" || lane2_rc=$?
    lane3_rc=0
    wait_for "$lane3" || lane3_rc=$?
    kill "$watchdog" 2>/dev/null || true
    echo "== lane 2: the real-host tests of tests/adversarial and ${#beside_adversarial[@]} files of tests/cluster =="
    cat "$lane2_log"
    echo "== lane 3: the other real-host tests of tests/cluster =="
    cat "$lane3_log"
    rm -f "$lane2_log" "$lane3_log"
    if [ "$limit_hit" = 1 ]; then
        echo "scripts/test.sh: stopped at the suite's ${suite_limit}s limit (the lanes' reports above say where)" >&2
        exit 124
    fi
    for rc in "$mypy_rc" "$units_rc" "$after_rc" "$lane2_rc" "$lane3_rc"; do
        if [ "$rc" -ne 0 ]; then exit "$rc"; fi
    done
    exit 0
fi
"$venv/bin/python" -m mypy
exec "$venv/bin/python" -m pytest "$@"
