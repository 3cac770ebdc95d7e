# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The RoCE QoS vocabulary (priorities, DSCP <-> priority and ToS, the ECN parameter files, the RoCE modes) and
the parsers of the QoS reports other than dcb's: mlnx_qos, ethtool -a / -S, RDMA-CM configfs defaults, the
mlnx-tools cma_roce_mode / cma_roce_tos scripts and the sysfs ecn files. MLNX_OFED's traffic_class file is sysfs:
``parse_traffic_class`` here is the sysfs reader's ``parse_traffic_class_file``.

Pure Python (no Ansible imports): each function takes the tool's text and returns plain dicts/lists.
They follow the tools' grammar (mlnx-tools ``mlnx_qos``/``dcbnetlink.py``, ethtool ``netlink/pause.c``, the mlx5
driver's counter names and sysfs show functions) rather than one sample: tabs or 8-space expanded tabs, with or
without the trailing blanks the tools print, older and newer mlnx_qos variants (no ``default priority:`` block,
``total_size=`` or ``max_buffer_size=`` or a bare trailing comma on the buffer line).
Lines that fit no rule are ignored, never raised on.

The dcb (iproute2) parsers are in dcb_tools; the tools' error messages (mlnx_qos, dcb, ethtool, cma_roce_*) in
qos_errors.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.qos_errors import parse_cma_errors, parse_mlnx_qos_errors
# the traffic_class file is sysfs: its one grammar is the sysfs reader's
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import (  # noqa: F401 pylint: disable=unused-import
    parse_traffic_class_file as parse_traffic_class,  # qos_tools' API: roce_qos and the tests read the file with it
)

__metaclass__ = type

NUM_PRIOS = 8
NUM_DSCP = 64

# MLNX_OFED / DOCA-OFED ecn sysfs under class/net/<if>/ecn (mlx5 en_sysfs.c): per-priority enable/<0..7> in both
# points, plus these parameter files. Values are printed "%d\n".
ECN_RP_PARAMS = (
    "clamp_tgt_rate", "clamp_tgt_rate_after_time_inc", "rpg_time_reset", "rpg_byte_reset", "rpg_threshold",
    "rpg_max_rate", "rpg_ai_rate", "rpg_hai_rate", "rpg_gd", "rpg_min_dec_fac", "rpg_min_rate",
    "rate_to_set_on_first_cnp", "dce_tcp_g", "dce_tcp_rtt", "rate_reduce_monitor_period", "initial_alpha_value",
)
ECN_NP_PARAMS = ("min_time_between_cnps", "cnp_dscp", "cnp_802p_prio")

ROCE_MODE_V1 = "IB/RoCE v1"
ROCE_MODE_V2 = "RoCE v2"


def default_dscp2prio():
    """The mlx5 firmware default DSCP -> priority table: DSCP d maps to priority d >> 3 (64 entries)."""
    return [d >> 3 for d in range(NUM_DSCP)]


def dscp2prio_list(mapping):
    """{dscp: prio} with all 64 DSCP values -> [prio for dscp 0..63]; None when any DSCP is missing."""
    if not mapping or any(d not in mapping for d in range(NUM_DSCP)):
        return None
    return [mapping[d] for d in range(NUM_DSCP)]


def tos_to_dscp(tos):
    """ToS / traffic class byte -> DSCP (the upper six bits): 106 -> 26, 160 -> 40."""
    return (int(tos) >> 2) & 0x3F


def dscp_to_tos(dscp, ecn=0):
    """DSCP (0..63) and ECN bits (0..3) -> ToS byte: (26, 2) -> 106."""
    return ((int(dscp) & 0x3F) << 2) | (int(ecn) & 0x3)


# ------------------------------------------------------------------------------------------------- mlnx_qos
_TC_RE = re.compile(r"^tc:\s*(\d+)\s+ratelimit:\s*(unlimited|([\d.]+)\s*Gbps)\s*,\s*tsa:\s*([A-Za-z]+)"
                    r"(?:\s*,\s*bw:\s*(\d+)\s*%)?\s*$")
