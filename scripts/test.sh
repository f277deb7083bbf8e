#!/usr/bin/env bash
# Run the whole ascendctl test suite, installing what it needs first:
# the Debian packages the real test hosts use (sshd, chronyd, libfaketime, ...),
# then a virtualenv in .venv with ascendctl and its test dependencies.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k inventory`.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(openssh-server openssh-client chrony libfaketime iputils-ping iproute2 clustershell pdsh procps util-linux shellcheck chromium slurm-wlm munge)
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
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
# Real msrun (MindSpore CPU wheel) and torchrun (CPU torch) jobs run in tests/cluster/test_launch_hosts.py.
# Checked through the installed metadata so that a re-run costs ~0.1 s instead of a pip resolve.
if ! .venv/bin/python - <<'PY' 2>/dev/null
from importlib.metadata import version
assert version("torch").split("+")[0] == "2.13.0"
assert tuple(int(x) for x in version("mindspore").split(".")[:2]) >= (2, 6)
PY
then
    .venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0 'mindspore>=2.6'
fi
# The type check is part of the suite: mypy --strict over the package (settings in pyproject.toml).
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest "$@"
