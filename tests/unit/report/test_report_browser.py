"""The fabric report's HTML in a real browser: Debian's headless Chromium, driven by Playwright or raw CDP.

Each sample report (4 hosts, 2 rails; a FAIL one with ring and all-pairs results, findings and a test without
result, and a PASS one) is built with ``build_report``, written to ``tests/output/report/`` (JSON, HTML and the
screenshot, kept as artifacts) and opened from its file. The checks: no console error or uncaught exception, no
request other than the page itself (self-contained), the verdict text equals the JSON's, and the heat maps hold
exactly one cell per tested pair with the right number, percentage and colour. Pages with a broken inline script,
a ``console.error`` call or an external image prove that the checker catches each.

Two drivers run the same checks: Playwright (``playwright`` from PyPI, launched on ``/usr/bin/chromium``) and a
stdlib Chrome DevTools Protocol client over ``--remote-debugging-pipe``, the fallback when Playwright is missing.
Without Chromium (or Playwright) the tests skip, except when ``CI`` (1/true) or ``HPCNET_REQUIRE_BROWSER=1`` is set:
then they fail. ``HPCNET_CHROMIUM`` points at another Chromium binary.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import fabric_report as fr, fabric_report_html as fh

REPO_ROOT = Path(__file__).resolve().parents[3]
OUTPUT = REPO_ROOT / "tests" / "output" / "report"
CHROMIUM = os.environ.get("HPCNET_CHROMIUM", "/usr/bin/chromium")
# As root in a closed network: no sandbox, no GPU, and none of Chromium's own background connections.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
TIMEOUT = 60.0

# Computed background colour of a heat-map cell per class (the CSS of fabric_report_html).
CELL_RGB = {"good": "rgb(46, 139, 71)", "warn": "rgb(242, 183, 5)", "bad": "rgb(198, 40, 40)",
            "nolr": "rgb(107, 143, 179)"}

# Runs in the page: what the assertions need, as plain JSON.
EXTRACT_JS = """() => {
  const verdict = document.getElementById('verdict');
  const cells = Array.from(document.querySelectorAll('td.cell')).map(td => ({
    test: td.dataset.test, rail: td.dataset.rail, client: td.dataset.client, server: td.dataset.server,
    pct: td.dataset.pct, error: td.dataset.error || null,
    bw: (td.querySelector('.bw') || td).textContent.trim(),
    background: getComputedStyle(td).backgroundColor,
    width: td.getBoundingClientRect().width}));
  return {verdict: verdict ? verdict.textContent : null,
          verdicts: document.querySelectorAll('#verdict').length,
          title: document.title,
          heatmaps: Array.from(document.querySelectorAll('table.heatmap')).map(t => t.dataset.test + '/' + t.dataset.rail),
          findings: document.querySelectorAll('tr.finding').length,
          nonzero: document.querySelectorAll('#counters td .nz').length,
          errorCounters: Array.from(document.querySelectorAll('#counters td .nz.err')).map(c => c.textContent),
          evidence: Array.from(document.querySelectorAll('#nccl pre')).map(p => p.textContent),
          cells: cells};
}"""


def _browser_required():
    return (os.environ.get("CI", "").lower() in ("1", "true", "yes")
            or os.environ.get("HPCNET_REQUIRE_BROWSER", "") == "1")


def _unavailable(reason):
    if _browser_required():
        pytest.fail("%s; CI or HPCNET_REQUIRE_BROWSER=1 is set, so the browser test must run" % reason, pytrace=False)
    pytest.skip("%s (apt-get install chromium; pip install -r requirements.txt); set HPCNET_REQUIRE_BROWSER=1 to "
                "make this a failure" % reason)


def _check_chromium():
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        _unavailable("no Chromium at %s" % CHROMIUM)


# ---------------------------------------------------------------------------------------------------------------
# Drivers: open(url, screenshot) -> {errors: [text], requests: [url], data: EXTRACT_JS's result}
# ---------------------------------------------------------------------------------------------------------------

class PlaywrightDriver:
    name = "playwright"

    def __init__(self, user_data_dir):
        from playwright.sync_api import sync_playwright  # pylint: disable=import-outside-toplevel
        self._pw = sync_playwright().start()
        try:
            self._context = self._pw.chromium.launch_persistent_context(
                str(user_data_dir), executable_path=CHROMIUM, headless=True, args=FLAGS,
                viewport={"width": 1400, "height": 900}, timeout=TIMEOUT * 1000)
        except Exception:
            self._pw.stop()
            raise

    def open(self, url, screenshot):
        page = self._context.new_page()
        errors, requests = [], []
        page.on("console", lambda msg: errors.append("console.%s: %s" % (msg.type, msg.text))
                if msg.type in ("error", "assert") else None)
        page.on("pageerror", lambda exc: errors.append("uncaught: %s" % exc))
        page.on("request", lambda req: requests.append(req.url))
        try:
            page.goto(url, wait_until="load", timeout=TIMEOUT * 1000)
            data = page.evaluate(EXTRACT_JS)
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            page.close()
        return {"errors": errors, "requests": requests, "data": data}

    def close(self):
        try:
            self._context.close()
        finally:
            self._pw.stop()


class CdpPipeDriver:
    """The Chrome DevTools Protocol over --remote-debugging-pipe: JSON messages ended by NUL, fd 3 in, fd 4 out."""

    name = "cdp"

    def __init__(self, user_data_dir):
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()

        def child_fds():
            # above 3/4 first, so that dup2 cannot clobber one with the other
            high_in, high_out = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        self._log = open(Path(user_data_dir).parent / "chromium-cdp.log", "wb")  # noqa: SIM115 (closed in close())
        argv = [CHROMIUM, "--headless", "--window-size=1400,900", "--remote-debugging-pipe",
                "--user-data-dir=%s" % user_data_dir] + FLAGS + ["about:blank"]
        # preexec_fn: the child's fds 3 and 4 must be the pipes (pass_fds keeps numbers, it does not move them)
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,  # noqa: S603
                                      close_fds=False, preexec_fn=child_fds)  # pylint: disable=subprocess-popen-preexec-fn
        os.close(cmd_r)
        os.close(out_w)
        self._buffer = b""
        self._next_id = 0
        self.events = []
        self.call("Browser.getVersion")

    def _send(self, method, params=None, session=None):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._cmd_w, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out_r], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer over the DevTools pipe within %.0f s" % TIMEOUT)
            chunk = os.read(self._out_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe (exit code %s)" % self._proc.poll())
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None):
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self._receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError("%s failed: %s" % (method, message["error"]))
                return message.get("result") or {}
            if "method" in message:
                self.events.append(message)

    def _wait_event(self, method, session):
        deadline = time.monotonic() + TIMEOUT
        for event in self.events:
            if event["method"] == method and event.get("sessionId") == session:
                return
        while True:
            message = self._receive(deadline)
            if "method" in message:
                self.events.append(message)
                if message["method"] == method and message.get("sessionId") == session:
                    return

    def open(self, url, screenshot):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(domain + ".enable", {}, session)
        self.events = []
        self.call("Page.navigate", {"url": url}, session)
        self._wait_event("Page.loadEventFired", session)
        value = self.call("Runtime.evaluate", {"expression": "(%s)()" % EXTRACT_JS, "returnByValue": True}, session)
        size = self.call("Page.getLayoutMetrics", {}, session)["cssContentSize"]
        shot = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}}, session)
        Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
        errors, requests = [], []
        for event in self.events:
            if event.get("sessionId") != session:
                continue
            params = event.get("params") or {}
            if event["method"] == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails") or {}
                errors.append("uncaught: %s" % ((details.get("exception") or {}).get("description") or details.get("text")))
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append("console.%s: %s" % (params["type"], " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args") or [])))
            elif event["method"] == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
                errors.append("log: %s" % params["entry"].get("text"))
            elif event["method"] == "Network.requestWillBeSent":
                requests.append(params["request"]["url"])
        self.call("Target.closeTarget", {"targetId": target})
        return {"errors": errors, "requests": requests, "data": value["result"]["value"]}

    def close(self):
        try:
            self._send("Browser.close")
            self._proc.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait(timeout=15)
        finally:
            os.close(self._cmd_w)
            os.close(self._out_r)
            self._log.close()


DRIVERS = {"playwright": PlaywrightDriver, "cdp": CdpPipeDriver}


@pytest.fixture(scope="module", params=sorted(DRIVERS))
def browser(request, tmp_path_factory):
    _check_chromium()
    if request.param == "playwright":
        try:
            import playwright.sync_api  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        except ImportError:
            _unavailable("the Python package playwright is not installed")
    driver = DRIVERS[request.param](tmp_path_factory.mktemp("chromium-profile-%s" % request.param) / "profile")
    yield driver
    driver.close()


# ---------------------------------------------------------------------------------------------------------------
# Sample reports
# ---------------------------------------------------------------------------------------------------------------

HOSTS = ["node1", "node2", "node3", "node10"]  # node10 sorts last: natural order in the grid
RING = [[("node1", "node2"), ("node3", "node10")], [("node2", "node3"), ("node10", "node1")]]
ALL_PAIRS = [[("node1", "node2"), ("node3", "node10")], [("node1", "node3"), ("node2", "node10")],
             [("node1", "node10"), ("node2", "node3")]]
LINE = 200.0
CHECKS = ["port_state", "link_layer", "rate", "width", "mtu", "firmware", "gid_index", "roce_qos", "subnet_manager",
          "ipoib", "memlock", "kernel_modules", "gdr"]


def _bw(rail, client, server, salt):
    return round(LINE * 0.97 - 0.7 * HOSTS.index(client) - 0.3 * HOSTS.index(server) - 0.4 * rail - 0.1 * salt, 2)


def _evidence(host, device_list, gdr=True):
    address = HOSTS.index(host) + 1
    return ["%s:4101:4101 [0] NCCL INFO NET/IB : Using %s ; OOB eth0:10.0.0.%d<0>" % (host, device_list, address),
            "%s:4101:4190 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/IB/0%s" % (
                host, "/GDRDMA" if gdr else "")]


def _counters(dirty=None):
    """host -> HCA port (device/port, as rdma_counters keys it) -> sysfs and ethtool -S counter deltas."""
    counters = {}
    for host in HOSTS:
        counters[host] = {}
        for rail in (0, 1):
            bad = dirty == (host, rail)
            counters[host]["mlx5_%d/1" % rail] = {
                "np_ecn_marked_roce_packets": 1200 + 10 * rail, "np_cnp_sent": 900, "rp_cnp_handled": 880,
                "out_of_buffer": 4711 if bad else 0, "symbol_error": 0, "link_downed": 0, "port_rcv_errors": 0,
                "rx_prio3_pause": 0 if bad else 152, "tx_prio3_pause": 0 if bad else 148,
                "rx_discards_phy": 2031 if bad else 0}
    return counters


def _nccl(fallback_host=None):
    nccl = {}
    for host in HOSTS:
        if host == fallback_host:
            nccl[host] = {"net_transport": "Socket", "link_layer": None, "gdr": False, "fallback_to_socket": True,
                          "busbw_gbps": 2.31, "hcas": [], "test": "all_reduce_perf",
                          "evidence": ["%s:4101:4101 [0] NCCL INFO NET/IB : No device found." % host,
                                       "%s:4101:4101 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>" % host]}
        else:
            nccl[host] = {"net_transport": "IB", "link_layer": "RoCE", "gdr": True, "fallback_to_socket": False,
                          "busbw_gbps": 2.31 if fallback_host else 41.87, "hcas": ["mlx5_0:1", "mlx5_1:1"],
                          "test": "all_reduce_perf",
                          "evidence": _evidence(host, "[0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE")}
    return nccl


def _rows(pattern_rounds, test="ib_write_bw", salt=0, override=None):
    rows = []
    for rail in (0, 1):
        for number, pairs in enumerate(pattern_rounds):
            for client, server in pairs:
                row = {"rail": rail, "client": client, "server": server, "test": test, "round": number,
                       "device": "mlx5_%d" % rail, "server_device": "mlx5_%d" % rail,
                       "bw_avg_gbps": _bw(rail, client, server, salt), "line_rate_gbps": LINE}
                row.update((override or {}).get((rail, client, server), {}))
                rows.append(row)
    return rows


def fail_report():
    """4 hosts, 2 rails, ring then all-pairs (three pairs run twice: the worst run shows), findings, FAIL."""
    low = {(1, "node1", "node3"): {"bw_avg_gbps": 19.84}, (1, "node2", "node3"): {"bw_avg_gbps": 21.07},
           (1, "node3", "node10"): {"bw_avg_gbps": 152.3}}
    refused = "Couldn't connect to node10:18515 (server not listening)"
    broken = {(0, "node2", "node10"): {"bw_avg_gbps": None, "error": refused}}
    perftest = _rows(RING, salt=0, override=low) + _rows(ALL_PAIRS, salt=1, override={**low, **broken})
    hosts = dict((h, {"group": "roce_gpu", "checks": dict((c, "pass") for c in CHECKS)}) for h in HOSTS)
    hosts["node3"]["checks"]["roce_qos"] = "fail"
    hosts["node10"]["checks"]["ipoib"] = "skip"
    findings = [
        {"host": "node1", "severity": "warning", "check": "firmware", "expected": "28.43.1014 (as the group)",
         "found": "28.42.1000", "cause": "the HCA was not updated with the others", "fix": "run hpcnet.rdma.site "
         "--tags firmware on node1", "device": "mlx5_1"},
        {"host": "node3", "severity": "error", "check": "roce_qos", "device": "mlx5_1", "port": 1,
         "expected": "PFC on priority 3 (profile lossless-3)", "found": "PFC enabled on: none",
         "cause": "PFC is off for the RoCE priority: RoCE drops packets under congestion",
         "fix": "ansible-playbook hpcnet.rdma.site --tags roce --limit node3"},
        {"host": "node3", "severity": "error", "check": "perftest_bandwidth", "device": "mlx5_1", "rail": 1,
         "peer": "node1", "expected": ">= 90% of 200 Gb/s", "found": "node1 -> node3 rail 1: 19.84 Gb/s (9.9%)",
         "cause": "PFC is off for the RoCE priority (roce_qos)", "fix": "apply the RoCE profile on node3"},
        {"host": "node10", "severity": "error", "check": "perftest_bandwidth", "device": "mlx5_0", "rail": 0,
         "peer": "node2", "expected": "ib_write_bw node2 -> node10 on rail 0 completes",
         "found": "Couldn't connect to node10:18515", "cause": "the server was not listening: ib_write_bw on "
         "node10 failed to start (port down or device not found)", "fix": "read the server's output on node10"},
        {"host": "node3", "severity": "error", "check": "nccl_transport", "expected": "NCCL over IB (RoCE)",
         "found": "Socket", "cause": "NET/IB : No device found. <NCCL_IB_HCA names a port that is down>",
         "fix": "set NCCL_IB_HCA to the ACTIVE ports", "evidence": _nccl("node3")["node3"]["evidence"]},
        {"host": "node3", "severity": "error", "check": "counter_discards", "device": "mlx5_1", "port": 1,
         "netdev": "ens2f0np0",
         "expected": "rx_discards_phy +0 on a lossless port", "found": 2031,
         "cause": "the port dropped packets: no PFC on the traffic's priority", "fix": "enable PFC on priority 3"},
    ]
    latency = [{"rail": 0, "client": c, "server": s, "test": "ib_write_lat", "device": "mlx5_0", "bytes": 2,
                "t_typical_us": 1.71 + 0.01 * i, "t_avg_us": 1.74, "t_min_us": 1.62, "t_max_us": 5.3,
                "p99_us": 2.01, "p99_9_us": 4.4} for i, (c, s) in enumerate(RING[0] + RING[1])]
    meta = {"generated_at": "2026-11-02T10:00:00Z", "collection_version": "0.6.0", "pattern": "all_pairs",
            "launcher": "mpirun", "rounds": 5, "thresholds": {"min_bw_pct": 90, "min_busbw_gbps": 30}}
    return fr.build_report(hosts, findings, perftest, _nccl("node3"), _counters(("node3", 1)), meta=meta,
                           latency=latency)


def pass_report():
    hosts = dict((h, {"group": "roce_gpu", "checks": dict((c, "pass") for c in CHECKS)}) for h in HOSTS)
    findings = [{"host": "node2", "severity": "info", "check": "gid_index", "expected": "3", "found": "3",
                 "cause": "RoCE v2 IPv4 GID on index 3 on every host", "fix": "nothing to do"}]
    meta = {"generated_at": "2026-11-02T10:05:00Z", "collection_version": "0.6.0", "pattern": "ring",
            "launcher": "mpirun", "rounds": 2, "thresholds": {"min_bw_pct": 90}}
    return fr.build_report(hosts, findings, _rows(RING), _nccl(), _counters(), meta=meta)


def expected_cells(report):
    """(test, rail, client, server) -> (bw text, data-pct, class) of the run the page must show (the worst)."""
    worst = {}
    for row in report["perftest"]:
        key = (row.get("test", ""), str(row["rail"]), row["client"], row["server"])
        failed = row["bw_avg_gbps"] is None
        rank = (0 if failed else 1, row["bw_avg_gbps"] or 0.0)
        if key not in worst or rank < worst[key][0]:
            if failed:
                shown = ("no result", "", "bad")
            else:
                pct = row["pct"]
                cls = "good" if pct >= 90 else ("warn" if pct >= 70 else "bad")
                shown = ("%.1f" % row["bw_avg_gbps"], "%.1f" % pct, cls)
            worst[key] = (rank, shown)
    return dict((k, v[1]) for k, v in worst.items())


def _write(name, report, html=None):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    if html is None:
        (OUTPUT / ("%s.json" % name)).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    page = OUTPUT / ("%s.html" % name)
    page.write_text(html if html is not None else fh.render_html(report), encoding="utf-8")
    return page


# ---------------------------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, make", [("fabric-report-fail", fail_report), ("fabric-report-pass", pass_report)])
def test_report_renders_in_chromium_with_verdict_and_one_cell_per_tested_pair(browser, name, make):
    report = make()
    page = _write(name, report)
    shot = OUTPUT / ("%s.%s.png" % (name, browser.name))
    result = browser.open(page.as_uri(), shot)
    data = result["data"]

    assert result["errors"] == []
    assert result["requests"] == [page.as_uri()], "the page loaded something besides itself"
    assert data["verdicts"] == 1
    assert data["verdict"] == report["verdict"].upper()
    assert data["title"] == "Fabric report: %s" % report["verdict"].upper()

    expected = expected_cells(report)
    shown = [(c["test"], c["rail"], c["client"], c["server"]) for c in data["cells"]]
    assert len(shown) == len(set(shown)), "a tested pair has more than one cell"
    assert sorted(shown) == sorted(expected)
    for cell in data["cells"]:
        bw, pct, cls = expected[(cell["test"], cell["rail"], cell["client"], cell["server"])]
        assert (cell["bw"], cell["pct"], cell["background"]) == (bw, pct, CELL_RGB[cls]), cell
        assert cell["width"] > 0
    assert data["heatmaps"] == ["ib_write_bw/0", "ib_write_bw/1"]
    assert data["findings"] == len(report["findings"])
    assert shot.stat().st_size > 10000


def test_fail_report_shows_the_worst_run_and_the_escaped_evidence(browser):
    report = fail_report()
    page = _write("fabric-report-fail", report)
    result = browser.open(page.as_uri(), OUTPUT / ("fabric-report-fail-detail.%s.png" % browser.name))
    cells = dict(((c["rail"], c["client"], c["server"]), c) for c in result["data"]["cells"])

    assert len(cells) == 2 * 7  # per rail: the 6 all-pairs pairs and the ring's node10 -> node1
    assert cells[("0", "node2", "node10")]["bw"] == "no result"
    assert cells[("0", "node2", "node10")]["error"].startswith("Couldn't connect to node10")
    assert (cells[("1", "node1", "node3")]["bw"], cells[("1", "node1", "node3")]["pct"]) == ("19.8", "9.9")
    assert (cells[("1", "node3", "node10")]["pct"], cells[("1", "node3", "node10")]["background"]) == (
        "76.2", CELL_RGB["warn"])
    # node1 -> node2 on rail 0 ran in the ring (salt 0) and in all-pairs (salt 1): the lower one shows
    assert cells[("0", "node1", "node2")]["bw"] == "%.1f" % _bw(0, "node1", "node2", 1)
    assert "OOB eth0:10.0.0.1<0>" in "\n".join(result["data"]["evidence"])
    moved = sum(1 for ports in report["counters"].values() for deltas in ports.values() for v in deltas.values() if v)
    assert result["data"]["nonzero"] == moved
    assert sorted(result["data"]["errorCounters"]) == ["out_of_buffer +4711", "rx_discards_phy +2031"]


@pytest.mark.parametrize("inject, expected", [
    ("<script>const broken = ;</script>", "uncaught"),
    ("<script>throw new Error('fabric report broke');</script>", "fabric report broke"),
    ("<script>console.error('counter table missing');</script>", "counter table missing"),
])
def test_checker_catches_a_console_error(browser, inject, expected):
    html = fh.render_html(pass_report()).replace("</body>", inject + "</body>")
    page = _write("broken-script", pass_report(), html)
    result = browser.open(page.as_uri(), OUTPUT / ("broken-script.%s.png" % browser.name))

    assert result["errors"], "the injected error was not seen"
    assert expected in " ".join(result["errors"])
    assert result["data"]["verdict"] == "PASS"


def test_checker_catches_an_external_resource(browser):
    html = fh.render_html(pass_report()).replace("</body>", '<img src="http://127.0.0.1:9/logo.png" alt=""></body>')
    page = _write("external-image", pass_report(), html)
    result = browser.open(page.as_uri(), OUTPUT / ("external-image.%s.png" % browser.name))

    assert "http://127.0.0.1:9/logo.png" in result["requests"]


def test_browser_missing_is_a_failure_when_required(monkeypatch):
    monkeypatch.setitem(globals(), "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv("HPCNET_REQUIRE_BROWSER", raising=False)
    for ci, outcome in (("1", pytest.fail.Exception), ("true", pytest.fail.Exception), ("", pytest.skip.Exception)):
        monkeypatch.setenv("CI", ci)
        with pytest.raises(outcome, match="no Chromium at /nonexistent/chromium"):
            _check_chromium()
    monkeypatch.setenv("HPCNET_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception):
        _check_chromium()
