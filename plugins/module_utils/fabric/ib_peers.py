# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each InfiniBand HCA port's peer as the subnet's management view shows it: the output of ``iblinkinfo``
(infiniband-diags), parsed into the switch node, its GUID, the switch port, and the width and speed of both ends.

iblinkinfo's layout (rdma-core ``infiniband-diags/iblinkinfo.c``, ``print_node_header`` and ``print_port``):

* a node header, ``CA: <node description>:`` or ``Switch: 0x<port 0 GUID> <node description>:``;
* one line per port: ``[0x<port GUID>] <LID> <port>[<ext>] ==(<width> <speed> <state>/<phys state>)==>  <remote
  LID> <remote port>[<ext>] "<remote node description>" (<could-be width> <could-be speed>)``: the port GUID only on
  CA lines; switch lines carry the switch's LID; a down port shows ``(  Down/ Polling)`` and ``[  ] "" ( )``;
* with ``-l`` (line mode) every line is whole: ``0x<GUID> "<node description>" <LID> <port>[<ext>] ==(...)==>
  0x<remote GUID> <remote LID> <remote port>[<ext>] "<remote description>" (...)``.

A CA line names the switch by its LID, port and description; the switch's GUID and the switch port's own width
and speed come from the switch's block (found by that LID). Output filtered by ``grep`` (no headers) still gives
what its lines hold; what is missing is None.

