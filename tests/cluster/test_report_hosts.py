"""`ascendctl report` of a real failed launch, opened in a real browser with the network cut off.

A job started with `ascendctl launch` on three real test hosts fails (rank 3 raises, with a hostile
string in its message), `ascendctl collect` gathers the bundle (tests/cluster/test_triage_hosts.py's
helpers), `ascendctl report` writes the page, and Debian's `chromium` loads it from file:// headless:
every request it would make goes to a local proxy that counts them (there must be none), the rendered
DOM is checked (culprit lane present and marked, hostile line is text, the optional script ran and the
page reads the same without it), and screenshots are taken at 1280x800 and 1920x1080. Set
REPORT_SCREENSHOTS=DIR to keep them.
"""

from __future__ import annotations

import http.server
import os
import shutil
import struct
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.cluster.test_triage_hosts import ASCENDCTL, hosts, run_case, verdict
from tests.html_dom import Element, external_urls, parse

HOSTILE = "<script>alert(1)</script></svg><img src=http://198.51.100.7/p.png>&amp;"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Chromium itself asks these (network time, component updates, accounts) whatever the page is, despite
# --disable-background-networking; they are the browser's requests, not the page's, and are not counted.
BROWSER_OWN = ("google.com", "googleapis.com", "gvt1.com", "gstatic.com")


def page_requests(seen: list[str]) -> list[str]:
    """The requests a page made: every request line but the browser's own service calls."""
    def host(line: str) -> str:
        target = line.split(" ", 1)[1]
        return target.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    return [line for line in seen if not any(host(line) == h or host(line).endswith("." + h) for h in BROWSER_OWN)]


class _Counter(http.server.BaseHTTPRequestHandler):
    """A proxy that answers nothing and remembers every request line it saw."""

    seen: list[str] = []

    def _count(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_error(502)

    do_GET = do_POST = do_HEAD = do_CONNECT = do_OPTIONS = _count  # noqa: N815  (http.server's naming)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def counting_proxy() -> Iterator[tuple[int, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (_Counter,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def chromium(url: str, port: int, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless chromium with every request sent to the counting proxy (loopback too) and name lookups failing."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
            "--disable-default-apps", "--metrics-recording-only", "--no-default-browser-check",
            f"--user-data-dir={profile}", f"--proxy-server=http://127.0.0.1:{port}", "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--virtual-time-budget=3000", *args, url]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def lanes_of(root: Element) -> list[tuple[str, str, str]]:
    return [(el.attrs["data-node"], el.attrs["data-rank"], el.attrs["data-role"]) for el in root.find_all("div", class_="lane")]


def check_dom(root: Element, *, scripted: bool) -> None:
    lanes = root.find_all("div", class_="lane")
    culprit = [el for el in lanes if el.attrs["data-role"] == "culprit"]
    assert [(el.attrs["data-node"], el.attrs["data-rank"]) for el in culprit] == [("h02", "3")]
    assert "role-culprit" in culprit[0].classes() and culprit[0].find("b", class_="badge").text() == "culprit"
    assert culprit[0].find("circle", class_="m-error")  # its own error is on its lane
    victims = [el for el in lanes if el.attrs["data-role"] == "victim"]
    assert len(victims) >= 3 and all("role-victim" in el.classes() for el in victims)
    # one lane per rank, grouped by node, plus each node's launcher
    assert {(n, r) for n, r, _ in lanes_of(root) if r} == {(f"h{i // 2 + 1:02d}", str(i)) for i in range(6)}
    first = root.find("tr", data_evidence="first").find("pre", class_="logline").text()
    assert first.endswith("RuntimeError: rank 3: bad batch at step 2" + HOSTILE), first
    assert len(root.find_all("script")) == 1 and not root.find_all("img") and external_urls(root) == []
    html = root.find("html")
    assert ("js" in html.classes()) is scripted  # the optional script ran (or, disabled, did not) and the page is the same


def test_report_of_a_real_failed_launch_renders_in_a_real_browser_without_network(cluster_factory: Any, tmp_path: Path) -> None:
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_torch.py",
                    {"JOB_TIMEOUT": "20", "JOB_FAULT": "raise", "JOB_FAULT_RANK": "3", "JOB_FAULT_TEXT": HOSTILE})
    assert verdict(case) == ("EXCEPTION", "h02", 3), case.brief()
    out = tmp_path / "report.html"
    result = subprocess.run([*ASCENDCTL, "report", str(tmp_path / "bundle"), "-o", str(out)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    # the terminal's triage and the page agree: one engine, the same headline
    triage = subprocess.run([*ASCENDCTL, "triage", str(tmp_path / "bundle"), "--html", str(tmp_path / "triage.html")],
                            capture_output=True, text=True, timeout=120)
    assert triage.returncode == 0, triage.stderr
    headline = triage.stdout.splitlines()[0].removeprefix("verdict: ").split(" (confidence")[0]
    assert parse(out.read_text()).find("div", class_="headline").text() == headline
    keep = Path(os.environ["REPORT_SCREENSHOTS"]) if os.environ.get("REPORT_SCREENSHOTS") else None
    with counting_proxy() as (port, seen):
        dom = chromium(out.as_uri(), port, tmp_path / "profile1", "--dump-dom").stdout
        check_dom(parse(dom), scripted=True)
        # without JavaScript the page is the file as written: the script changes no lane, row or mark
        source = parse(out.read_text())
        check_dom(source, scripted=False)
        assert lanes_of(parse(dom)) == lanes_of(source)
        for width, height in ((1280, 800), (1920, 1080)):
            shot = tmp_path / f"report-{width}x{height}.png"
            chromium(out.as_uri(), port, tmp_path / f"profile-{width}", f"--screenshot={shot}", f"--window-size={width},{height}")
            assert png_size(shot) == (width, height)
            assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(shot, keep / shot.name)
                shutil.copy(out, keep / "report.html")
        assert page_requests(seen) == [], seen  # not one request left the page


def test_the_counting_proxy_sees_what_a_page_fetches(tmp_path: Path) -> None:
    # the check above can fail: a page that does fetch something is seen by the same browser set-up
    page = tmp_path / "fetches.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://asct-report.example/pixel.png"></body></html>')
    with counting_proxy() as (port, seen):
        chromium(page.as_uri(), port, tmp_path / "profile", "--dump-dom")
    assert page_requests(seen) == ["GET http://asct-report.example/pixel.png"], seen
