# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for RoCE QoS tool output: mlnx_qos, dcb (iproute2), ethtool -a / -S, MLNX_OFED traffic_class,
RDMA-CM configfs defaults and the mlnx-tools cma_roce_mode / cma_roce_tos scripts.

Pure Python (no Ansible imports): each function takes the tool's text and returns plain dicts/lists.
They follow the tools' grammar (mlnx-tools ``mlnx_qos``/``dcbnetlink.py``, iproute2 ``dcb/*.c``, ethtool
``netlink/pause.c``, the mlx5 driver's counter names and sysfs show functions) rather than one sample: tabs or
8-space expanded tabs, with or without the trailing blanks the tools print, older and newer mlnx_qos variants
(no ``default priority:`` block, ``total_size=`` or ``max_buffer_size=`` or a bare trailing comma on the buffer
line), dcb text and ``-j`` JSON, symbolic DSCP names (``CS3``) and printed sizes (``10Kb``).
Lines that fit no rule are ignored, never raised on.
"""

from __future__ import absolute_import, division, print_function

import json
import re

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

# strerror() text -> errno name, for the messages dcb/ethtool/mlnx_qos print
_ERRNO_NAMES = {
    "Success": None, "Operation not permitted": "EPERM", "No such file or directory": "ENOENT",
    "No such device": "ENODEV", "Invalid argument": "EINVAL", "File exists": "EEXIST",
    "Operation not supported": "EOPNOTSUPP", "Device or resource busy": "EBUSY", "Permission denied": "EACCES",
    "Numerical result out of range": "ERANGE", "No data available": "ENODATA",
}
# errno numbers (Linux) for the bogus "Unknown error N" (N = u8 of -errno) printed by iproute2 <= 5.16
_ERRNO_BY_NUMBER = {1: "EPERM", 2: "ENOENT", 16: "EBUSY", 17: "EEXIST", 19: "ENODEV", 22: "EINVAL", 34: "ERANGE",
                    95: "EOPNOTSUPP", 61: "ENODATA"}

# /etc/iproute2/rt_dsfield names (dsfield byte) as dcb prints them for DSCP keys (dsfield = DSCP << 2)
DSFIELD_NAMES = {
    "default": 0x0, "AF11": 0x28, "AF12": 0x30, "AF13": 0x38, "AF21": 0x48, "AF22": 0x50, "AF23": 0x58,
    "AF31": 0x68, "AF32": 0x70, "AF33": 0x78, "AF41": 0x88, "AF42": 0x90, "AF43": 0x98, "CS0": 0x0,
    "CS1": 0x20, "CS2": 0x40, "CS3": 0x60, "CS4": 0x80, "CS5": 0xA0, "CS6": 0xC0, "CS7": 0xE0, "EF": 0xB8,
}


def _int(text, default=None):
    try:
        return int(str(text).strip(), 0)
    except (TypeError, ValueError):
        return default


def _errno_name(text):
    text = (text or "").strip()
    if text in _ERRNO_NAMES:
        return _ERRNO_NAMES[text]
    m = re.match(r"^Unknown error (\d+)$", text)
    if m:
        num = int(m.group(1))
        return _ERRNO_BY_NUMBER.get(256 - num if num > 127 else num)
    return None


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
MLNX_QOS_UNSUPPORTED = (
    ("Priority trust state is not supported on your system", "trust"),
    ("Buffers commands are not supported on your system", "buffers"),
    ("Rate limit is not supported on your system!", "ratelimit"),
    ("ETS features are not supported on your system", "ets"),
)
_MLNX_QOS_ERRORS = (
    (re.compile(r"^Bad value for (?P<option>.+?): (?P<detail>.*)$"), "bad_value"),
    (re.compile(r"^(?P<option>pfc|tsa|tcbw|prio_tc|ratelimit) list must have 8 items$"), "list_length"),
    (re.compile(r"^Too many items (?:for|in) (?P<option>.+)$"), "list_length"),
    (re.compile(r"^trust and dscp2prio commands cannot be used at the same time\.$"), "conflict"),
    (re.compile(r"^Invalid (?P<option>trust state|dscp2prio|defltprio|dcbx mode) command\. Refer to the help\.$"),
     "invalid_command"),
    (re.compile(r"^(?P<option>dscp2prio|defltprio) command failed$"), "failed"),
    (re.compile(r"^Buffers commands error$"), "failed"),
    (re.compile(r"^Netlink error: (?P<detail>.*)$"), "netlink"),
    (re.compile(r"^mlnx_qos: Error setting (?P<option>pfc delay|pfc):\s*(?P<detail>.*)$"), "netlink"),
    (re.compile(r"^ETS BW for a strict/vendor TC must be 0$"), "bad_value"),
    (re.compile(r"^Bad TSA value:?\s*(?P<detail>.*)$"), "bad_value"),
    (re.compile(r"^\(?'Bad TSA value: ', '(?P<detail>[^']*)'\)?$"), "bad_value"),
    (re.compile(r"^pfc index must be in range of 0-7$"), "bad_value"),
    (re.compile(r"^Interface name is required$"), "usage"),
    (re.compile(r"^Bad arguments$"), "usage"),
    (re.compile(r"^Usage: \S+ -i <interface> \[options\]$"), "usage"),
    (re.compile(r"^\*+ WARNING: (?P<detail>.*?) \*+$"), "warning"),
    (re.compile(r"^(?P<detail>(?:[A-Za-z_]+Error|OSError|Exception): .*)$"), "exception"),
    (re.compile(r"^Traceback \(most recent call last\):$"), "exception"),
)


def parse_mlnx_qos_errors(text):
    """Error, warning and 'not supported' lines of mlnx_qos (all printed on stdout, exit status 1).

    Returns [{kind, message, option?, detail?, feature?}] in output order; kind is one of unsupported (feature:
    trust|buffers|ratelimit|ets), bad_value, list_length, conflict (--trust with --dscp2prio), invalid_command,
    failed, netlink ("Netlink error: Bad value. see dmesg."), usage, warning (lldpad running), exception.
    """
    out = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        feature = next((f for msg, f in MLNX_QOS_UNSUPPORTED if line == msg), None)
        if feature:
            out.append({"kind": "unsupported", "message": line, "feature": feature})
            continue
        for regex, kind in _MLNX_QOS_ERRORS:
            m = regex.match(line)
            if m:
                entry = {"kind": kind, "message": line}
                entry.update(dict((k, v) for k, v in m.groupdict().items() if v is not None))
                out.append(entry)
                break
    return out


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


# ------------------------------------------------------------------------------------------------------ dcb
_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)(b|Kb|Mb|Gb|KiB|MiB|GiB|B|K|M|G)?$")
_SIZE_MULT = {None: 1, "b": 1, "B": 1, "Kb": 1024, "K": 1024, "KiB": 1024, "Mb": 1024 ** 2, "M": 1024 ** 2,
              "MiB": 1024 ** 2, "Gb": 1024 ** 3, "G": 1024 ** 3, "GiB": 1024 ** 3}
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|Kbit|Mbit|Gbit|Tbit|Kibit|Mibit|Gibit|Tibit|bps|Kbps|Mbps|Gbps|Tbps)?$")
_RATE_MULT = {None: 1, "bit": 1, "Kbit": 1000, "Mbit": 1000 ** 2, "Gbit": 1000 ** 3, "Tbit": 1000 ** 4,
              "Kibit": 1024, "Mibit": 1024 ** 2, "Gibit": 1024 ** 3, "Tibit": 1024 ** 4,
              "bps": 8, "Kbps": 8000, "Mbps": 8 * 1000 ** 2, "Gbps": 8 * 1000 ** 3, "Tbps": 8 * 1000 ** 4}


def parse_dcb_size(text):
    """A size as dcb prints it (print_size: ``%ub``, ``%gKb``, ``%gMb``, 1024-based) -> bytes; None if not one."""
    m = _SIZE_RE.match(str(text).strip())
    if not m:
        return None
    return int(round(float(m.group(1)) * _SIZE_MULT[m.group(2)]))


def parse_dcb_rate(text):
    """A rate as dcb maxrate prints it (``25Gbit``, ``100Mbit``, ``-i``: ``Gibit``) -> bits per second."""
    m = _RATE_RE.match(str(text).strip())
    if not m:
        return None
    return int(round(float(m.group(1)) * _RATE_MULT[m.group(2)]))


def dcb_dscp_key(text):
    """A DSCP key of `dcb app` output: number (``24``) or rt_dsfield name (``CS3``, ``AF31``, ``default``) -> 0..63."""
    text = str(text).strip()
    if text.isdigit():
        return int(text)
    if text in DSFIELD_NAMES:
        return DSFIELD_NAMES[text] >> 2
    val = _int(text)
    if val is not None and not val & 0x3 and 0 <= val < 256:
        return val >> 2
    return None


def _dcb_text_lines(text):
    """[(key, tokens)] for each non-empty line of dcb text output (trailing blanks and empty lines ignored)."""
    out = []
    for raw in (text or "").splitlines():
        tokens = raw.split()
        if tokens:
            out.append((tokens[0].rstrip(":"), tokens[1:]))
    return out


def _is_mapping(tokens):
    return bool(tokens) and all(":" in t for t in tokens)


def _mapping(tokens):
    return [tuple(t.split(":", 1)) for t in tokens]


def _indexed(tokens, conv):
    """['0:off', '1:on', ...] -> list indexed by the key (8 entries, None where absent)."""
    out = [None] * NUM_PRIOS
    for key, val in _mapping(tokens):
        idx = _int(key)
        if idx is not None and 0 <= idx < NUM_PRIOS:
            out[idx] = conv(val)
    return out


def _on_off(val):
    return {"on": True, "off": False}.get(str(val).lower())


def _pairs(tokens):
    """['pfc-cap', '8', 'macsec-bypass', 'off'] -> {'pfc_cap': '8', 'macsec_bypass': 'off'}."""
    out = {}
    for i in range(0, len(tokens) - 1, 2):
        out[tokens[i].replace("-", "_")] = tokens[i + 1]
    return out


def _json_obj(text):
    text = (text or "").strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _bool_list(values):
    return [bool(v) for v in values] if isinstance(values, list) else None


def parse_dcb_pfc(text):
    """`dcb [-s] [-j] pfc show dev X`. Returns {pfc_cap, macsec_bypass (bool), delay, pfc: [8 x 0/1],
    pfc_enabled: [prio, ...], requests: [8] | None, indications: [8] | None} (keys None when not printed).
    Accepts the pre-merge label ``pg-pfc`` for ``prio-pfc``."""
    res = {"pfc_cap": None, "macsec_bypass": None, "delay": None, "requests": None, "indications": None}
    pfc = []
    data = _json_obj(text)
    if data is not None:
        res["pfc_cap"] = data.get("pfc_cap")
        res["macsec_bypass"] = data.get("macsec_bypass")
        res["delay"] = data.get("delay")
        pfc = [1 if v else 0 for v in (_bool_list(data.get("prio_pfc")) or [])]
        for key in ("requests", "indications"):
            if isinstance(data.get(key), list):
                res[key] = [int(v) for v in data[key]]
    else:
        for key, tokens in _dcb_text_lines(text):
            if key in ("prio-pfc", "pg-pfc") and _is_mapping(tokens):
                pfc = [1 if v else 0 for v in _indexed(tokens, _on_off)]
            elif key in ("requests", "indications") and _is_mapping(tokens):
                res[key] = _indexed(tokens, _int)
            elif not _is_mapping(tokens):
                pairs = _pairs([key] + tokens)
                if "pfc_cap" in pairs:
                    res["pfc_cap"] = _int(pairs["pfc_cap"])
                if "macsec_bypass" in pairs:
                    res["macsec_bypass"] = _on_off(pairs["macsec_bypass"])
                if "delay" in pairs:
                    res["delay"] = _int(pairs["delay"])
    res["pfc"] = pfc or None
    res["pfc_enabled"] = [p for p in range(len(pfc)) if pfc[p]] if pfc else None
    return res


_ETS_ARRAYS = ("tc_bw", "pg_bw", "tc_tsa", "prio_tc", "reco_tc_bw", "reco_tc_tsa", "reco_prio_tc")


def parse_dcb_ets(text):
    """`dcb [-j] ets show dev X [params]`. Returns {willing, ets_cap, cbs, tc_bw, pg_bw, tc_tsa, prio_tc,
    reco_tc_bw, reco_tc_tsa, reco_prio_tc}: lists of 8 (TSA names "strict"|"cbs"|"ets"|"vendor"), None when
    not printed. The pre-merge token ``ets_cap`` is read like ``ets-cap``."""
    res = dict((k, None) for k in ("willing", "ets_cap", "cbs") + _ETS_ARRAYS)
    data = _json_obj(text)
    if data is not None:
        for key in ("willing", "cbs"):
            if key in data:
                res[key] = bool(data[key])
        res["ets_cap"] = data.get("ets_cap")
        for key in _ETS_ARRAYS:
            if isinstance(data.get(key), list):
                res[key] = list(data[key])
        return res
    for key, tokens in _dcb_text_lines(text):
        norm = key.replace("-", "_")
        if norm in _ETS_ARRAYS and _is_mapping(tokens):
            conv = (lambda v: v) if norm.endswith("tsa") else _int
            res[norm] = _indexed(tokens, conv)
        elif not _is_mapping(tokens):
            pairs = _pairs([key] + tokens)
            for name in ("willing", "cbs"):
                if name in pairs:
                    res[name] = _on_off(pairs[name])
            if "ets_cap" in pairs:
                res["ets_cap"] = _int(pairs["ets_cap"])
    return res


_APP_SELECTORS = ("ethtype_prio", "default_prio", "dscp_prio", "stream_port_prio", "dgram_port_prio", "port_prio",
                  "pcp_prio")


def parse_dcb_app(text):
    """`dcb [-N] [-j] app show dev X [selectors]`.

    Returns {dscp_prio: [(dscp, prio), ...] in printed order (dcb sorts by DSCP then priority; a DSCP may map
    to several priorities), dscp2prio: {dscp: prio} (the highest priority when a DSCP has several),
    dscp_multi: {dscp: [prio, ...]} for DSCPs with more than one priority, default_prio: [prio, ...],
    pcp_prio: [(pcp, prio)], ethtype_prio / stream_port_prio / dgram_port_prio / port_prio: [(key, prio)]}.
    Selectors not printed are [] (dcb prints nothing for an empty selector). Symbolic DSCP names are resolved
    with the standard rt_dsfield table.
    """
    res = dict((k, []) for k in _APP_SELECTORS)
    data = _json_obj(text)
    if data is not None:
        for key in _APP_SELECTORS:
            entries = data.get(key)
            if not isinstance(entries, list):
                continue
            if key == "default_prio":
                res[key] = [int(v) for v in entries]
            else:
                res[key] = [(e[0], int(e[1])) for e in entries if isinstance(e, list) and len(e) == 2]
    else:
        for key, tokens in _dcb_text_lines(text):
            norm = key.replace("-", "_")
            if norm == "default_prio":
                res[norm] = [int(t) for t in tokens if t.isdigit()]
            elif norm in _APP_SELECTORS and _is_mapping(tokens):
                res[norm] = [(k, _int(v)) for k, v in _mapping(tokens)]
    dscp = []
    for key, prio in res["dscp_prio"]:
        val = key if isinstance(key, int) else dcb_dscp_key(key)
        if val is not None and prio is not None:
            dscp.append((val, prio))
    res["dscp_prio"] = dscp
    for sel in ("ethtype_prio", "stream_port_prio", "dgram_port_prio", "port_prio"):
        res[sel] = [(k if isinstance(k, int) else _int(k if sel != "ethtype_prio" else "0x" + str(k)), p)
                    for k, p in res[sel]]
    multi = {}
    for val, prio in dscp:
        multi.setdefault(val, []).append(prio)
    res["dscp2prio"] = dict((val, max(prios)) for val, prios in multi.items())
    res["dscp_multi"] = dict((val, prios) for val, prios in multi.items() if len(prios) > 1)
    return res


def parse_dcb_apptrust(text):
    """`dcb [-j] apptrust show dev X`: the ``order:`` line (note the colon) -> {order: [selector, ...]}."""
    data = _json_obj(text)
    if data is not None:
        return {"order": list(data.get("order") or [])}
    for key, tokens in _dcb_text_lines(text):
        if key == "order":
            return {"order": tokens}
    return {"order": None}


def parse_dcb_buffer(text):
    """`dcb [-j] buffer show dev X`. Returns {prio_buffer: [8], buffer_size: [8 bytes], total_size: bytes}
    (sizes from ``10Kb``/``1Mb``/``130944b`` in text, plain integers in JSON); None when not printed."""
    res = {"prio_buffer": None, "buffer_size": None, "total_size": None}
    data = _json_obj(text)
    if data is not None:
        for key in ("prio_buffer", "buffer_size"):
            if isinstance(data.get(key), list):
                res[key] = [int(v) for v in data[key]]
        res["total_size"] = data.get("total_size")
        return res
    for key, tokens in _dcb_text_lines(text):
        if key == "prio-buffer" and _is_mapping(tokens):
            res["prio_buffer"] = _indexed(tokens, _int)
        elif key == "buffer-size" and _is_mapping(tokens):
            res["buffer_size"] = _indexed(tokens, parse_dcb_size)
        elif key == "total-size" and tokens:
            res["total_size"] = parse_dcb_size(tokens[0])
    return res


def parse_dcb_maxrate(text):
    """`dcb [-j] maxrate show dev X` -> {tc_maxrate: [8 bits/s]} (JSON holds bytes/s as the kernel does)."""
    data = _json_obj(text)
    if data is not None:
        rates = data.get("tc_maxrate")
        return {"tc_maxrate": [int(v) * 8 for v in rates] if isinstance(rates, list) else None}
    for key, tokens in _dcb_text_lines(text):
        if key == "tc-maxrate" and _is_mapping(tokens):
            return {"tc_maxrate": _indexed(tokens, parse_dcb_rate)}
    return {"tc_maxrate": None}


_DCBX_FLAGS = ("host", "lld_managed", "cee", "ieee", "static")


def parse_dcb_dcbx(text):
    """`dcb [-j] dcbx show dev X` -> {flags: [...], host, lld_managed, cee, ieee, static (bools)}."""
    data = _json_obj(text)
    if data is not None:
        flags = [f for f in _DCBX_FLAGS if data.get(f)]
    else:
        flags = []
        for raw in (text or "").splitlines():
            flags += [t.replace("-", "_") for t in raw.split() if t.replace("-", "_") in _DCBX_FLAGS]
    res = dict((f, f in flags) for f in _DCBX_FLAGS)
    res["flags"] = flags
    return res


_DCB_ERRORS = (
    (re.compile(r"^Attribute read: (?P<detail>.*)$"), "attribute_read"),
    (re.compile(r"^Attribute write: (?P<detail>.*)$"), "attribute_write"),
    (re.compile(r"^Attribute not found: (?P<detail>.*)$"), "attribute_not_found"),
    (re.compile(r"^Error when attempting to set attribute: (?P<detail>.*)$"), "set_attribute"),
    (re.compile(r"^In (?P<key>\S+?):(?P<value>\S+) mapping, (?P<what>\S+) is expected to be (?P<range>\S+)$"),
     "mapping_range"),
    (re.compile(r"^Invalid (?P<what>.*?)\s*mapping (?P<detail>.*)$"), "invalid_mapping"),
    (re.compile(r"^What is \"(?P<detail>.*)\"\?$"), "unknown_keyword"),
    (re.compile(r"^Object \"(?P<detail>.*)\" is unknown$"), "unknown_object"),
    (re.compile(r"^Command line is not complete\. Try option \"help\"$"), "incomplete"),
    (re.compile(r"^dcb: (?:invalid|unrecognized) option.*$"), "invalid_option"),
    (re.compile(r"^Unknown option\.$"), "invalid_option"),
    (re.compile(r"^Invalid delay `(?P<detail>.*)', expected an integer 0\.\.65535$"), "bad_value"),
    (re.compile(r"^(?P<what>\S+) (?:argument|value) is invalid.*$"), "bad_value"),
    (re.compile(r"^Duplicate selector: (?P<detail>.*)$"), "bad_value"),
    (re.compile(r"^Invalid list of selectors$"), "bad_value"),
    (re.compile(r"^Could not (?:add new|remove replaced) APP entries$"), "replace_failed"),
    (re.compile(r"^Usage: dcb .*$"), "usage"),
)


def parse_dcb_errors(text):
    """Error lines dcb prints on stderr. Returns [{kind, message, detail?, errno?}] where kind is one of
    attribute_read / attribute_write / attribute_not_found (perror after a netlink request; errno is the errno
    name of the strerror text, e.g. ENODEV, EOPNOTSUPP, EEXIST), set_attribute (the pre-5.17 bogus
    "Unknown error 239" form; errno decoded from the u8), mapping_range, invalid_mapping, unknown_keyword,
    unknown_object (e.g. ``apptrust`` on iproute2 < 6.2), incomplete, invalid_option, bad_value,
    replace_failed, usage. Only the first line of each usage block is reported."""
    out = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        for regex, kind in _DCB_ERRORS:
            m = regex.match(line)
            if m:
                entry = {"kind": kind, "message": line}
                entry.update(dict((k, v) for k, v in m.groupdict().items() if v is not None))
                if kind in ("attribute_read", "attribute_write", "attribute_not_found", "set_attribute"):
                    entry["errno"] = _errno_name(entry.get("detail"))
                out.append(entry)
                break
    return out


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


_ETHTOOL_ERRORS = (
    (re.compile(r"^netlink error: no device matches name.*$"), "no_device"),
    (re.compile(r"^netlink error: (?P<detail>.*)$"), "netlink"),
    (re.compile(r"^Cannot get (?P<what>.+?): (?P<detail>.*)$"), "ioctl"),
    (re.compile(r"^Cannot set (?P<what>.+?): (?P<detail>.*)$"), "ioctl"),
    (re.compile(r"^no stats available$"), "no_stats"),
    (re.compile(r"^no pause parameters changed, aborting$"), "unchanged"),
    (re.compile(r"^ethtool \((?P<option>-\w)\): invalid value '(?P<value>.*)' for parameter '(?P<param>.*)'$"),
     "invalid_value"),
    (re.compile(r"^ethtool \((?P<option>-\w)\): unknown parameter '(?P<param>.*)'$"), "unknown_parameter"),
    (re.compile(r"^ethtool: bad command line argument\(s\)$"), "bad_args"),
)


def parse_ethtool_errors(text):
    """Error lines of ethtool (stderr). Returns [{kind, message, detail?, errno?, ...}]; kind is one of
    no_device, netlink (errno from the strerror text, e.g. EOPNOTSUPP), ioctl, no_stats, unchanged,
    invalid_value, unknown_parameter, bad_args."""
    out = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        for regex, kind in _ETHTOOL_ERRORS:
            m = regex.match(line)
            if m:
                entry = {"kind": kind, "message": line}
                entry.update(dict((k, v) for k, v in m.groupdict().items() if v is not None))
                if "detail" in entry:
                    entry["errno"] = _errno_name(entry["detail"])
                if kind == "no_device":
                    entry["errno"] = "ENODEV"
                out.append(entry)
                break
    return out


# ------------------------------------------------------------------------------- traffic_class, RDMA-CM, ECN
_TCLASS_RULE_KEYS = ("src_ip", "dst_ip", "src_ip6", "dst_ip6")


def parse_traffic_class(text):
    """MLNX_OFED ``class/infiniband/<dev>/tc/<port>/traffic_class`` as the driver shows it.

    The file reads empty while no global traffic class is set (the driver's initial value is -1),
    ``Global tclass=N`` once a number was written, followed by one line per match rule
    (``dst_ip=10.0.0.0/24,tclass=96``). A line that merely contains ``Global tclass=N`` (a script echoing the
    file) is accepted too. Returns {global_tclass: int | None, rules: [{tclass, src_ip?, dst_ip?, src_ip6?,
    dst_ip6?}], dscp: global_tclass >> 2 | None}.
    """
    res = {"global_tclass": None, "rules": [], "dscp": None}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = re.search(r"Global tclass=(\d+)", line)
        if m:
            res["global_tclass"] = int(m.group(1))
            continue
        if "tclass=" in line and "=" in line.split(",", 1)[0]:
            rule = {}
            for part in line.split(","):
                key, _sep, val = part.strip().partition("=")
                if key == "tclass" and val.strip().lstrip("-").isdigit():
                    rule["tclass"] = int(val)
                elif key in _TCLASS_RULE_KEYS and val:
                    rule[key] = val.strip()
            if "tclass" in rule:
                res["rules"].append(rule)
    if res["global_tclass"] is not None:
        res["dscp"] = tos_to_dscp(res["global_tclass"])
    return res


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


_CMA_ERRORS = (
    (re.compile(r"^Module rdma_cm is not loaded or does not support configfs$"), "no_configfs"),
    (re.compile(r"^Device (?P<device>\S+) port (?P<port>\S+) does not exist$"), "no_port"),
    (re.compile(r"^Failed to create configuration for (?P<device>\S+)$"), "mkdir_failed"),
    (re.compile(r"^You must be root to run this$"), "not_root"),
    (re.compile(r"^Failed to mount configfs$"), "no_configfs"),
    (re.compile(r"^mkdir: cannot create directory .*: (?P<detail>.*)$"), "mkdir_failed"),
    (re.compile(r"^.*: line \d+: (?:echo: )?write error: (?P<detail>.*)$"), "write_failed"),
    (re.compile(r"^.*: line \d+: \[: (?P<detail>.*): integer expression expected$"), "bad_value"),
)


def _parse_cma(text, value_parser, key):
    res = {key: None, "error": None, "message": None}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        for regex, kind in _CMA_ERRORS:
            m = regex.match(line)
            if m:
                if res["error"] is None:
                    res["error"] = kind
                    res["message"] = line
                    res.update(dict((k, v) for k, v in m.groupdict().items() if v is not None))
                break
        else:
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
