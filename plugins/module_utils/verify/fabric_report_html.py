# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric report rendered as HTML: one self-contained page (``fabric-report.html``) from a valid report.

:func:`render_html` validates the report (``fabric_report.validate_report``) and turns it into one page with inline
CSS, no script and no external font or image, the same bytes for the same report: the verdict and a summary, the
findings (each port with its role and rail), the host table (with every port's role and rail), a bandwidth heat map
per rail and per storage port (a list of the tested pairs on large rails), the latency table, NCCL's transport per
host and the counter deltas.

Pure Python, no Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import html
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.fabric_report import (
    CHECK_STATES, ReportError, validate_report)

# The heat map's green threshold when the report has no meta.thresholds.min_bw_pct.
DEFAULT_MIN_BW_PCT = 90.0
# Below this percentage of line rate a heat-map cell is red; between it and the threshold, amber.
AMBER_FLOOR_PCT = 70.0
# Above this many hosts on a rail the grid (n x n cells) becomes a list of the tested pairs, worst first.
HEATMAP_MAX_HOSTS = 128

# A backslash at the end of a line continues it (the page gets one line).
_CSS = """
:root{color-scheme:light}
*{box-sizing:border-box}
body{margin:0;background:#f5f6f8;color:#1c2128;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,\
"DejaVu Sans",sans-serif}
header{padding:18px 28px;background:#fff;border-bottom:1px solid #d0d7de;display:flex;gap:24px;align-items:center;\
flex-wrap:wrap}
header h1{margin:0;font-size:22px}
#verdict{margin:0;padding:6px 22px;border-radius:6px;font-size:26px;font-weight:700;letter-spacing:.08em;color:#fff}
#verdict.pass{background:#1f7a3a}
#verdict.fail{background:#b42318}
.summary{margin:0;color:#424a53}
nav{padding:8px 28px;background:#eef1f4;border-bottom:1px solid #d0d7de}
nav a{margin-right:16px;color:#0b57b0;text-decoration:none}
main{padding:8px 28px 40px}
section{margin-top:22px}
h2{font-size:18px;margin:0 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;background:#fff;margin-bottom:8px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#6e7781}
.chip{display:inline-block;margin:1px 3px 1px 0;padding:0 6px;border-radius:9px;font-size:12px;\
border:1px solid #d0d7de;background:#f6f8fa}
.chip.fail,.chip.error{background:#fde2e1;border-color:#e5a29f;color:#8a1c12}
.chip.pass{background:#dcf3e3;border-color:#9fd3ae;color:#135c2b}
.chip.skip,.chip.info{background:#eef1f4;color:#57606a}
.chip.warning,.chip.unknown{background:#fff3cd;border-color:#e3c46b;color:#6b4f00}
.sev{font-weight:700;text-transform:uppercase;font-size:12px}
tr.finding.error td:first-child{border-left:4px solid #b42318}
tr.finding.warning td:first-child{border-left:4px solid #d4a106}
tr.finding.info td:first-child{border-left:4px solid #8c959f}
table.heatmap td{width:74px;height:44px;text-align:center;vertical-align:middle;padding:2px}
table.heatmap th{font-size:12px;white-space:nowrap}
td.cell .bw{display:block;font-weight:700;font-size:14px}
td.cell .pct{display:block;font-size:11px}
td.cell.good{background:#2e8b47;color:#fff}
td.cell.warn{background:#f2b705;color:#1c2128}
td.cell.bad{background:#c62828;color:#fff}
td.cell.nolr{background:#6b8fb3;color:#fff}
td.untested{background:#d5d9de}
td.self{background:repeating-linear-gradient(45deg,#e6e8eb,#e6e8eb 4px,#f3f4f6 4px,#f3f4f6 8px)}
.legend span{display:inline-block;margin-right:12px}
.legend i{display:inline-block;width:14px;height:14px;vertical-align:middle;margin-right:4px;border:1px solid #9aa3ad}
pre{margin:4px 0;padding:6px 8px;background:#f6f8fa;border:1px solid #e1e4e8;white-space:pre-wrap;word-break:break-all;\
font-size:12px}
.chip.nz{background:#dbe9f8;border-color:#8fb3dc;color:#0b3d75;font-weight:600}
.chip.nz.err{background:#fde2e1;border-color:#e5a29f;color:#8a1c12}
.zero{color:#6e7781}
.chip.compute{background:#e7eefb;border-color:#9db6e0;color:#0b3d75}
.chip.storage{background:#efe7fb;border-color:#b9a1df;color:#4a2380}
"""

# Counters whose movement is an error or a drop (highlighted red); others (pause, ECN, CNP) are traffic (blue).
_ERROR_COUNTER = re.compile(r"err|discard|drop|downed|out_of_buffer|out_of_sequence|timeout|symbol|recover|"
                            r"integrity|overrun|retry", re.I)
_GOOD, _WARN, _BAD, _NOLR = "#2e8b47", "#f2b705", "#c62828", "#6b8fb3"


def _e(value):
    return html.escape("%s" % (value,), quote=True)


def _num(value, fmt="%.1f", none="\u2014"):
    return none if value is None else fmt % value


def _yes_no(value):
    return "\u2014" if value is None else ("yes" if value else "no")


def _thresholds(report):
    thresholds = (report.get("meta") or {}).get("thresholds") or {}
    green = thresholds.get("min_bw_pct")
    green = DEFAULT_MIN_BW_PCT if green is None else float(green)
    return green, min(AMBER_FLOOR_PCT, green)


def _cell_class(row, green, amber):
    if row.get("error") or row["bw_avg_gbps"] is None:
        return "bad"
    if row["pct"] is None:
        return "nolr"
    if row["pct"] >= green:
        return "good"
    return "warn" if row["pct"] >= amber else "bad"


def _worse(a, b):
    """Of two results of one pair, the one to show: a failed test, else the lower bandwidth."""
    def badness(row):
        return (0 if (row.get("error") or row["bw_avg_gbps"] is None) else 1, row["bw_avg_gbps"] or 0.0)
    return a if badness(a) <= badness(b) else b


def _rail_label(row):
    """``rail 2`` or ``storage port 0`` of a perftest or latency row."""
    return ("storage port %d" if row.get("role") == "storage" else "rail %d") % int(row["rail"])


def _heat_cell(row, runs, green, amber):
    cls = _cell_class(row, green, amber)
    device = " (%s)" % row["device"] if row.get("device") else ""
    if row.get("device") and row.get("server_device"):
        device = " (%s \u2192 %s)" % (row["device"], row["server_device"])
    where = "%s \u2192 %s, %s%s" % (row["client"], row["server"], _rail_label(row), device)
    if row.get("error") or row["bw_avg_gbps"] is None:
        title = "%s: no result: %s" % (where, row.get("error") or "no bandwidth reported")
        body = '<span class="bw">no result</span>'
    else:
        title = "%s: %.1f Gb/s" % (where, row["bw_avg_gbps"])
        if row["line_rate_gbps"] is not None:
            title += " of %s Gb/s line rate" % _num(row["line_rate_gbps"], "%g")
        if row["pct"] is not None:
            title += " (%.1f%%)" % row["pct"]
        body = '<span class="bw">%.1f</span><span class="pct">%s</span>' % (
            row["bw_avg_gbps"], _e(_num(row["pct"], "%.1f%%", "no line rate")))
    if runs > 1:
        title += "; worst of %d runs" % runs
    attrs = ('class="cell %s" data-role="%s" data-rail="%d" data-test="%s" data-client="%s" data-server="%s" '
             'data-pct="%s"' % (cls, _e(row.get("role", "compute")), row["rail"], _e(row.get("test", "")),
                                _e(row["client"]), _e(row["server"]), _num(row["pct"], "%.1f", "")))
    if row.get("error"):
        attrs += ' data-error="%s"' % _e(row["error"])
    return '<td %s title="%s">%s</td>' % (attrs, _e(title), body)


def _heatmaps(report, out):
    green, amber = _thresholds(report)
    out.append('<section id="bandwidth"><h2>Bandwidth by rail (perftest)</h2>')
    if not report["perftest"]:
        out.append('<p class="muted">No bandwidth test ran.</p></section>')
        return
    out.append('<p class="legend"><span><i style="background:%s"></i>&ge; %s%% of line rate</span>'
               '<span><i style="background:%s"></i>%s&ndash;%s%%</span><span><i style="background:%s"></i>&lt; %s%% '
               'or no result</span><span><i style="background:%s"></i>line rate unknown</span>'
               '<span><i style="background:#d5d9de"></i>not tested</span> Rows: client; columns: server; '
               'each cell: average bandwidth in Gb/s and its %% of line rate.</p>'
               % (_GOOD, _e("%g" % green), _WARN, _e("%g" % amber), _e("%g" % green), _BAD, _e("%g" % amber), _NOLR))
    groups = {}
    for row in report["perftest"]:
        role = row.get("role", "compute")
        pairs = groups.setdefault((role, row.get("test", ""), int(row["rail"])), {})
        key = (row["client"], row["server"])
        shown, runs = pairs.get(key, (row, 0))
        pairs[key] = (_worse(shown, row) if runs else row, runs + 1)
    for role, test, rail in sorted(groups, key=lambda k: (k[0] != "compute", k[2], k[1])):
        pairs = groups[(role, test, rail)]
        names = sorted(set(h for pair in pairs for h in pair), key=natural_key)
        devices = sorted(set(d for r, _n in pairs.values() for d in (r.get("device"), r.get("server_device")) if d),
                         key=natural_key)
        out.append('<h3>%s%s%s: %d pair(s) tested</h3>' % (
            _e(_rail_label({"role": role, "rail": rail}).capitalize()), " \u00b7 %s" % _e(test) if test else "",
            " \u00b7 %s" % _e(", ".join(devices)) if devices else "", len(pairs)))
        if len(names) > HEATMAP_MAX_HOSTS:
            out.append('<p class="muted">%d hosts: the tested pairs are listed, lowest bandwidth first.</p>'
                       % len(names))
            out.append('<table class="pairs" data-role="%s" data-rail="%s" data-test="%s"><tr><th>Client</th>'
                       '<th>Server</th><th>Gb/s</th></tr>' % (_e(role), rail, _e(test)))
            ordered = sorted(pairs.items(), key=lambda kv: (
                0 if kv[1][0]["bw_avg_gbps"] is None else 1, kv[1][0]["pct"] if kv[1][0]["pct"] is not None else 0.0,
                natural_key(kv[0][0]), natural_key(kv[0][1])))
            for (client, server), (row, runs) in ordered:
                out.append('<tr><th scope="row">%s</th><td>%s</td>%s</tr>' % (
                    _e(client), _e(server), _heat_cell(row, runs, green, amber)))
            out.append('</table>')
            continue
        columns = "".join('<th scope="col">%s</th>' % _e(n) for n in names)
        out.append('<table class="heatmap" data-role="%s" data-rail="%s" data-test="%s"><tr><th>client \\ server'
                   '</th>%s</tr>' % (_e(role), rail, _e(test), columns))
        for client in names:
            cells = []
            for server in names:
                if (client, server) in pairs:
                    row, runs = pairs[(client, server)]
                    cells.append(_heat_cell(row, runs, green, amber))
                elif client == server:
                    cells.append('<td class="self"></td>')
                else:
                    cells.append('<td class="untested" title="not tested"></td>')
            out.append('<tr><th scope="row">%s</th>%s</tr>' % (_e(client), "".join(cells)))
        out.append('</table>')
    out.append('</section>')


def _host_table(report, out):
    failed_hosts = set((report.get("meta") or {}).get("failed_hosts") or [])
    out.append('<section id="hosts"><h2>Hosts</h2>')
    if not report["hosts"]:
        out.append('<p class="muted">No host.</p></section>')
        return
    out.append('<table><tr><th>Host</th><th>Group</th><th class="num">Errors</th><th class="num">Warnings</th>'
               '<th>Checks</th><th>Ports (role, rail)</th><th>NCCL</th><th class="num">Lowest bandwidth</th></tr>')
    for host, entry in report["hosts"].items():
        sev = [f["severity"] for f in report["findings"] if f["host"] == host]
        checks = entry["checks"]
        chips = "".join('<span class="chip %s" title="%s">%s</span>' % (state, _e(state), _e(name))
                        for name, state in sorted(checks.items(), key=lambda kv: (CHECK_STATES.index(kv[1]), kv[0])))
        counts = "%d pass, %d fail, %d skip" % tuple(sum(1 for s in checks.values() if s == st) for st in CHECK_STATES)
        nccl = report["nccl"].get(host)
        nccl_text = "\u2014" if nccl is None else '<span class="chip %s">%s</span> %s' % (
            nccl["verdict"] if "verdict" in nccl else "unknown", _e(nccl.get("verdict", "unknown")),
            _e(nccl["net_transport"] or "no transport seen"))
        rows = [r for r in report["perftest"] if host in (r["client"], r["server"])]
        failed = [r for r in rows if r["bw_avg_gbps"] is None]
        pcts = [r["pct"] for r in rows if r["pct"] is not None]
        low = ["%.1f%%" % min(pcts)] if pcts else []
        if failed:
            low.append("%d test(s) without result" % len(failed))
        low = ", ".join(low) or "\u2014"
        note = ' <span class="chip fail">failed in the play</span>' if host in failed_hosts else ""
        out.append('<tr><th scope="row">%s%s</th><td>%s</td><td class="num">%d</td><td class="num">%d</td>'
                   '<td><div class="muted">%s</div>%s</td><td class="ports">%s</td><td>%s</td><td class="num">%s</td>'
                   '</tr>' % (_e(host), note, _e(entry["group"] if entry["group"] is not None else "\u2014"),
                              sev.count("error"), sev.count("warning"), counts, chips, _port_chips(entry), nccl_text,
                              _e(low)))
    out.append('</table></section>')


def _rail_map(report, out):
    """Host x rail -> switch:port, each cell coloured by the worst rail_map or peer_missing finding of that port."""
    rail_map = report.get("rail_map")
    if rail_map is None:
        return
    meta = report.get("meta") or {}
    out.append('<section id="rail-map"><h2>Rail map (who each rail reaches)</h2>')
    if meta.get("rail_map_note"):
        out.append('<p class="muted">%s: %s</p>' % (_e(meta.get("rail_map_basis", "")), _e(meta["rail_map_note"])))
    rails = sorted(set(int(r) for entry in rail_map.values() for r in entry))
    if not rails:
        out.append('<p class="muted">No compute port with a peer was read.</p></section>')
        return
    worst = {}
    for f in report["findings"]:
        if f["check"] in ("rail_map", "peer_missing") and "device" in f:
            key = (f["host"], f["device"], f.get("port"))
            worst[key] = "error" if "error" in (worst.get(key), f["severity"]) else f["severity"]
    out.append('<table><tr><th>Host</th>%s</tr>' % "".join('<th>Rail %d</th>' % r for r in rails))
    for host, entry in rail_map.items():
        cells = []
        for r in rails:
            port = entry.get(str(r))
            if port is None:
                cells.append('<td class="untested">\u2014</td>')
                continue
            sev = worst.get((host, port["device"], port["port"]))
            css = {"error": "bad", "warning": "warn"}.get(sev, "good" if port["switch"] else "untested")
            reach = "%s:%s" % (port["switch"], port["switch_port"]) if port["switch"] else "no peer"
            cells.append('<td class="cell %s"><span class="bw">%s</span><span class="pct">%s:%s</span></td>'
                         % (css, _e(reach), _e(port["device"]), port["port"]))
        out.append('<tr><th scope="row">%s</th>%s</tr>' % (_e(host), "".join(cells)))
    out.append('</table></section>')


def _hop(hop):
    """One PCIe hop as a chip: address, trained link (and the maximum when lower), red with the checks that flag it."""
    link = ""
    if hop.get("speed") is not None and hop.get("width") is not None:
        link = " %gGT/s x%d" % (hop["speed"], hop["width"])
        if (hop.get("max_speed"), hop.get("max_width")) != (hop["speed"], hop["width"]) and \
                None not in (hop.get("max_speed"), hop.get("max_width")):
            link += " (max %gGT/s x%d)" % (hop["max_speed"], hop["max_width"])
    flags = hop.get("flags") or []
    acs = " ACS redirect" if hop.get("acs_redirect") else ""
    return '<span class="chip%s" title="%s">%s%s%s</span>' % (
        " error" if flags else "", _e(hop.get("type") or ""), _e(hop["pci"]), _e(link),
        _e(acs + (" [%s]" % ", ".join(flags) if flags else "")))


def _pcie(report, out):
    """Host x rail -> the rail's NIC, its nearest GPU and their distance, and both PCIe paths, flagged hops red."""
    pcie = report.get("pcie")
    if pcie is None:
        return
    out.append('<section id="pcie"><h2>GPUDirect path (rail \u2192 GPU, PCIe hops from the root port)</h2>')
    if not any(pcie.values()):
        out.append('<p class="muted">No host read with its PCIe path.</p></section>')
        return
    out.append('<table><tr><th>Host</th><th>Rail</th><th>Device</th><th>GPU</th><th>Distance</th><th>NIC path</th>'
               '<th>GPU path</th></tr>')
    for host, rails in pcie.items():
        for rail, entry in rails.items():
            dist = entry.get("distance")
            css = {"PIX": "good", "PXB": "good", "NODE": "warn", "SYS": "warn"}.get(dist, "untested")
            paths = ["\u2192".join(_hop(h) for h in entry.get(key) or []) or '<span class="muted">\u2014</span>'
                     for key in ("path", "gpu_path")]
            out.append('<tr><th scope="row">%s</th><td class="num">%s</td><td>%s</td><td>%s</td>'
                       '<td class="cell %s">%s</td><td>%s</td><td>%s</td></tr>' % (
                           _e(host), _e(rail), _e(entry.get("device")), _e(entry.get("gpu") or "no GPU"), css,
                           _e(dist or "\u2014"), paths[0], paths[1]))
    out.append('</table></section>')


def _port_label(port):
    """``compute rail 2``, ``storage``: a port's role and rail."""
    rail = port.get("rail")
    return "%s%s" % (port["role"], " rail %d" % rail if rail is not None else "")


def _port_chips(entry):
    ports = entry.get("ports")
    if not ports:
        return "\u2014"
    chips = []
    for port in ports:
        extra = ", ".join(str(v) for v in (port.get("link_layer"), port.get("state"),
                                           "%g Gb/s" % port["rate_gbps"] if port.get("rate_gbps") is not None else None,
                                           port.get("netdev")) if v)
        chips.append('<span class="chip %s" data-port="%s" data-role="%s"%s title="%s">%s %s</span>' % (
            _e(port["role"]), _e(port["id"]), _e(port["role"]),
            ' data-rail="%d"' % port["rail"] if port.get("rail") is not None else "", _e(extra),
            _e(port["id"]), _e(_port_label(port))))
    return "".join(chips)


def _port_roles(report):
    """host -> ``dev:port`` -> ``compute rail 2`` / ``storage`` (the report's host ports)."""
    return dict((host, dict((p["id"], _port_label(p)) for p in entry.get("ports") or []))
                for host, entry in report["hosts"].items())


def _findings(report, out):
    out.append('<section id="findings"><h2>Findings</h2>')
    if not report["findings"]:
        out.append('<p>No finding: every check passed.</p></section>')
        return
    out.append('<table><tr><th>Severity</th><th>Host</th><th>Check</th><th>Expected</th><th>Found</th>'
               '<th>Likely cause</th><th>Fix</th></tr>')
    roles = _port_roles(report)
    for index, f in enumerate(report["findings"]):
        port = ("%s:%d" % (f["device"], f["port"]) if "device" in f else "port %d" % f["port"]) if "port" in f else ""
        role = (roles.get(f["host"]) or {}).get(port) if port else None
        if role and "rail" in f:
            role = role.split(" rail ")[0]
        where = [port + (" (%s)" % role if role else "") if port else f.get("device", ""), f.get("netdev", ""),
                 "rail %d" % f["rail"] if "rail" in f else "", "peer %s" % f["peer"] if "peer" in f else ""]
        where = ", ".join(w for w in where if w)
        found = _e(f["found"])
        if f.get("evidence"):
            found += "<pre>%s</pre>" % _e("\n".join(f["evidence"]))
        out.append('<tr class="finding %s" id="finding-%d"><td><span class="sev">%s</span></td><td>%s%s</td>'
                   '<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
                       f["severity"], index, _e(f["severity"]), _e(f["host"]),
                       '<div class="muted">%s</div>' % _e(where) if where else "", _e(f["check"]),
                       _e(f["expected"]), found, _e(f["cause"]), _e(f["fix"])))
    out.append('</table></section>')


