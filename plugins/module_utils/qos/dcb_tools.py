# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for the output of iproute2's ``dcb``: ``pfc``, ``ets``, ``app``, ``apptrust``, ``buffer``, ``maxrate``
and ``dcbx`` show, in text and ``-j`` JSON form, with the units dcb prints (sizes ``10Kb``, rates ``25Gbit``) and
the symbolic DSCP names of ``/etc/iproute2/rt_dsfield`` (``CS3``, ``AF31``).

Pure Python (no Ansible imports): each function takes the tool's text and returns plain dicts/lists. They follow
iproute2's ``dcb/*.c`` rather than one sample (trailing blanks and empty lines, older labels such as ``pg-pfc``
and ``ets_cap``). Lines that fit no rule are ignored, never raised on. dcb's error messages are parsed in
qos_errors (``parse_dcb_errors``).
"""

from __future__ import absolute_import, division, print_function

import json
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.qos_tools import NUM_PRIOS

__metaclass__ = type

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
