# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health check's metrics in Prometheus' text exposition format, for node_exporter's textfile collector.

Pure Python (no Ansible imports). ``METRICS`` is the one table of the metrics: name, type, help and where the value
comes from. Port and link state, rate and the IB PMA error counters (link_downed, symbol_error, port_rcv_errors, ...)
are not here: node_exporter's own infiniband collector exports them from the same sysfs files
(``node_infiniband_*``); ``hpcnet_rdma_port_info`` carries each port's role and rail to join them with.
``render(doc, result, now)`` gives the file's text; ``write(path, text)`` replaces the file atomically (a temporary
file in the same directory, renamed), so the collector never reads half a file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import tempfile

from ansible_collections.hpcnet.rdma.plugins.module_utils.health import counter_window

# the file node_exporter's textfile collector reads, in its directory
TEXTFILE = "hpcnet_rdma.prom"
# name -> (type, help)
METRICS = (
    ("hpcnet_rdma_health_ok", "gauge", "1 when the last health check found no error on this host"),
    ("hpcnet_rdma_health_last_run_timestamp_seconds", "gauge", "When the last health check ran (Unix time)"),
    ("hpcnet_rdma_health_findings", "gauge", "Findings of the last health check, by severity"),
    ("hpcnet_rdma_health_check_ok", "gauge",
     "1 when the check passed on the port (or host), 0 when it failed; one series per check and port"),
    ("hpcnet_rdma_port_info", "gauge", "The ports the health check expects, with their role and rail (value 1)"),
    ("hpcnet_rdma_pfc_lossless", "gauge", "1 for each priority the declared RoCE profile makes lossless (PFC)"),
    ("hpcnet_rdma_pfc_pause_frames_total", "counter", "PFC pause frames per priority (ethtool -S <dir>_prio<N>_pause)"),
    ("hpcnet_rdma_pfc_pause_duration_seconds_total", "counter",
     "Time the priority was paused (ethtool -S <dir>_prio<N>_pause_duration, microseconds in the driver)"),
    ("hpcnet_rdma_global_pause_frames_total", "counter", "Link-level pause frames (ethtool -S <dir>_global_pause)"),
    ("hpcnet_rdma_ecn_marked_packets_total", "counter",
     "RoCE packets that arrived ECN-marked (hw_counters/np_ecn_marked_roce_packets)"),
    ("hpcnet_rdma_cnp_sent_total", "counter", "Congestion notification packets sent (hw_counters/np_cnp_sent)"),
    ("hpcnet_rdma_cnp_handled_total", "counter", "Congestion notification packets handled (hw_counters/rp_cnp_handled)"),
    ("hpcnet_rdma_out_of_buffer_total", "counter",
     "Packets dropped for lack of a posted receive buffer (hw_counters/out_of_buffer)"),
    ("hpcnet_rdma_discards_total", "counter", "Packets the NIC discarded (ethtool -S <dir>_discards_phy)"),
    ("hpcnet_rdma_link_down_events_total", "counter", "Ethernet link-down events (ethtool -S link_down_events_phy)"),
    ("hpcnet_rdma_phy_errors_total", "counter",
     "Ethernet PHY receive errors (ethtool -S rx_crc_errors_phy, rx_symbol_err_phy), by kind"),
)
NAMES = tuple(m[0] for m in METRICS)
_PRIO = re.compile(r"^(rx|tx)_prio([0-7])_pause(_duration)?$")
# counter -> (metric, extra labels)
_SIMPLE = {
    "np_ecn_marked_roce_packets": ("hpcnet_rdma_ecn_marked_packets_total", ()),
    "np_cnp_sent": ("hpcnet_rdma_cnp_sent_total", ()),
    "rp_cnp_handled": ("hpcnet_rdma_cnp_handled_total", ()),
    "out_of_buffer": ("hpcnet_rdma_out_of_buffer_total", ()),
    "rx_discards_phy": ("hpcnet_rdma_discards_total", (("direction", "rx"),)),
    "tx_discards_phy": ("hpcnet_rdma_discards_total", (("direction", "tx"),)),
    "rx_global_pause": ("hpcnet_rdma_global_pause_frames_total", (("direction", "rx"),)),
    "tx_global_pause": ("hpcnet_rdma_global_pause_frames_total", (("direction", "tx"),)),
    "link_down_events_phy": ("hpcnet_rdma_link_down_events_total", ()),
    "rx_crc_errors_phy": ("hpcnet_rdma_phy_errors_total", (("kind", "crc"),)),
    "rx_symbol_err_phy": ("hpcnet_rdma_phy_errors_total", (("kind", "symbol"),)),
}


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs):
    return "{%s}" % ",".join('%s="%s"' % (k, _escape("" if v is None else v)) for k, v in pairs) if pairs else ""