def _latency(report, out):
    rows = report.get("latency")
    if not rows:
        return
    out.append('<section id="latency"><h2>Latency (perftest)</h2><table><tr><th>Test</th><th class="num">Rail</th>'
               '<th>Client \u2192 server</th><th>HCA</th><th class="num">Bytes</th><th class="num">typical &micro;s'
               '</th><th class="num">avg &micro;s</th><th class="num">min &micro;s</th><th class="num">max &micro;s'
               '</th><th class="num">p99 &micro;s</th><th class="num">p99.9 &micro;s</th><th>Error</th></tr>')
    for r in rows:
        r = dict(r, rail=int(r["rail"]))
        nums = "".join('<td class="num">%s</td>' % _num(r.get(k), "%.2f")
                       for k in ("t_typical_us", "t_avg_us", "t_min_us", "t_max_us", "p99_us", "p99_9_us"))
        out.append('<tr><td>%s</td><td class="num">%s</td><td>%s \u2192 %s</td><td>%s</td><td class="num">%s</td>%s'
                   '<td>%s</td></tr>' % (_e(r.get("test", "")), r["rail"] if r.get("role", "compute") == "compute"
                                         else "storage %d" % r["rail"], _e(r["client"]), _e(r["server"]),
                                         _e(r.get("device", "")), _num(r.get("bytes"), "%d"), nums,
                                         _e(r.get("error", ""))))
    out.append('</table></section>')


