"""ascendctl.facts.parsers.system against ip/df/ulimit/ss output captured on the dev host."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.system import (
    Listener,
    Route,
    Ulimits,
    parse_df_kib,
    parse_ip_addr,
    parse_ip_link,
    parse_ip_route_get,
    parse_ss_listen,
    parse_ss_listeners,
    parse_ulimit_value,
    parse_ulimits,
)

DATA = Path(__file__).resolve().parent / "data"


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# --- ip link / addr / route get --------------------------------------------------------------------------


def test_ip_link_names_mtu_state() -> None:
    links = parse_ip_link(data("ip/link_netns.txt"))
    assert [(l.index, l.name, l.mtu, l.state) for l in links] == [
        (1, "lo", 65536, "UNKNOWN"),
        (2, "veth-a", 4200, "UP"),  # printed as 'veth-a@if2'
        (3, "hccs0", 9000, "UP"),
        (4, "eth9", 1500, "DOWN"),
    ]
    assert [l.up for l in links] == [True, True, True, False]
    assert links[3].flags == ("BROADCAST", "MULTICAST")
    assert links[2].mac == "b6:06:c5:0c:6a:35"
    assert links[0].mac == "00:00:00:00:00:00"


@pytest.mark.parametrize(
    "text",
    ["", "\n", "Device \"eth7\" does not exist.\n", "2: eth0: <UP> qdisc noop state DOWN\n", "2: eth0: <UP> mtu big state UP\n", "2: eth0: <UP> mtu 1500 qdisc noop\n"],
)
def test_ip_link_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="ip -o link"):
        parse_ip_link(text)


def test_ip_addr_with_secondary_address() -> None:
    addrs = parse_ip_addr(data("ip/addr4_netns.txt"))
    assert [(a.ifname, a.cidr, a.scope, a.secondary) for a in addrs] == [
        ("lo", "127.0.0.1/8", "host", False),
        ("veth-a", "172.31.5.9/30", "global", False),
        ("hccs0", "10.77.0.11/24", "global", False),
        ("hccs0", "10.77.0.12/24", "global", True),
    ]
    assert {a.family for a in addrs} == {"inet"}


def test_ip_addr_host_and_empty() -> None:
    assert [(a.ifname, a.address, a.prefixlen) for a in parse_ip_addr(data("ip/addr4_host.txt"))] == [
        ("lo", "127.0.0.1", 8),
        ("eth0", "192.0.2.2", 24),
        ("asct-br0", "10.213.0.1", 16),
    ]
    # 'ip -o -4 addr show dev X' prints nothing when X has no IPv4 address: that is an answer, not garbage.
    assert parse_ip_addr("") == []


def test_ip_addr_inet6() -> None:
    (addr,) = parse_ip_addr("1: lo    inet6 ::1/128 scope host \\       valid_lft forever preferred_lft forever\n")
    assert (addr.family, addr.address, addr.prefixlen, addr.scope) == ("inet6", "::1", 128, "host")


@pytest.mark.parametrize("text", ["Device \"eth7\" does not exist.\n", "2: eth0 inet 10.0.0.1 scope global eth0\n", "eth0 10.0.0.1/24\n"])
def test_ip_addr_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="ip -o addr"):
        parse_ip_addr(text)


@pytest.mark.parametrize(
    ("name", "route"),
    [
        ("ip/route_get_direct.txt", Route("10.77.0.20", "hccs0", "10.77.0.11", None)),
        ("ip/route_get_via.txt", Route("8.8.8.8", "veth-a", "172.31.5.9", "172.31.5.10")),
        ("ip/route_get_from.txt", Route("10.77.0.20", "hccs0", None, None)),
        ("ip/route_get_host.txt", Route("8.8.8.8", "eth0", "192.0.2.2", "192.0.2.1")),
    ],
)
def test_ip_route_get(name: str, route: Route) -> None:
    assert parse_ip_route_get(data(name)) == route


def test_ip_route_get_local_route_type() -> None:
    route = parse_ip_route_get("local 127.0.0.1 dev lo table local src 127.0.0.1 uid 0 \\    cache <local> \n")
    assert route == Route("127.0.0.1", "lo", "127.0.0.1", None)


@pytest.mark.parametrize("text", ["", "RTNETLINK answers: Network is unreachable\n", "8.8.8.8 via 10.0.0.1\n", "a dev b\nc dev d\n"])
def test_ip_route_get_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ip_route_get(text)


# --- df --------------------------------------------------------------------------------------------------


def test_df_root_and_shm() -> None:
    (root,) = parse_df_kib(data("df/root.txt"))
    assert (root.filesystem, root.total_kib, root.used_kib, root.available_kib, root.capacity_pct, root.mount) == (
        "/dev/vda",
        264212084,
        22922012,
        83468900,
        22,
        "/",
    )
    (shm,) = parse_df_kib(data("df/dev_shm.txt"))
    assert (shm.filesystem, shm.available_kib, shm.capacity_pct, shm.mount) == ("tmpfs", 24684060, 1, "/dev/shm")


def test_df_mount_with_spaces_and_dash_capacity() -> None:
    text = "Filesystem     1024-blocks  Used Available Capacity Mounted on\nnas:/data        100 40 60 40% /mnt/shared data\nproc 0 0 0 - /proc\n"
    first, second = parse_df_kib(text)
    assert (first.mount, first.capacity_pct) == ("/mnt/shared data", 40)
    assert (second.filesystem, second.capacity_pct) == ("proc", None)


@pytest.mark.parametrize(
    "text",
    ["", "df: /nope: No such file or directory\n", "Filesystem     1K-blocks  Used Available Use% Mounted on\n/dev/vda 1 1 1 1% /\n", "Filesystem 1024-blocks Used Available Capacity Mounted on\n", "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda lots 1 1 1% /\n"],
)
def test_df_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="df -Pk"):
        parse_df_kib(text)


# --- ulimit ----------------------------------------------------------------------------------------------


def test_ulimit_pairs_and_ulimit_a() -> None:
    assert parse_ulimits(data("ulimit/n_l_host.txt")) == Ulimits(20000, 8192)
    assert parse_ulimits(data("ulimit/a_dash.txt")) == Ulimits(20000, 8192)
    assert parse_ulimits(data("ulimit/a_bash.txt")) == Ulimits(20000, 8192)
    assert parse_ulimits("1048576\nunlimited\n") == Ulimits(1048576, None)


def test_ulimit_single_values() -> None:
    values = [line for line in data("ulimit/n_l_f_lowered.txt").splitlines() if not line.startswith("# ")]
    assert [parse_ulimit_value(v) for v in values] == [1024, 64, None]  # -n, -l, -f ('unlimited')


def test_ulimit_a_unlimited_memlock() -> None:
    text = data("ulimit/a_bash.txt").replace("(kbytes, -l) 8192", "(kbytes, -l) unlimited")
    assert parse_ulimits(text) == Ulimits(20000, None)


@pytest.mark.parametrize("text", ["", "1024\n", "lots\n8192\n", "sh: ulimit: error setting limit (Operation not permitted)\n"])
def test_ulimits_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="ulimit"):
        parse_ulimits(text)


@pytest.mark.parametrize("text", ["", "infinite\n", "1\n2\n"])
def test_ulimit_value_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="ulimit value"):
        parse_ulimit_value(text)


# --- ss --------------------------------------------------------------------------------------------------


def test_ss_listeners() -> None:
    assert parse_ss_listeners(data("ss/Hltn_netns.txt")) == [
        Listener("0.0.0.0", 29500),
        Listener("127.0.0.1", 6000),
        Listener("10.77.0.11", 60000),
        Listener("::", 8080),
    ]
    assert parse_ss_listen(data("ss/Hltn_netns.txt")) == frozenset({29500, 6000, 60000, 8080})
    assert parse_ss_listen(data("ss/ltn_header_netns.txt")) == frozenset({29500, 6000, 60000, 8080})
    assert parse_ss_listen(data("ss/Hltn_host.txt")) == frozenset({2024})


def test_ss_scoped_and_wildcard_addresses_and_nothing_listening() -> None:
    text = "LISTEN 0 4096 127.0.0.53%lo:53 0.0.0.0:*\nLISTEN 0 128 *:22 *:*\nLISTEN 0 5 [fe80::1]%eth0:123 [::]:*\n"
    assert parse_ss_listeners(text) == [Listener("127.0.0.53", 53), Listener("*", 22), Listener("fe80::1", 123)]
    assert parse_ss_listen("") == frozenset()


@pytest.mark.parametrize("text", ["ss: command not found\n", "LISTEN 0 128 0.0.0.0 0.0.0.0:*\n", "LISTEN 0 128 0.0.0.0:http 0.0.0.0:*\n"])
def test_ss_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="ss -ltn"):
        parse_ss_listen(text)