def _port_labels(port):
    return (("device", port["device"]), ("port", port["port"]), ("netdev", port["netdev"]), ("role", port["role"]),
            ("rail", port["rail"]))


def _number(value):
    if isinstance(value, float):
        return repr(value)
    return str(int(value))


def _counter_samples(ports, counters):
    out = []
    for port in ports:
        mine = counters.get("%s/%s" % (port["device"], port["port"])) or {}
        labels = _port_labels(port)
        for name in sorted(mine):
            value = mine[name]
            m = _PRIO.match(name)
            if m:
                metric = "hpcnet_rdma_pfc_pause_duration_seconds_total" if m.group(3) else "hpcnet_rdma_pfc_pause_frames_total"
                out.append((metric, (("direction", m.group(1)), ("priority", m.group(2))) + labels,
                            value / 1e6 if m.group(3) else value))
            elif name in _SIMPLE:
                metric, extra = _SIMPLE[name]
                out.append((metric, extra + labels, value))
    return out


def render(doc, result, now):
    """The textfile's text for one check's ``result`` (health_check.run)."""
    samples = {name: [] for name in NAMES}
    samples["hpcnet_rdma_health_ok"].append(((), 1 if result["ok"] else 0))
    samples["hpcnet_rdma_health_last_run_timestamp_seconds"].append(((), float(now)))
    for severity in ("error", "warning"):
        samples["hpcnet_rdma_health_findings"].append(
            ((("severity", severity),), sum(1 for f in result["findings"] if f["severity"] == severity)))
    for row in result["checks"]:
        samples["hpcnet_rdma_health_check_ok"].append(((("check", row["check"]),) + _port_labels(row), 1 if row["ok"] else 0))
    for port in result["ports"]:
        samples["hpcnet_rdma_port_info"].append((_port_labels(port) + (("link_layer", port["link_layer"]),), 1))
        if port["link_layer"] == "Ethernet":
            for prio in counter_window.lossless_of(doc, port["netdev"]):
                samples["hpcnet_rdma_pfc_lossless"].append(((("priority", prio),) + _port_labels(port), 1))
    for metric, labels, value in _counter_samples(result["ports"], result["snapshot"]["counters"]):
        samples[metric].append((labels, value))
    out = []
    for name, kind, text in METRICS:
        if not samples[name]:
            continue
        out.append("# HELP %s %s" % (name, text))
        out.append("# TYPE %s %s" % (name, kind))
        for labels, value in samples[name]:
            out.append("%s%s %s" % (name, _labels(labels), _number(value)))
    return "\n".join(out) + "\n"


def render_failure(now):
    """The textfile of a run that could not check the host: not ok, one error, and when."""
    return ("# HELP hpcnet_rdma_health_ok %s\n# TYPE hpcnet_rdma_health_ok gauge\nhpcnet_rdma_health_ok 0\n"
            "# HELP hpcnet_rdma_health_last_run_timestamp_seconds %s\n"
            "# TYPE hpcnet_rdma_health_last_run_timestamp_seconds gauge\n"
            "hpcnet_rdma_health_last_run_timestamp_seconds %r\n" % (METRICS[0][2], METRICS[1][2], float(now)))


def write(path, text):
    """Replace ``path`` with ``text`` atomically (mode 0644)."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".hpcnet-rdma-health.", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
