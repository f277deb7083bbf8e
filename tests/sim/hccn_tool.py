"""A simulated `hccn_tool` (and the /etc/hccn.conf beside it) for tests on real test hosts.

`hccn_tool_script(...)` returns the text of a POSIX-sh script that answers
`hccn_tool -i N -ip -g`, `-link -g` and `-net_health -g` in the line format of the real
tool, as captured in tests/data/samples/ascend/:

- `-ip -g`: `ipaddr:10.10.0.10` / `netmask:255.255.255.0`
  (envcheck_versions_hccn_ip_linkstat_8dev.txt; npu-smi_hccn_tool_910B1_arthurchiao-blog.txt).
  A device with no address prints nothing, as device 2 does in
  envcheck_910A_npu-smi_hccn_tool_dump.txt.
- `-net_health -g`: `net health status: Socket failed` (envcheck_910A_npu-smi_hccn_tool_dump.txt);
  the healthy answer is `net health status: Success`.
- `-link -g`: `link status: UP` / `link status: DOWN`. No capture in the samples; this is the
  line Huawei's own check scripts grep for (`grep -qi 'link status: UP'`).
- `-ping -g address IP`: `device N PING IP`, one `recv seq=K,time=...ms` line per answered packet,
  `recv time out seq=K` per lost one, then `3 packets transmitted, 2 received, 33.33% packet loss`
  (tests/data/netcheck/hccn_tool_ping_*.txt: the 910B1 blog capture and MindIE-LLM's multi-node guide).
  With a lost packet the script exits 1, as the driver does: its source (hccn_tool's dsmi ping) turns an
  output containing `recv time out seq` into PING_INNER_ERROR. Packets are lost when the pinging device
  is in `ping_lost` (that many of 3) or the address is in `unreachable` (all 3: a dead peer device).

A device id the node does not have makes the script print an error on stderr and exit 1;
the wording is not from a capture (none in the samples), only the non-zero exit matters.
"""

from __future__ import annotations

from typing import Iterable, Mapping

_HEADER = """#!/bin/sh
# Simulated hccn_tool (tests/sim/hccn_tool.py); answers -i N -ip|-link|-net_health -g.
dev=; op=
while [ $# -gt 0 ]; do
  case "$1" in
    -i) dev=$2; shift 2 ;;
    -g) shift ;;
    address) addr=$2; shift 2 ;;
    -*) op=$1; shift ;;
    *) echo "hccn_tool: unexpected argument: $1" >&2; exit 1 ;;
  esac
done
ping_out() {  # device, packets lost of 3
  [ -n "$addr" ] || { echo "hccn_tool: -ping needs -g address IP" >&2; exit 1; }
  lose=$2
  for d in @DEAD@; do [ "$d" = "$addr" ] && lose=3; done
  echo "device $1 PING $addr"
  seq=0
  while [ $seq -lt 3 ]; do
    if [ $seq -lt "$lose" ]; then echo "recv time out seq=$seq"; else echo "recv seq=$seq,time=0.0$((47 + seq))000ms"; fi
    seq=$((seq + 1))
  done
  got=$((3 - lose))
  case $got in 3) pct=0.00 ;; 2) pct=33.33 ;; 1) pct=66.67 ;; *) pct=100.00 ;; esac
  echo "3 packets transmitted, $got received, $pct% packet loss"
  [ "$lose" -eq 0 ] || exit 1
}
case "$op:$dev" in
"""

_FOOTER = """  -ip:*|-link:*|-net_health:*|-ping:*)
    echo "hccn_tool: device id $dev is invalid" >&2; exit 1 ;;
  *)
    echo "hccn_tool: unsupported command: $op" >&2; exit 1 ;;
esac
exit 0
"""


def hccn_tool_script(
    ips: Mapping[int, str],
    link: Mapping[int, str] | None = None,
    net_health: Mapping[int, str] | None = None,
    missing: Iterable[int] = (),
    *,
    netmask: str = "255.255.255.0",
    devices: Iterable[int] | None = None,
    ping_lost: Mapping[int, int] | None = None,
    unreachable: Iterable[str] = (),
) -> str:
    """A `#!/bin/sh` hccn_tool for one host.

    `ips`: device id -> address; `missing`: devices that exist but have no address (print
    nothing); `link`/`net_health`: per-device status text (default `UP` / `Success`);
    `devices`: the device ids the host has (default: every id mentioned above); `ping_lost`: device ->
    packets (of 3) its pings lose; `unreachable`: addresses no ping reaches (another host's dead device).
    """
    link = dict(link or {})
    net_health = dict(net_health or {})
    gone = set(missing)
    lost = dict(ping_lost or {})
    dead = " ".join(sorted(set(unreachable)))
    known = sorted(set(devices) if devices is not None else set(ips) | gone | set(link) | set(net_health))
    arms: list[str] = []
    for device in known:
        ip = None if device in gone else ips.get(device)
        ip_out = f"printf 'ipaddr:%s\\nnetmask:%s\\n' '{ip}' '{netmask}'" if ip else ":"
        arms.append(f"  -ip:{device}) {ip_out} ;;")
        arms.append(f"  -link:{device}) echo 'link status: {link.get(device, 'UP')}' ;;")
        arms.append(f"  -net_health:{device}) echo 'net health status: {net_health.get(device, 'Success')}' ;;")
        arms.append(f"  -ping:{device}) ping_out {device} {int(lost.get(device, 0))} ;;")
    return _HEADER.replace("@DEAD@", dead) + "\n".join(arms) + ("\n" if arms else "") + _FOOTER


def hccn_conf_text(ips: Mapping[int, str], *, netmask: str = "255.255.255.0", gateway: str | None = None) -> str:
    """/etc/hccn.conf with `address_N` and its companion lines, as in hccn.conf_8npu_fixture.txt."""
    lines: list[str] = []
    for device in sorted(ips):
        gw = gateway or ips[device].rsplit(".", 1)[0] + ".1"
        lines += [
            f"address_{device}={ips[device]}",
            f"netmask_{device}={netmask}",
            f"netdetect_{device}={gw}",
            f"gateway_{device}={gw}",
            f"send_arp_status_{device}=1",
            f"tls_enable_{device}=0",
        ]
    return "\n".join(lines) + "\n"
