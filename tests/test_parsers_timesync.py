"""ascendctl.facts.parsers.timesync against real chronyc captures and published ntpq/timedatectl output."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.timesync import (
    TimeSync,
    parse_chrony_sources,
    parse_chrony_tracking,
    parse_ntpq_peers,
    parse_timedatectl_show,
    timesync_from_chrony_sources,
    timesync_from_ntpq,
)

DATA = Path(__file__).resolve().parent / "data"


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# --- chronyc tracking ------------------------------------------------------------------------------------


def test_tracking_synchronised() -> None:
    sync = parse_chrony_tracking(data("chronyc/tracking_synced.txt"))
    # 'System time : 0.000001319 seconds fast of NTP time': the local clock is ahead, so positive.
    assert sync == TimeSync("chrony", True, 9, 1.319e-06, "localhost")


def test_tracking_numeric_names_the_source_by_address() -> None:
    sync = parse_chrony_tracking(data("chronyc/tracking_n_synced.txt"))
    assert (sync.source, sync.stratum, sync.offset_s) == ("127.0.0.1", 9, 5.24e-07)


def test_tracking_slow_clock_is_a_negative_offset() -> None:
    text = data("chronyc/tracking_synced.txt").replace("0.000001319 seconds fast", "0.250000000 seconds slow")
    assert parse_chrony_tracking(text).offset_s == -0.25


def test_tracking_not_synchronised_drops_chrony_placeholders() -> None:
    # chrony prints 'Stratum : 0' and '0.000000000 seconds fast' before it has a source.
    assert parse_chrony_tracking(data("chronyc/tracking_unsynced.txt")) == TimeSync("chrony", False, None, None, None)


def test_tracking_local_reference_is_synchronised_to_local() -> None:
    sync = parse_chrony_tracking(data("chronyc/tracking_local_stratum8.txt"))
    assert sync == TimeSync("chrony", True, 8, 0.0, "LOCAL")


def test_tracking_lags_behind_a_lost_server() -> None:
    # 10 s after its only server died chronyd still reports Leap status Normal; sources shows '^?'.
    assert parse_chrony_tracking(data("chronyc/tracking_server_lost.txt")).synchronised is True
    assert timesync_from_chrony_sources(parse_chrony_sources(data("chronyc/sources_server_lost.txt"))).synchronised is False


def test_tracking_csv_matches_the_text_form() -> None:
    sync = parse_chrony_tracking(data("chronyc/tracking_csv_synced.txt"))
    # The CSV field is the correction still to apply (-0.000001324): the clock is fast by that much.
    assert sync == TimeSync("chrony", True, 9, 1.324e-06, "127.0.0.1")
    assert parse_chrony_tracking(data("chronyc/tracking_csv_unsynced.txt")).synchronised is False


@pytest.mark.parametrize(
    "text",
    [
        "",
        "506 Cannot talk to daemon\n",
        "Reference ID    : 7F000001 (localhost)\nStratum         : 9\n",
        "Reference ID    : 7F000001 (localhost)\nStratum         : nine\nSystem time     : 0.1 seconds fast of NTP time\nLeap status     : Normal\n",
        "Reference ID    : 7F000001 (localhost)\nStratum         : 9\nSystem time     : soon\nLeap status     : Normal\n",
        "7F000001,127.0.0.1,x,1795371976.8,-0.000001324,-0.000000019,0,0,0,0,0,0,0.1,Normal\n",
    ],
)
def test_tracking_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_chrony_tracking(text)


# --- chronyc sources -------------------------------------------------------------------------------------


def test_sources_selected() -> None:
    (source,) = parse_chrony_sources(data("chronyc/sources_synced.txt"))
    assert (source.mode, source.state, source.name, source.stratum, source.poll) == ("^", "*", "localhost", 8, -4)
    assert source.reach == 0o377
    assert source.last_rx == "0"
    assert source.offset_s == pytest.approx(777e-9)
    assert source.measured_offset_s == pytest.approx(758e-9)
    assert source.error_s == pytest.approx(3798e-9)
    assert source.selected
    sync = timesync_from_chrony_sources((source,))
    assert (sync.synchronised, sync.source, sync.stratum) == (True, "localhost", 9)


def test_sources_verbose_numeric_and_csv_agree() -> None:
    plain = parse_chrony_sources(data("chronyc/sources_synced.txt"))
    assert parse_chrony_sources(data("chronyc/sources_v_synced.txt")) == plain
    (numeric,) = parse_chrony_sources(data("chronyc/sources_n_synced.txt"))
    assert numeric.name == "127.0.0.1"
    (csv,) = parse_chrony_sources(data("chronyc/sources_csv_synced.txt"))
    assert (csv.state, csv.name, csv.reach, csv.offset_s, csv.error_s) == ("*", "127.0.0.1", 255, 1.992e-06, 4.583e-06)


def test_sources_unusable_and_none() -> None:
    (source,) = parse_chrony_sources(data("chronyc/sources_unsynced.txt"))
    assert (source.state, source.stratum, source.reach, source.last_rx) == ("?", 0, 0, "-")
    assert timesync_from_chrony_sources((source,)) == TimeSync("chrony", False, None, None, None)
    assert parse_chrony_sources(data("chronyc/sources_none.txt")) == ()


def test_sources_units_and_signs() -> None:
    text = (
        "MS Name/IP address         Stratum Poll Reach LastRx Last sample\n"
        "===============================================================================\n"
        "^+ ntp1.example.org              2  10   377   21m   -1234us[-1300us] +/-   25ms\n"
        "^- ntp2.example.org              3   6   177    4h    +12ms[  +12ms] +/-  110ms\n"
    )
    first, second = parse_chrony_sources(text)
    assert (first.state, first.last_rx) == ("+", "21m")
    assert first.offset_s == pytest.approx(-1.234e-3)
    assert first.error_s == pytest.approx(0.025)
    assert (second.state, second.reach) == ("-", 0o177)
    assert second.offset_s == pytest.approx(0.012)
    assert timesync_from_chrony_sources((first, second)).synchronised is False


@pytest.mark.parametrize(
    "text",
    ["", "506 Cannot talk to daemon\n", "MS Name/IP address   Stratum\n====\n^* localhost  8  -4  377  0  +777ns +/- 3798ns\n", "a,b,c,d,e,f,g,h,i,j\n"],
)
def test_sources_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_chrony_sources(text)


# --- ntpq ------------------------------------------------------------------------------------------------


def test_ntpq_pn_synchronised() -> None:
    peers = parse_ntpq_peers(data("ntpq/pn_synced_centos77.txt"))
    assert [p.tally for p in peers] == ["+", "-", "+", "*"]
    system_peer = peers[3]
    assert (system_peer.remote, system_peer.refid, system_peer.stratum, system_peer.type) == ("72.5.72.15", "216.218.254.202", 2, "u")
    assert (system_peer.when, system_peer.poll, system_peer.reach) == ("63", 64, 0o377)
    assert (system_peer.delay_ms, system_peer.offset_ms, system_peer.jitter_ms) == (22.654, 0.231, 1.964)
    # ntpq's +0.231 ms is the server ahead of this host, i.e. the local clock is 0.231 ms behind.
    sync = timesync_from_ntpq(peers)
    assert (sync.daemon, sync.synchronised, sync.stratum, sync.source) == ("ntpd", True, 3, "72.5.72.15")
    assert sync.offset_s == pytest.approx(-0.000231)


def test_ntpq_pool_rows_and_stratum_one_peer() -> None:
    peers = parse_ntpq_peers(data("ntpq/pn_pool_ubuntu1804.txt"))
    assert len(peers) == 19
    assert (peers[0].tally, peers[0].remote, peers[0].when, peers[0].type, peers[0].reach) == (" ", "0.ubuntu.pool.n", "-", "p", 0)
    chosen = [p for p in peers if p.selected]
    assert [(p.remote, p.refid, p.stratum) for p in chosen] == [("209.51.161.238", ".CDMA.", 1)]
    sync = timesync_from_ntpq(peers)
    assert (sync.stratum, sync.source) == (2, "209.51.161.238")
    assert sync.offset_s == pytest.approx(0.065938)


def test_ntpq_p_with_names_and_long_when() -> None:
    peers = parse_ntpq_peers(data("ntpq/p_synced_cumulus.txt"))
    assert [p.remote for p in peers] == ["ec2-34-225-6-20", "lax1.m-d.net", "69.195.159.158", "2.time.dbsinet."]
    assert (peers[3].when, peers[3].poll) == ("1057", 1024)
    assert timesync_from_ntpq(peers).source == "69.195.159.158"


def test_ntpq_without_system_peer_is_not_synchronised() -> None:
    text = data("ntpq/pn_synced_centos77.txt").replace("*72.5.72.15", "+72.5.72.15")
    assert timesync_from_ntpq(parse_ntpq_peers(text)) == TimeSync("ntpd", False, None, None, None)


def test_ntpq_no_associations_and_wrapped_ipv6_remote() -> None:
    assert parse_ntpq_peers("No association ID's returned\n") == ()
    text = (
        "     remote           refid      st t when poll reach   delay   offset  jitter\n"
        "==============================================================================\n"
        "*2001:db8:100:200::123\n"
        "                 .GPS.            1 u   34   64  377    0.488   -0.016   0.098\n"
    )
    (peer,) = parse_ntpq_peers(text)
    assert (peer.tally, peer.remote, peer.refid, peer.offset_ms) == ("*", "2001:db8:100:200::123", ".GPS.", -0.016)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ntpq: read: Connection refused\n",
        "     remote           refid      st t when poll reach   delay   offset  jitter\n====\n*10.0.0.1 .GPS. 1 u 34 64 377\n",
        "     remote           refid      st t when poll reach   delay   offset  jitter\n====\n*10.0.0.1 .GPS. one u 34 64 377 0.1 0.2 0.3\n",
        "     remote           refid      st t when poll reach   delay   offset  jitter\n====\n*2001:db8::1\n",
    ],
)
def test_ntpq_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ntpq_peers(text)


# --- timedatectl -----------------------------------------------------------------------------------------


def test_timedatectl_show_not_synchronised() -> None:
    sync = parse_timedatectl_show(data("timedatectl/show_unsynced_opentrons.txt"))
    assert sync == TimeSync("timedatectl", False, None, None, None, service_active=True)


def test_timedatectl_show_synchronised_and_ntp_off() -> None:
    text = data("timedatectl/show_unsynced_opentrons.txt").replace("NTPSynchronized=no", "NTPSynchronized=yes")
    assert parse_timedatectl_show(text).synchronised is True
    off = parse_timedatectl_show("NTP=no\nNTPSynchronized=no\n")
    assert (off.synchronised, off.service_active) == (False, False)
    assert parse_timedatectl_show("NTPSynchronized=yes\n").service_active is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "System has not been booted with systemd as init system (PID 1). Can't operate.\n",
        "Timezone=Etc/UTC\nNTP=yes\n",
        "NTPSynchronized=maybe\n",
    ],
)
def test_timedatectl_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_timedatectl_show(text)
