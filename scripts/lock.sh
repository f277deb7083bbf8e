#!/usr/bin/env bash
# Write requirements/test.lock: every package `bash scripts/test.sh` installs (ascendctl's dependencies,
# its [test] extra, and requirements/test.in: torch, MindSpore, the build backend), pinned with hashes.
# Existing pins are kept; `bash scripts/lock.sh --upgrade` (or `--upgrade-package NAME`) moves them.
# Compiled for this machine's Python and platform (CPython 3.11, Linux x86_64); torch is the CPU build
# that pip finds through the machine's pip configuration (find-links), so its hash is that file's.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=${TMPDIR:-/tmp}/ascendctl-lock-tools
if [ ! -x "$tools/bin/pip-compile" ]; then
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip install -q --disable-pip-version-check pip-tools==7.6.2
fi
"$tools/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
    --extra test --output-file requirements/test.lock "$@" pyproject.toml requirements/test.in
