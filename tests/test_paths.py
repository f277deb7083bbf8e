"""paths.py's state directory: XDG_STATE_HOME is used only when absolute, as the XDG Base Directory spec says."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.jobs.record import JobRecord, list_jobs, save_job
from ascendctl.paths import state_dir, xdg_base

runner = CliRunner()


@pytest.mark.parametrize("value", ["", "state", "./state", "../state", ".", "~/state", "relative/dir/"])
def test_an_unset_empty_or_relative_xdg_state_home_is_ignored(value: str, hermetic_env: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", value)
    assert state_dir() == hermetic_env / ".local" / "state" / "ascendctl"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert state_dir() == hermetic_env / ".local" / "state" / "ascendctl"


def test_an_absolute_xdg_state_home_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "s"))
    assert state_dir() == tmp_path / "s" / "ascendctl"
    monkeypatch.setenv("XDG_CACHE_HOME", "cache")
    assert xdg_base("XDG_CACHE_HOME", ".cache") == Path.home() / ".cache"


def test_a_job_recorded_with_a_relative_xdg_state_home_is_found_from_any_directory(
        tmp_path: Path, hermetic_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "state")
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    monkeypatch.chdir(tmp_path / "one")
    save_job(JobRecord(id="20261122-100000-aaaa", launcher="torchrun", inventory="<built-in>", script=["t.py"],
                       master_addr="127.0.0.1", master_port=29500, log_dir="/tmp/x", nodes=(), started=1_700_000_000.0))
    assert not (tmp_path / "one" / "state").exists()  # nothing written relative to the working directory
    assert (hermetic_env / ".local" / "state" / "ascendctl" / "jobs" / "20261122-100000-aaaa.json").is_file()
    monkeypatch.chdir(tmp_path / "two")
    assert [r.id for r in list_jobs()] == ["20261122-100000-aaaa"]
    assert "20261122-100000-aaaa" in runner.invoke(app, ["jobs"], catch_exceptions=False).stdout


def test_current_user_is_the_uid_where_the_uid_has_no_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container whose uid has no passwd entry: the launch plan and the SSH transport both get the uid, not a KeyError
    (the SSH transport had its own copy without this fallback)."""
    import getpass
    import os

    from ascendctl.paths import current_user

    def nameless() -> str:
        raise KeyError("getpwuid(): uid not found")

    monkeypatch.setattr(getpass, "getuser", nameless)
    assert current_user() == str(os.getuid())