_DSCP_LINE_RE = re.compile(r"^prio:\s*(\d+)\s+dscp:\s*([\d,\s]*)$")
_BUFFER_RE = re.compile(r"^Receive buffer size \(bytes\):\s*(.*)$")


def parse_mlnx_qos(text):
    """Parse the report `mlnx_qos -i <if>` prints (also after a set: the report follows the change).

    Returns {
      dcbx_mode: "os" | "firmware" | None, trust: "pcp" | "dscp" | "none" | None,
      dscp2prio: {dscp: prio} of the printed mapping ({} if the header has no rows, None if not printed),
      dscp2prio_list: 64-entry list when all 64 DSCP values are printed, else None,
      default_priority: [prio, ...] from the `default priority:` block (None when the block is absent),
      buffer_size: [8 bytes] | None, max_buffer_size: int | None, total_size: int | None (older tools),
      cable_len: int | None, pfc: [8 x 0/1] | None, pfc_enabled: [prio, ...] | None, prio2buffer: [8] | None,
      tcs: [{tc, ratelimit_gbps (None = unlimited), tsa ("ets"|"strict"|"vendor"|"unknown"), bw (int|None),
             priorities: [prio, ...]}] in printed order,
      prio_tc: [tc for prio 0..7] (None for a priority no TC lists) | None when no tc lines,
      errors: parse_mlnx_qos_errors(text), unsupported: [feature, ...] }
    """
    res = {
        "dcbx_mode": None, "trust": None, "dscp2prio": None, "dscp2prio_list": None, "default_priority": None,
        "buffer_size": None, "max_buffer_size": None, "total_size": None, "cable_len": None, "pfc": None,
        "pfc_enabled": None, "prio2buffer": None, "tcs": [], "prio_tc": None,
    }
    pfc_header = None
    current_tc = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = re.match(r"^DCBX mode:\s*(.+)$", line)
        if m:
            mode = m.group(1).strip().lower()
            res["dcbx_mode"] = "os" if mode.startswith("os") else ("firmware" if mode.startswith("firmware") else mode)
            continue
        m = re.match(r"^Priority trust state:\s*(\S+)$", line)
        if m:
            res["trust"] = m.group(1).lower()
            continue
        if line == "dscp2prio mapping:":
            res["dscp2prio"] = {} if res["dscp2prio"] is None else res["dscp2prio"]
            continue
        if line == "default priority:":
            res["default_priority"] = []
            continue
        m = _DSCP_LINE_RE.match(line)
        if m:
            prio = int(m.group(1))
            mapping = res["dscp2prio"] if res["dscp2prio"] is not None else {}
            for tok in m.group(2).split(","):
                tok = tok.strip()
                if tok.isdigit():
                    mapping[int(tok)] = prio
            res["dscp2prio"] = mapping
            continue
        m = re.match(r"^prio:\s*(\d+)$", line)
        if m and res["default_priority"] is not None:
            res["default_priority"].append(int(m.group(1)))
            continue
        m = _BUFFER_RE.match(line)
        if m:
            sizes = []
            for tok in m.group(1).split(","):
                tok = tok.strip()
                km = re.match(r"^(max_buffer_size|total_size)=(\d+)$", tok)
                if km:
                    res[km.group(1)] = int(km.group(2))
                elif tok.isdigit():
                    sizes.append(int(tok))
            res["buffer_size"] = sizes
            continue
        m = re.match(r"^Cable len:\s*(\d+)$", line)
        if m:
            res["cable_len"] = int(m.group(1))
            continue
        tokens = line.split()
        if tokens[0] == "priority" and len(tokens) > 1 and all(t.isdigit() for t in tokens[1:]):
            pfc_header = [int(t) for t in tokens[1:]]
            continue
        if tokens[0] in ("enabled", "buffer") and pfc_header is not None and all(t.isdigit() for t in tokens[1:]):
            values = [int(t) for t in tokens[1:]]
            row = [0] * NUM_PRIOS
            for prio, val in zip(pfc_header, values):
                if 0 <= prio < NUM_PRIOS:
                    row[prio] = val
            if tokens[0] == "enabled":
                res["pfc"] = row
                res["pfc_enabled"] = [p for p in range(NUM_PRIOS) if row[p]]
            else:
                res["prio2buffer"] = row
            continue
        m = _TC_RE.match(line)
        if m:
            current_tc = {
                "tc": int(m.group(1)), "ratelimit_gbps": float(m.group(3)) if m.group(3) else None,
                "tsa": m.group(4).lower(), "bw": int(m.group(5)) if m.group(5) else None, "priorities": [],
            }
            res["tcs"].append(current_tc)
            continue
        m = re.match(r"^priority:\s*(\d+)$", line)
        if m and current_tc is not None:
            current_tc["priorities"].append(int(m.group(1)))
            continue
    if res["dscp2prio"]:
        res["dscp2prio_list"] = dscp2prio_list(res["dscp2prio"])
    if res["tcs"]:
        prio_tc = [None] * NUM_PRIOS
        for tc in res["tcs"]:
            for prio in tc["priorities"]:
                if 0 <= prio < NUM_PRIOS:
                    prio_tc[prio] = tc["tc"]
        res["prio_tc"] = prio_tc
    res["errors"] = parse_mlnx_qos_errors(text)
    res["unsupported"] = [e["feature"] for e in res["errors"] if e["kind"] == "unsupported"]
    return res


