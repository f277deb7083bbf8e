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
# The type check is part of the suite: mypy --strict over the package (settings in pyproject.toml).
"$venv/bin/python" -m mypy
# The whole suite (no arguments) runs in two lanes side by side: the real-host tests of tests/cluster, which mostly
# wait on test hosts, in one; the rest (which mostly compute), then the real-host tests of tests/adversarial, in the
# other, so that both lanes end at about the same time. The test hosts' harness takes a lock per cluster, so two
# lanes never share one. Each pytest prints its own report (the tests/cluster one last); the exit status is the first
# failure in lane order (units, adversarial, cluster). With arguments: one pytest, as asked.
# A few files of tests/cluster run in the first lane, after tests/adversarial, so that the lanes stay even.
if [ "$#" -eq 0 ]; then
    moved=(tests/cluster/test_nonroot_hosts.py tests/cluster/test_ssh_config_hosts.py tests/cluster/test_known_hosts_hosts.py)
    hosts_log=$(mktemp)
    "$venv/bin/python" -m pytest tests/cluster "${moved[@]/#/--ignore=}" > "$hosts_log" 2>&1 &
    hosts=$!
    units_rc=0
    "$venv/bin/python" -m pytest --ignore=tests/cluster --ignore=tests/adversarial || units_rc=$?
    echo "== the real-host tests of tests/adversarial (and ${#moved[@]} files of tests/cluster), after the unit tests =="
    adversarial_rc=0
    "$venv/bin/python" -m pytest tests/adversarial "${moved[@]}" || adversarial_rc=$?
    hosts_rc=0
    wait "$hosts" || hosts_rc=$?
    echo "== the real-host tests of tests/cluster, run beside the others =="
    cat "$hosts_log"
    rm -f "$hosts_log"
    if [ "$units_rc" -ne 0 ]; then exit "$units_rc"; fi
    if [ "$adversarial_rc" -ne 0 ]; then exit "$adversarial_rc"; fi
    exit "$hosts_rc"
fi
exec "$venv/bin/python" -m pytest "$@"
