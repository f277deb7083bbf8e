"""Hermetic test environment: no user ssh config, known_hosts, agent or ascendctl state."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "tests" / "data" / "samples" / "ascend"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden files from current output")


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and XDG dirs at a temp dir and drop variables that leak the user's setup."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("ASCENDCTL_NO_PROGRESS", "1")
    for name in list(os.environ):
        if name.startswith("ASCENDCTL_") and name != "ASCENDCTL_NO_PROGRESS" or name == "SSH_AUTH_SOCK":
            monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def write_inventory(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write inventory text to a temp file and return its path."""

    def write(text: str, name: str = "inventory.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def cluster_network(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, str]]:
    """Nodes answer the endpoint probe without a network: node name -> (cluster interface, its address).

    Unlisted nodes get their inventory `interface` (else eth0) with address 172.16.0.<last octet of host> (a host
    name: 100 + its index), so a
    test sees at once whether HCCL_IF_IP came from the interface (172.16...) or from the management host (10.0...).
    """
    from ascendctl.inventory.load import Node
    from ascendctl.remote.transport.factory import TransportFactory
    from tests.fakes import FakeTransport, ip_sections, probe_reply

    addresses: dict[str, tuple[str, str]] = {}

    def fake_open(self: TransportFactory, node: Node) -> FakeTransport:
        last = node.host.rsplit(".", 1)[-1]
        octet = last if node.host.count(".") == 3 and last.isdigit() else str(100 + node.index)
        ifname, address = addresses.get(node.name) or (node.interface or "eth0", f"172.16.0.{octet}")
        transport = FakeTransport(node, [(r"@@\w+ begin ", probe_reply(ip_sections(ifname, address)))])
        with self._lock:
            self._open.append(transport)
        return transport

    monkeypatch.setattr(TransportFactory, "open", fake_open)
    return addresses