# --------------------------------------------------------------------------------------------------- ethtool
def parse_ethtool_pause(text):
    """`ethtool [--include-statistics] -a <if>` (netlink). Returns {interface, autoneg, rx, tx (bools),
    rx_negotiated, tx_negotiated (bools or None when not printed), statistics: {name: int}}."""
    res = {"interface": None, "autoneg": None, "rx": None, "tx": None, "rx_negotiated": None,
           "tx_negotiated": None, "statistics": {}}
    in_stats = False
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = re.match(r"^Pause parameters for (\S+?):$", line)
        if m:
            res["interface"] = m.group(1)
            in_stats = False
            continue
        if line == "Statistics:":
            in_stats = True
            continue
        m = re.match(r"^(Autonegotiate|RX|TX|RX negotiated|TX negotiated):\s*(on|off)$", line)
        if m:
            key = {"Autonegotiate": "autoneg", "RX": "rx", "TX": "tx", "RX negotiated": "rx_negotiated",
                   "TX negotiated": "tx_negotiated"}[m.group(1)]
            res[key] = m.group(2) == "on"
            continue
        m = re.match(r"^([A-Za-z0-9_]+):\s*(\d+)$", line)
        if m and in_stats:
            res["statistics"][m.group(1)] = int(m.group(2))
    return res


def parse_ethtool_stats(text):
    """`ethtool -S <if>` -> {counter name: int} in printed order (the ``NIC statistics:`` header skipped)."""
    out = {}
    for raw in (text or "").splitlines():
        m = re.match(r"^\s*([^:\s][^:]*?):\s*(-?\d+)\s*$", raw)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


_PFC_COUNTERS = ("pause", "pause_duration", "pause_transition")