def _nccl(report, out):
    out.append('<section id="nccl"><h2>NCCL transport per host</h2>')
    if not report["nccl"]:
        out.append('<p class="muted">nccl-tests did not run.</p></section>')
        return
    out.append('<table><tr><th>Host</th><th>Verdict</th><th>Transport</th><th>Link layer</th><th>GDR</th>'
               '<th>Fallback to socket</th><th class="num">Bus bw (GB/s)</th><th>HCAs</th><th>Test</th></tr>')
    for host, n in report["nccl"].items():
        layer = n["link_layer"]
        layer = ", ".join(layer) if isinstance(layer, list) else layer
        verdict = n.get("verdict", "unknown")
        out.append('<tr><th scope="row">%s</th><td><span class="chip %s">%s</span></td><td>%s</td><td>%s</td>'
                   '<td>%s</td><td>%s</td><td class="num">%s</td><td>%s</td><td>%s</td></tr>' % (
                       _e(host), verdict, _e(verdict.upper()), _e(n["net_transport"] or "\u2014"),
                       _e(layer or "\u2014"), _yes_no(n["gdr"]), _yes_no(n["fallback_to_socket"]),
                       _num(n["busbw_gbps"], "%.2f"), _e(", ".join(n.get("hcas") or []) or "\u2014"),
                       _e(n.get("test", ""))))
        lines = n.get("evidence") or []
        summary = n.get("summary")
        if lines or summary:
            out.append('<tr class="evidence"><td></td><td colspan="8">%s%s</td></tr>' % (
                '<div>%s</div>' % _e(summary) if summary else "",
                "<pre>%s</pre>" % _e("\n".join(lines)) if lines else ""))
    out.append('</table></section>')


