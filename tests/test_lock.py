"""requirements/test.lock covers what the suite installs, within the ranges pyproject.toml declares.

scripts/test.sh installs the lock with --require-hashes and then ascendctl with --no-deps: a dependency added
to pyproject.toml but not to the lock would only show up as an ImportError somewhere, so it is checked here.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\$")


def locked() -> dict[str, tuple[Version, int]]:
    """name -> (pinned version, number of hashes) of every package in the lock."""
    pins: dict[str, tuple[Version, int]] = {}
    name = ""
    for line in (REPO / "requirements" / "test.lock").read_text(encoding="utf-8").splitlines():
        if match := PIN.match(line):
            name = canonicalize_name(match.group(1))
            assert name not in pins, f"{name} pinned twice"
            pins[name] = (Version(match.group(2)), 0)
        elif line.strip().startswith("--hash=sha256:"):
            version, hashes = pins[name]
            pins[name] = (version, hashes + 1)
        elif line.strip() and not line.lstrip().startswith("#") and not line.startswith("--find-links"):
            raise AssertionError(f"unexpected lock line: {line!r}")
    return pins


def declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = (REPO / "requirements" / "test.in").read_text(encoding="utf-8").splitlines()
    lines = [*project["dependencies"], *project["optional-dependencies"]["test"],
             *(line.split("#")[0].strip() for line in extra)]
    return [Requirement(line) for line in lines if line]


def test_every_declared_requirement_is_pinned_with_hashes_inside_its_range() -> None:
    pins = locked()
    assert pins, "the lock pins nothing"
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is declared but not in requirements/test.lock: bash scripts/lock.sh"
        version, _ = pins[name]
        # a local build (torch 2.13.0+cpu) satisfies ==2.13.0 as pip sees it
        public = Version(version.public)
        assert requirement.specifier.contains(public, prereleases=True), f"lock has {name}=={version}, pyproject says {requirement}"
    unhashed = [name for name, (_, hashes) in pins.items() if hashes == 0]
    assert not unhashed, f"pinned without a hash: {unhashed}"


def test_the_test_command_installs_the_lock_and_nothing_unpinned() -> None:
    script = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "--require-hashes -r requirements/test.lock" in script
    # ascendctl itself: no dependency resolution, no isolated build environment fetching the newest hatchling
    assert "--no-deps --no-build-isolation -e ." in script
    assert "hatchling" in locked()