def ethtool_pause_counters(stats):
    """mlx5 pause counters from `ethtool -S` (a dict from parse_ethtool_stats, or its text).

    mlx5 exports ``rx_prioN_pause``, ``rx_prioN_pause_duration``, ``tx_prioN_pause``, ``tx_prioN_pause_duration``
    and ``rx_prioN_pause_transition`` only for priorities with PFC enabled (rx or tx), and the same five with
    ``global`` instead of ``prioN`` only while link-level (global) pause is on. Returns
    {pfc_priorities: [prio, ...], prio: {prio: {rx_pause, rx_pause_duration, tx_pause, tx_pause_duration,
    rx_pause_transition}}, global: {...} | None, storm: {tx_pause_storm_warning_events, ...}}.
    """
    if not isinstance(stats, dict):
        stats = parse_ethtool_stats(stats)
    prio = {}
    glob = {}
    for name, value in stats.items():
        m = re.match(r"^(rx|tx)_(prio(\d)|global)_(pause(?:_duration|_transition)?)$", name)
        if not m:
            continue
        key = "%s_%s" % (m.group(1), m.group(4))
        if m.group(3) is not None:
            prio.setdefault(int(m.group(3)), {})[key] = value
        else:
            glob[key] = value
    storm = dict((k, v) for k, v in stats.items() if k.startswith("tx_pause_storm_"))
    return {"pfc_priorities": sorted(prio), "prio": prio, "global": glob or None, "storm": storm}


# ------------------------------------------------------------------------------- traffic_class, RDMA-CM, ECN
def parse_roce_mode(text):
    """RDMA-CM configfs ``default_roce_mode`` (or any line of it): "RoCE v2" | "IB/RoCE v1" | None.

    The kernel prints exactly the two strings of ib_cache_gid_type_str(); anything else (e.g. "RoCE v1", which
    some vendor docs show but the kernel rejects) is None."""
    for raw in (text or "").splitlines():
        line = raw.strip()
        if line in (ROCE_MODE_V1, ROCE_MODE_V2):
            return line
    return None


def roce_mode_version(mode):
    """"RoCE v2" -> 2, "IB/RoCE v1" -> 1, else None (the number cma_roce_mode -m takes)."""
    return {ROCE_MODE_V2: 2, ROCE_MODE_V1: 1}.get(mode)


def parse_roce_tos(text):
    """RDMA-CM configfs ``default_roce_tos`` ("%u\\n", 0..255) -> int; None when empty or not a ToS byte."""
    for raw in (text or "").splitlines():
        line = raw.strip()
        if line.isdigit() and int(line) <= 255:
            return int(line)
    return None


def _parse_cma(text, value_parser, key):
    res = {key: None, "error": None, "message": None}
    errors = parse_cma_errors(text)
    if errors:
        res["error"] = errors[0]["kind"]
        res.update(dict((k, v) for k, v in errors[0].items() if k != "kind"))
    error_lines = set(e["message"] for e in errors)
    for raw in (text or "").splitlines():
        line = raw.strip()
        if line and line not in error_lines:
            val = value_parser(line)
            if val is not None:
                res[key] = val
    return res


def parse_cma_roce_mode(text):
    """Output of mlnx-tools `cma_roce_mode [-d dev] [-p port] [-m 1|2]`: the script cats default_roce_mode after
    any write. Returns {mode: "RoCE v2" | "IB/RoCE v1" | None, error: None | no_configfs | no_port |
    mkdir_failed | not_root | write_failed | bad_value, message, device?, port?}."""
    return _parse_cma(text, parse_roce_mode, "mode")


def parse_cma_roce_tos(text):
    """Output of mlnx-tools `cma_roce_tos [-d dev] [-p port] [-t tos]` (cats default_roce_tos). Returns
    {tos: int | None, error, message, ...} like parse_cma_roce_mode."""
    return _parse_cma(text, parse_roce_tos, "tos")


def parse_sysfs_int(text):
    """One sysfs attribute printed "%d\\n" (ecn enable/<prio>, DCQCN parameters, cnp_dscp) -> int; None if not."""
    text = (text or "").strip()
    return int(text) if re.match(r"^-?\d+$", text) else None


def parse_sysfs_dump(text):
    """Lines ``<path> = <value>`` or ``<path>:<value>`` (script / ``grep -H .`` dumps of sysfs) -> {path: value}."""
    out = {}
    for raw in (text or "").splitlines():
        m = re.search(r"(/sys/\S+?)\s*(?:=\s*|:)(\S.*?)\s*$", raw)
        if m:
            out[m.group(1)] = m.group(2)
    return out