def _counters(report, out):
    out.append('<section id="counters"><h2>Counter deltas (after traffic minus before)</h2>')
    if not report["counters"]:
        out.append('<p class="muted">No counters were read.</p></section>')
        return
    out.append('<p class="legend"><span class="chip nz err">error or drop counter +n</span><span class="chip nz">'
               'traffic counter (PFC pause, ECN, CNP) +n</span><span class="chip zero">unchanged 0</span></p>')
    out.append('<table><tr><th>Host</th><th>Port</th><th class="num">Non-zero</th><th>Deltas</th></tr>')
    roles = _port_roles(report)
    for host, ports in report["counters"].items():
        for port, deltas in ports.items():
            role = (roles.get(host) or {}).get(port.replace("/", ":"))
            nonzero = sum(1 for v in deltas.values() if v)
            chips = "".join('<span class="chip %s">%s %s</span>' % (
                ("nz err" if _ERROR_COUNTER.search(name) else "nz") if value else "zero", _e(name),
                "n/a" if value is None else ("%+d" % value if value else "0")) for name, value in deltas.items())
            out.append('<tr><th scope="row">%s</th><td>%s%s</td><td class="num">%d</td><td>%s</td></tr>' % (
                _e(host), _e(port), ' <span class="muted">%s</span>' % _e(role) if role else "", nonzero,
                chips or '<span class="muted">none</span>'))
    out.append('</table></section>')


