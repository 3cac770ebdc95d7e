# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each RoCE port's peer as lldpd hears it: ``lldpcli -f json0 show neighbors details``, parsed into one peer per
netdev (the switch, its port, its management address, its 802.3 maximum frame size and its 802.1Qaz settings).

``json0`` is lldpcli's stable JSON: every element is a list (``"name": [{"value": "leaf01"}]``), whether it
occurs once or more, so its shape does not change with the number of neighbours, addresses or TLVs (the ``json``
format folds one-element lists away). Attributes ``yes``/``no``/``on``/``off`` become booleans; element text is
under ``value``. The shape is lldpd's ``src/client/display.c`` written by ``json_writer.c`` (tests in lldpd's
``tests/integration/test_lldpcli.py``); the captures are in ``tests/fixtures/real/lldp/``.

A peer (the public shape of the facts)::

    {system_name, system_description, chassis_id, port_id, port_description, mgmt_address,
     mfs (int, the 802.3 Maximum Frame Size TLV, None when not sent), dcbx (see dcbx.py, None when not sent)}

:func:`read_peers` runs the one command through the runner and returns, for each asked netdev, its peer or None,
with a ``state`` saying why there may be none (lldpd not installed, not running, the command failing).
"""

from __future__ import absolute_import, division, print_function

import json

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import dcbx as dcbx_tlvs

__metaclass__ = type

LLDPCLI = "lldpcli"
LLDPCLI_ARGS = ["-f", "json0", "show", "neighbors", "details"]
# lldpcli answers from lldpd's memory at once; a bound for a daemon that hangs
LLDPCLI_TIMEOUT = 30

STATE_OK = "ok"
STATE_NOT_INSTALLED = "lldpd_not_installed"
STATE_NOT_RUNNING = "lldpd_not_running"
STATE_FAILED = "lldpcli_failed"

# what lldpcli prints when no lldpd listens on its socket (``[WARN/control] unable to connect to socket
# /run/lldpd.socket: No such file or directory``, or ``Connection refused`` for a stale socket)
_NO_SOCKET = "unable to connect to socket"
_NO_DAEMON = ("No such file or directory", "Connection refused")


def _first(element, key, field="value"):
    """``element[key][0][field]`` of json0, or None."""
    items = element.get(key) if isinstance(element, dict) else None
    if not isinstance(items, list) or not items or not isinstance(items[0], dict):
        return None
    value = items[0].get(field)
    return value if isinstance(value, str) else None


def _list(element, key):
    items = element.get(key) if isinstance(element, dict) else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def peer_from_interface(interface):
    """One json0 ``interface`` element (a neighbour heard on a local port) -> the peer dict."""
    chassis = (_list(interface, "chassis") or [{}])[0]
    port = (_list(interface, "port") or [{}])[0]
    tlvs = []
    for group in _list(interface, "unknown-tlvs"):
        tlvs.extend(_list(group, "unknown-tlv"))
    return {
        "system_name": _first(chassis, "name"),
        "system_description": _first(chassis, "descr"),
        "chassis_id": _first(chassis, "id"),
        "port_id": _first(port, "id"),
        "port_description": _first(port, "descr"),
        "mgmt_address": _first(chassis, "mgmt-ip"),
        "mfs": dcbx_tlvs.to_int(_first(port, "mfs")),
        "dcbx": dcbx_tlvs.decode(tlvs),
    }


def parse_neighbors(text):
    """The text of ``lldpcli -f json0 show neighbors details`` -> ``{peers: {netdev: peer}, problems: [text]}``.

    One neighbour per port is what a fabric has (each host port cabled to one switch port); a second one on the
    same port (a host behind an unmanaged switch, or the NIC's firmware agent answering too) is a problem line and
    the first one is the peer. Text that is not lldpcli's JSON gives no peers and a problem, never an exception."""
    out = {"peers": {}, "problems": []}
    try:
        data = json.loads(text or "")
    except ValueError as exc:
        out["problems"].append("lldpcli's output is not JSON (%s)" % exc)
        return out
    roots = data.get("lldp") if isinstance(data, dict) else None
    if not isinstance(roots, list):
        out["problems"].append("lldpcli's output has no \"lldp\" list (not the json0 format)")
        return out
    for root in roots:
        for interface in _list(root, "interface"):
            name = interface.get("name")
            if not isinstance(name, str) or not name:
                out["problems"].append("a neighbour without its local interface name was skipped")
                continue
            peer = peer_from_interface(interface)
            if name in out["peers"]:
                first = out["peers"][name]
                out["problems"].append("%s hears more than one LLDP neighbour (%s port %s, and %s port %s); the "
                                       "first is taken as its peer" % (name, first["system_name"], first["port_id"],
                                                                       peer["system_name"], peer["port_id"]))
                continue
            out["peers"][name] = peer
            for problem in (peer["dcbx"] or {}).get("problems", ()):
                out["problems"].append("%s: %s" % (name, problem))
    return out


def _failure_state(rc, out, err):
    """``(state, reason)`` of a failed lldpcli run."""
    text = "\n".join(t for t in (err, out) if t).strip()
    if _NO_SOCKET in text and any(marker in text for marker in _NO_DAEMON):
        return STATE_NOT_RUNNING, ("lldpd is not running (lldpcli cannot reach its socket); start it with "
                                   "`systemctl enable --now lldpd`")
    last = text.splitlines()[-1] if text else "no output"
    return STATE_FAILED, "`lldpcli %s` failed (rc %s): %s" % (" ".join(LLDPCLI_ARGS), rc, last)


def read_peers(runner, netdevs=None):
    """Run ``lldpcli -f json0 show neighbors details`` once through ``runner`` and return
    ``{state, reason, peers: {netdev: peer or None}, problems: [text]}``.

    ``netdevs``: the netdevs to report (each gets a key, None when nothing answers on it); all the netdevs lldpd
    hears on when omitted. ``state`` is ``ok``, ``lldpd_not_installed`` (no lldpcli), ``lldpd_not_running`` or
    ``lldpcli_failed``; ``reason`` says why in a sentence (None when ok). Read-only; runs in check mode too."""
    result = {"state": STATE_OK, "reason": None, "peers": {}, "problems": []}
    wanted = list(netdevs) if netdevs is not None else None
    binary = runner.which(LLDPCLI)
    if not binary:
        result.update(state=STATE_NOT_INSTALLED,
                      reason="lldpd is not installed (no lldpcli on the PATH): no LLDP peers are read")
    else:
        rc, out, err = runner.run([binary] + LLDPCLI_ARGS, timeout=LLDPCLI_TIMEOUT)
        if rc != 0:
            state, reason = _failure_state(rc, out, err)
            result.update(state=state, reason=reason)
        else:
            parsed = parse_neighbors(out)
            result["peers"] = parsed["peers"]
            result["problems"] = parsed["problems"]
            if not parsed["peers"] and parsed["problems"]:
                result.update(state=STATE_FAILED, reason=parsed["problems"][0])
    if wanted is not None:
        result["peers"] = dict((name, result["peers"].get(name)) for name in wanted)
    return result