A peer (the public shape of the facts; ``guid``, ``width`` and ``speed`` are the issue's names)::

    {system_name, guid, port_id, lid, node_type, width, speed, hca_width, hca_speed, could_be}

``width``/``speed`` are the switch port's as iblinkinfo prints them (``4X``, ``25.78125 Gbps``), ``hca_width``/
``hca_speed`` the HCA port's; ``could_be`` is iblinkinfo's own note when both ends support more (``Could be 4X``).
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

IBLINKINFO = "iblinkinfo"
# seconds: a subnet sweep of a large fabric takes a while; a hung SMP path must not hold the play
IBLINKINFO_TIMEOUT = 120

_HEADER = re.compile(r"^(?P<type>CA|Switch|Router): (?:0x(?P<guid>[0-9a-fA-F]{16}) )?(?P<desc>.*):\s*$")
_PORT = re.compile(
    r"^\s*(?:0x(?P<guid>[0-9a-fA-F]{16})\s+)?(?:\"(?P<desc>[^\"]*)\"\s+)?(?P<lid>\d+)\s+(?P<port>\d+)"
    r"\[(?P<ext>[^\]]*)\]\s+==\((?P<link>.*?)\)(?:\s*\(HOQ:[^)]*\))?==>\s*(?P<remote>.*?)\s*$")
_LINK = re.compile(r"^\s*(?:(?P<width>\S+)\s+(?P<speed>\S.*?)\s+)?(?P<state>[A-Za-z?]+)/\s*(?P<phys>\S+)\s*$")
_REMOTE = re.compile(
    r"^(?:0x(?P<guid>[0-9a-fA-F]{16})\s+)?(?P<lid>\d+)\s+(?P<port>\d+)\[(?P<ext>[^\]]*)\]\s+\"(?P<desc>.*)\""
    r"\s*\((?P<msg>.*)\)$")


def _guid(text):
    return "0x%s" % text.lower() if text else None


def _link(text):
    m = _LINK.match(text)
    if not m:
        return {"width": None, "speed": None, "state": None, "phys_state": None}
    return {"width": m.group("width"), "speed": m.group("speed"), "state": m.group("state"),
            "phys_state": m.group("phys")}


def _remote(text):
    m = _REMOTE.match(text)
    if not m:
        return None     # a down port ([  ] "" ( )) or "Port not available"
    msg = " ".join(m.group("msg").split())
    return {"guid": _guid(m.group("guid")), "lid": int(m.group("lid")), "port": int(m.group("port")),
            "desc": m.group("desc"), "could_be": msg or None}


def parse_iblinkinfo(text):
    """iblinkinfo's text (default or ``-l`` mode, whole or filtered) -> ``{ports: [...], problems: [text]}``.

    Each port: ``{node_type ("CA", "Switch", "Router", None when no header), node_desc, node_guid, guid, lid, port,
    width, speed, state, phys_state, remote ({guid, lid, port, desc, could_be} or None)}``. ``guid`` is the GUID
    printed on the port's line (a CA's port GUID; in line mode any node's), ``node_guid`` the switch header's.
    Lines that are no port and no header (warnings, blank lines) are skipped; nothing raises."""
    out = {"ports": [], "problems": []}
    header = {"type": None, "guid": None, "desc": None}
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        m = _HEADER.match(line)
        if m:
            header = {"type": m.group("type"), "guid": _guid(m.group("guid")), "desc": m.group("desc")}
            continue
        m = _PORT.match(line)
        if not m:
            if "==>" in line:
                out["problems"].append("iblinkinfo line not understood: %s" % line.strip())
            continue
        port = {"node_type": header["type"], "node_desc": header["desc"], "node_guid": header["guid"],
                "guid": _guid(m.group("guid")), "lid": int(m.group("lid")), "port": int(m.group("port")),
                "remote": _remote(m.group("remote"))}
        if m.group("desc") is not None:             # line mode: the node's description is on the line
            port["node_desc"] = m.group("desc").strip()
            port["node_type"] = None
        port.update(_link(m.group("link")))
        out["ports"].append(port)
    return out


def _own_line(ports, remote):
    """The remote end's own line: by GUID and port in line mode, else by LID and port."""
    for port in ports:
        if port["port"] != remote["port"]:
            continue
        if remote["guid"] and port["guid"] == remote["guid"]:
            return port
        if not remote["guid"] and port["lid"] == remote["lid"] and port["node_type"] != "CA":
            return port
    for port in ports:                              # a CA at the far end (back-to-back HCAs)
        if not remote["guid"] and port["port"] == remote["port"] and port["lid"] == remote["lid"]:
            return port
    return None


def _remote_node(ports, remote, own):
    """``(guid, node_type)`` of the remote node: its printed GUID (line mode), its own line's, or that of any line
    of the switch block with its LID (a block printed in part still has its header)."""
    if remote["guid"]:
        return remote["guid"], own["node_type"] if own is not None else None
    if own is not None and (own["node_guid"] or own["guid"]):
        return own["node_guid"] or own["guid"], own["node_type"]
    for port in ports:
        if port["node_type"] == "Switch" and port["lid"] == remote["lid"] and port["node_guid"]:
            return port["node_guid"], "Switch"
    return None, own["node_type"] if own is not None else None


def hca_peers(text):
    """iblinkinfo's text -> ``{peers: [{hca_guid, hca_desc, hca_port, hca_lid, state, peer}], problems}``, one entry
    per CA port line, ``peer`` None when the port is down. In line mode (``-l``) nothing on a line tells a CA from a
    switch, so every line is an entry: look an HCA port up by its GUID (:func:`find_peer`)."""
    parsed = parse_iblinkinfo(text)
    ports = parsed["ports"]
    entries = []
    for port in ports:
        if port["node_type"] == "Switch" or (port["node_type"] is None and port["guid"] is None):
            continue            # a switch's own line (in a block, or grep'd without its header)
        remote = port["remote"]
        peer = None
        if remote is not None:
            own = _own_line(ports, remote)
            guid, node_type = _remote_node(ports, remote, own)
            peer = {"system_name": remote["desc"], "guid": guid, "port_id": remote["port"], "lid": remote["lid"],
                    "node_type": node_type,
                    "width": own["width"] if own is not None else None,
                    "speed": own["speed"] if own is not None else None,
                    "hca_width": port["width"], "hca_speed": port["speed"], "could_be": remote["could_be"]}
        entries.append({"hca_guid": port["guid"], "hca_desc": port["node_desc"], "hca_port": port["port"],
                        "hca_lid": port["lid"], "state": port["state"], "peer": peer})
    return {"peers": entries, "problems": parsed["problems"]}


def find_peer(entries, guid=None, node_desc=None, port=None):
    """The peer of one HCA port among :func:`hca_peers`' entries: by port GUID (``0x...`` or bare hex, any case),
    or by node description and port number. None when not found or down."""
    want = _guid(guid[2:] if guid and guid.lower().startswith("0x") else guid) if guid else None
    for entry in entries:
        if want and entry["hca_guid"] == want and (port is None or entry["hca_port"] == port):
            return entry["peer"]
        if not want and node_desc is not None and entry["hca_desc"] == node_desc and entry["hca_port"] == port:
            return entry["peer"]
    return None


STATE_OK = "ok"
STATE_NOT_INSTALLED = "infiniband_diags_not_installed"
STATE_FAILED = "iblinkinfo_failed"


def iblinkinfo_argv(binary, device, port):
    """One HCA port's view: a partial scan from the port itself (direct route ``0``, iblinkinfo's default one hop)
    printing every node found (``-a``): the port's own line and its switch's block with the switch's GUID."""
    return [binary, "-C", str(device), "-P", str(port), "-D", "0", "-a"]


def read_peers(runner, ports):
    """Run iblinkinfo once per HCA port through ``runner``; ``ports``: ``(device, port, port_guid)`` tuples (the
    facts' ``port_guid``, ``0x%016x``). Returns ``{state, reason, peers: {device: {port: peer or None}},
    problems: [text]}``; a port whose run fails has no peer and a problem line naming it. ``state`` is ``ok``,
    ``infiniband_diags_not_installed``, or ``iblinkinfo_failed`` when the run failed on every port (no ``ib_umad``,
    no fabric access: the first failure is the reason). Read-only; runs in check mode too."""
    result = {"state": STATE_OK, "reason": None, "peers": {}, "problems": []}
    ports = list(ports or ())
    for device, port, _guid_text in ports:
        result["peers"].setdefault(device, {})[int(port)] = None
    binary = runner.which(IBLINKINFO) if ports else None
    if ports and not binary:
        result.update(state=STATE_NOT_INSTALLED,
                      reason="infiniband-diags is not installed (no iblinkinfo on the PATH): no InfiniBand peers "
                             "are read")
        return result
    failures = []
    for device, port, guid_text in ports:
        rc, out, err = runner.run(iblinkinfo_argv(binary, device, port), timeout=IBLINKINFO_TIMEOUT)
        text = "\n".join(t for t in (err, out) if t).strip()
        if rc != 0:
            last = text.splitlines()[-1] if text else "no output"
            failures.append("%s port %s: `iblinkinfo` failed (rc %s): %s" % (device, port, rc, last))
            result["problems"].append(failures[-1])
            continue
        parsed = hca_peers(out)
        result["problems"].extend("%s port %s: %s" % (device, port, p) for p in parsed["problems"])
        result["peers"][device][int(port)] = find_peer(parsed["peers"], guid=guid_text, port=int(port))
    if ports and len(failures) == len(ports):
        result.update(state=STATE_FAILED, reason=failures[0])
    return result