def _header(report, out):
    meta = report.get("meta") or {}
    verdict = report["verdict"]
    sev = [f["severity"] for f in report["findings"]]
    facts = ["%d host(s)" % len(report["hosts"]), "%d error(s)" % sev.count("error"),
             "%d warning(s)" % sev.count("warning"), "%d bandwidth test(s)" % len(report["perftest"])]
    for key, label in (("pattern", "pattern"), ("rounds", "rounds"), ("launcher", "launcher"),
                       ("generated_at", "generated"), ("collection_version", "hpcnet.rdma")):
        if key in meta:
            facts.append("%s %s" % (label, meta[key]))
    thresholds = meta.get("thresholds") or {}
    if thresholds.get("min_bw_pct") is not None:
        facts.append("bandwidth threshold %g%% of line rate" % thresholds["min_bw_pct"])
    if thresholds.get("min_busbw_gbps") is not None:
        facts.append("NCCL bus bandwidth threshold %g GB/s" % thresholds["min_busbw_gbps"])
    if meta.get("failed_hosts"):
        facts.append("failed in the play: %s" % ", ".join(meta["failed_hosts"]))
    out.append('<header><h1>Fabric report</h1><p id="verdict" class="%s">%s</p><p class="summary">%s</p></header>'
               % (verdict, verdict.upper(), _e(" \u00b7 ".join(facts))))
    out.append('<nav><a href="#findings">Findings</a><a href="#hosts">Hosts</a><a href="#bandwidth">Bandwidth</a>%s'
               '<a href="#nccl">NCCL</a><a href="#counters">Counters</a></nav>'
               % ('<a href="#latency">Latency</a>' if report.get("latency") else ""))


def render_html(report):
    """A valid fabric report -> one self-contained HTML page (str); raises ReportError on an invalid report."""
    problems = validate_report(report)
    if problems:
        raise ReportError(problems)
    out = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
           '<meta name="viewport" content="width=device-width, initial-scale=1">'
           '<title>Fabric report: %s</title><style>%s</style></head><body>'
           % (report["verdict"].upper(), _CSS.strip())]
    _header(report, out)
    out.append("<main>")
    _findings(report, out)
    _host_table(report, out)
    _rail_map(report, out)
    _pcie(report, out)
    _heatmaps(report, out)
    _latency(report, out)
    _nccl(report, out)
    _counters(report, out)
    out.append("</main></body></html>\n")
    return "\n".join(out)
