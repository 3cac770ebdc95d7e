# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Port counters before and after traffic: a snapshot, the deltas, and what the deltas say (findings).

Pure Python (no Ansible imports). Ports are keyed ``"<hca>/<port>"`` (``mlx5_0/1``). The counters come from:

- ``<sysfs_root>/class/infiniband/<hca>/ports/<p>/counters/`` (IB PMA counters; on mlx5 RoCE ports the same names,
  from the vport): ``symbol_error``, ``link_error_recovery``, ``link_downed``, ``port_rcv_errors``,
  ``port_rcv_remote_physical_errors``, ``port_xmit_discards``, ``local_link_integrity_errors``,
  ``excessive_buffer_overrun_errors`` (error counters, which saturate at 2^4-1 .. 2^16-1 and do not wrap) and
  ``port_xmit_data``, ``port_rcv_data`` (in 4-byte words);
- ``.../hw_counters/`` (mlx5): ``out_of_buffer`` (packets dropped for lack of a posted receive buffer),
  ``out_of_sequence``, ``packet_seq_err``, ``local_ack_timeout_err`` (signs of loss and retransmission), and on RoCE
  ports ``np_ecn_marked_roce_packets``, ``np_cnp_sent``, ``rp_cnp_handled`` (ECN / DCQCN);
- ``ethtool -S <netdev>`` for RoCE (Ethernet) ports: ``rx_prioN_pause`` / ``tx_prioN_pause`` (PFC pause frames per
  priority; mlx5 lists them only for priorities with PFC on), ``rx_global_pause`` / ``tx_global_pause`` (link-level
  pause, listed only while it is on), ``rx_discards_phy``, ``tx_discards_phy``, ``rx_crc_errors_phy``,
  ``rx_symbol_err_phy``, ``link_down_events_phy``, ``tx_pause_storm_warning_events``,
  ``tx_pause_storm_error_events``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.qos_errors import parse_ethtool_errors
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.qos_tools import parse_ethtool_stats
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs, natural_key
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_fabric import finding

IB_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
               "port_rcv_remote_physical_errors", "port_xmit_discards", "local_link_integrity_errors",
               "excessive_buffer_overrun_errors", "port_xmit_data", "port_rcv_data")
HW_COUNTERS = ("out_of_buffer", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err",
               "np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled")
ETHTOOL_COUNTERS = ("rx_discards_phy", "tx_discards_phy", "rx_crc_errors_phy", "rx_symbol_err_phy",
                    "link_down_events_phy", "tx_pause_storm_warning_events", "tx_pause_storm_error_events",
                    "rx_global_pause", "tx_global_pause")
_PRIO_PAUSE = re.compile(r"^(rx|tx)_prio([0-7])_pause$")
# mlx5: the time a priority was paused, in microseconds (rx: this port was paused; tx: it paused its peer)
_PRIO_PAUSE_DURATION = re.compile(r"^(rx|tx)_prio([0-7])_pause_duration$")

# IB PortCounters widths: these stop at their maximum instead of wrapping (IBA PortCounters attribute).
SATURATION = {"symbol_error": 0xFFFF, "link_error_recovery": 0xFF, "link_downed": 0xFF, "port_rcv_errors": 0xFFFF,
              "port_rcv_remote_physical_errors": 0xFFFF, "port_xmit_discards": 0xFFFF,
              "local_link_integrity_errors": 0xF, "excessive_buffer_overrun_errors": 0xF}


def port_key(device, port):
    return "%s/%s" % (device, port)


def split_port_key(key):
    device, _sep, port = str(key).rpartition("/")
    return device, int(port) if port.isdigit() else None


def select_ethtool(stats):
    """The counters the report needs out of a parsed ``ethtool -S`` ({name: int})."""
    return dict((name, value) for name, value in stats.items()
                if name in ETHTOOL_COUNTERS or _PRIO_PAUSE.match(name) or _PRIO_PAUSE_DURATION.match(name))


def snapshot(runner, sysfs_root="/sys", devices=None, facts=None):
    """Read the counters of every port (or of ``devices``) now.

    ``runner`` has ``which(name)`` and ``run(argv) -> (rc, out, err)`` (tool_runner.ModuleRunner). Returns
    {counters: {port: {name: int}}, sources: {port: {name: where}}, ports: {port: {link_layer, state, netdev}},
    notes: [{port, kind, message}]}; notes say what could not be read (an absent HCA, no ethtool, an ethtool error).
    ``facts``: the sysfs facts read with counters, when the caller has them. Raises rdma_sysfs.SysfsError when
    sysfs_root is not a sysfs tree.
    """
    facts = facts if facts is not None else gather_rdma_sysfs(sysfs_root, gather_counters=True)
    present = facts["devices"]
    notes = []
    names = sorted(present, key=natural_key)
    if devices:
        for name in devices:
            if name not in present:
                notes.append({"port": None, "kind": "absent_device",
                              "message": "%s is not an RDMA device on this host (found: %s)" % (
                                  name, ", ".join(names) or "none")})
        names = [n for n in names if n in devices]
    ethtool = None
    result = {"counters": {}, "sources": {}, "ports": {}, "notes": notes}
    for dev in names:
        for number in sorted(present[dev].get("ports") or {}, key=int):
            port = present[dev]["ports"][number]
            key = port_key(dev, number)
            base = os.path.join(sysfs_root, "class", "infiniband", dev, "ports", str(number))
            counters, sources = {}, {}
            for sub, wanted in (("counters", IB_COUNTERS), ("hw_counters", HW_COUNTERS)):
                for name in wanted:
                    if name in (port.get(sub) or {}):
                        counters[name] = port[sub][name]
                        sources[name] = os.path.join(base, sub, name)
            netdev = port.get("netdev")
            if port.get("link_layer") == "Ethernet" and netdev:
                if ethtool is None:
                    ethtool = runner.which("ethtool") or ""
                read = _ethtool_stats(runner, ethtool, netdev, key, notes)
                for name, value in read.items():
                    counters[name] = value
                    sources[name] = "ethtool -S %s" % netdev
            result["counters"][key] = counters
            result["sources"][key] = sources
            result["ports"][key] = {"link_layer": port.get("link_layer"), "state": port.get("state"),
                                    "netdev": netdev}
    return result


def _ethtool_stats(runner, ethtool, netdev, key, notes):
    if not ethtool:
        notes.append({"port": key, "kind": "no_ethtool",
                      "message": "ethtool is not installed: no PFC pause or discard counters for %s" % netdev})
        return {}
    rc, out, err = runner.run([ethtool, "-S", netdev])
    if rc != 0:
        errors = parse_ethtool_errors(err)
        detail = errors[0]["message"] if errors else (err or out or "").strip().splitlines()[-1:] or ["no output"]
        notes.append({"port": key, "kind": "ethtool_failed",
                      "message": "ethtool -S %s failed (rc %d): %s" % (
                          netdev, rc, detail if isinstance(detail, str) else detail[0])})
        return {}
    return select_ethtool(parse_ethtool_stats(out))


def normalise_before(before, field="before"):
    """A previous snapshot's ``counters`` ({port: {name: int}}), or the whole registered result holding it.
    Raises ValueError naming the field and the bad entry."""
    if isinstance(before, dict) and isinstance(before.get("counters"), dict) and "sources" in before:
        before = before["counters"]
    if not isinstance(before, dict):
        raise ValueError("%s must be the counters of an earlier rdma_counters run ({\"mlx5_0/1\": {name: int}}); got %s"
                         % (field, type(before).__name__))
    for port, counters in before.items():
        if not isinstance(counters, dict):
            raise ValueError("%s.%s must be a dict {counter name: int}; got %s" % (field, port, type(counters).__name__))
        for name, value in counters.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError("%s.%s.%s must be an integer; got %r" % (field, port, name, value))
    return before


def deltas(before, after, notes=None):
    """{port: {name: after - before}} of two snapshots' ``counters``.

    Never negative: a counter that went back was reset (driver reload, port reset, ``perfquery -R``); its delta is
    its value after (what it counted since the reset, a lower bound) and a ``reset`` note says so. A PMA error
    counter at its maximum is ``saturated`` (the delta is a lower bound). A counter in only one snapshot gets
    delta None (``appeared``) or is left out (``disappeared``); a port in only one snapshot is left out
    (``port_missing``). Notes ({port, counter, kind, before, after, message}) are appended to ``notes`` when given.
    """
    notes = notes if notes is not None else []
    out = {}
    before = before or {}
    after = after or {}
    for port in sorted(set(before) | set(after), key=natural_key):
        if port not in before or port not in after:
            notes.append(_note(port, None, "port_missing", None, None, "%s is in the %s snapshot only" % (
                port, "before" if port in before else "after")))
            continue
        b, a = before[port] or {}, after[port] or {}
        port_deltas = {}
        for name in sorted(set(b) | set(a)):
            if name not in a:
                notes.append(_note(port, name, "disappeared", b[name], None,
                                   "%s of %s was not there after the traffic" % (name, port)))
                continue
            if name not in b:
                port_deltas[name] = None
                notes.append(_note(port, name, "appeared", None, a[name],
                                   "%s of %s appeared during the traffic (PFC or pause turned on?): no delta"
                                   % (name, port)))
                continue
            if a[name] < b[name]:
                port_deltas[name] = a[name]
                notes.append(_note(port, name, "reset", b[name], a[name],
                                   "%s of %s went back from %d to %d: it was reset during the traffic; the delta "
                                   "(%d) is a lower bound" % (name, port, b[name], a[name], a[name])))
                continue
            port_deltas[name] = a[name] - b[name]
            if name in SATURATION and a[name] >= SATURATION[name]:
                notes.append(_note(port, name, "saturated", b[name], a[name],
                                   "%s of %s is at its maximum (%d): the delta is a lower bound; clear it with "
                                   "`perfquery -x -R`" % (name, port, SATURATION[name])))
        out[port] = port_deltas
    return out


def _note(port, counter, kind, before, after, message):
    return {"port": port, "counter": counter, "kind": kind, "before": before, "after": after, "message": message}


# ------------------------------------------------------------------------------------------------- findings
_LINK_FIX = ("`mlxlink -d {hca} -p {port} -m -c` (BER, cable, eye); clean, reseat or replace the cable or "
             "transceiver; check the switch side with `iblinkinfo` / the switch's port counters")
# name -> (severity, cause); IB error counters on any port, ethtool PHY counters on Ethernet ports
_ERROR_COUNTERS = (
    ("symbol_error", "error", "bit errors on the link: a marginal cable, transceiver or a dirty connector"),
    ("link_error_recovery", "error", "the link retrained after errors: a marginal cable or transceiver"),
    ("port_rcv_errors", "error", "malformed packets were received: link errors (bit/CRC errors) on this link"),
    ("local_link_integrity_errors", "error", "the link's error rate went over its threshold: a marginal cable"),
    ("rx_crc_errors_phy", "error", "frames with CRC errors were received: a marginal cable, transceiver or a dirty "
                                   "connector"),
    ("rx_symbol_err_phy", "error", "symbol errors on the Ethernet link: a marginal cable or transceiver"),
    ("excessive_buffer_overrun_errors", "warning", "packets arrived with no receive credit (buffer overrun): a "
                                                   "flow-control mismatch with the peer port"),
    ("port_rcv_remote_physical_errors", "warning", "packets marked bad upstream arrived: a link error elsewhere on "
                                                   "the path"),
    ("port_xmit_discards", "warning", "packets were discarded on transmit: the link went down, or congestion "
                                      "timed packets out (head-of-line)"),
)
_LOSS_COUNTERS = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err")
# a link that went down and came back (a flap): the IB PMA counter on any port, the PHY's on Ethernet ports
_FLAP_COUNTERS = (("link_downed", "the link went down and came back: a cable, transceiver or switch port fault"),
                  ("link_down_events_phy", "the Ethernet link went down and came back"))


def _at_most(name, allowed):
    """What a counter may do: ``symbol_error +0``, or ``symbol_error +10 at most`` under a limit."""
    return "%s +%d%s" % (name, allowed.get(name, 0), " at most" if allowed.get(name) else "")


def _health_findings(host, hca, number, values, d, lossless, eth, allowed, seconds):
    """The rules a kept snapshot adds (hpcnet-rdma-health): flaps, the share of time a lossless priority was paused,
    ECN marks without CNPs."""
    out = []
    pause_percent = allowed.get("pause_percent")
    for name, cause in _FLAP_COUNTERS:
        if (eth or not name.endswith("_phy")) and _positive(d.get(name)):
            out.append(finding(host, "error", "counter_link_flap", hca, number, _at_most(name, allowed),
                               "%s +%d" % (name, d[name]), cause, _LINK_FIX.format(**values)))
    if pause_percent is not None and seconds:
        for prio in lossless:
            for direction in ("tx", "rx"):
                micro = d.get("%s_prio%d_pause_duration" % (direction, prio))
                share = 100.0 * micro / (seconds * 1e6) if _positive(micro) else 0.0
                if share > pause_percent:
                    out.append(finding(
                        host, "error", "counter_pfc_storm", hca, number,
                        "priority %d paused <= %g%% of the time" % (prio, pause_percent),
                        "%s_prio%d_pause_duration %.1f%% of %ds" % (direction, prio, share, seconds),
                        ("a PFC storm: this port kept pausing its peer on priority %d (its receive buffer does not "
                         "drain: a stalled consumer, PCIe or NUMA)" if direction == "tx" else
                         "a PFC storm: the fabric kept pausing this port on priority %d (congestion downstream, or a "
                         "peer that does not drain)") % prio,
                        "`ethtool -S {netdev} | grep prio%d_pause`; the switch's PFC watchdog and its port counters; "
                        "for tx, the host's consumer (CPU, PCIe, NUMA)".format(**values) % prio))
                    break
    if eth and _positive(d.get("np_ecn_marked_roce_packets")) and d.get("np_cnp_sent") == 0:
        out.append(finding(
            host, "warning", "counter_ecn", hca, number, "a CNP for every few ECN-marked packets",
            "np_ecn_marked_roce_packets +%d, np_cnp_sent +0" % d["np_ecn_marked_roce_packets"],
            "ECN-marked packets arrived but this port sent no CNP: the notification point is off for the priority, so "
            "the senders never slow down (DCQCN) and the fabric falls back on PFC",
            "enable ECN on the lossless priority (hpcnet.rdma.roce roce_ecn_priorities; "
            "/sys/class/net/{netdev}/ecn/roce_np/enable/<prio> or ROCE_CC_PRIO_MASK in firmware)".format(**values)))
    return out


def _link_layer_of(link_layer, port):
    if isinstance(link_layer, dict):
        return link_layer.get(port)
    return link_layer


def _positive(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def findings(host, port_deltas, lossless_priorities, link_layer, notes=None, netdevs=None, limits=None,
             seconds=None):
    """Findings from counter deltas ({port: {name: delta}}) of one host.

    ``lossless_priorities``: the priorities with PFC the roce profile declares (roce_pfc_priorities); ``link_layer``:
    ``InfiniBand`` / ``Ethernet`` for every port, or {port: link_layer}; ``notes``: the notes of ``deltas`` (a reset
    becomes a warning); ``netdevs``: {port: netdev} for the fix texts; ``limits``: {counter: the delta allowed before
    it is a finding} (default 0 for every counter: verify's traffic runs), plus ``pause_percent`` (the share of
    ``seconds``, the time between the snapshots, that a lossless priority may spend paused; default: not checked).
    Rules:
    - a lossless RoCE port (Ethernet, lossless priorities declared) that drops (rx_discards_phy or out_of_buffer > 0):
      error; the same drops on a RoCE port with no lossless priority: warning;
    - a declared lossless priority with no PFC counter (PFC off on the host for it): error;
    - IB error counters and Ethernet PHY error counters moving: error (symbol_error, link_downed, port_rcv_errors,
      ...), warning for the congestion-like ones (port_xmit_discards, ...);
    - pause frames on a priority that is not declared lossless, or link-level (global) pause: warning;
    - a PFC pause storm (tx_pause_storm_error_events): error (warning events: warning); a lossless priority paused
      for more than ``limits["pause_percent"]`` of ``seconds``: error;
    - a flap (link_downed, link_down_events_phy): error;
    - ECN marks without a CNP sent (np_ecn_marked_roce_packets up, np_cnp_sent not): warning;
    - retransmissions (out_of_sequence, packet_seq_err, local_ack_timeout_err) on a lossless port: warning.
    Zero ECN marks and zero pause on a lossless RoCE port is fine (light traffic without congestion): no finding.
    """
    lossless = sorted(set(int(p) for p in (lossless_priorities or [])))
    allowed = dict(limits or {})
    out = []
    for port in sorted(port_deltas or {}, key=natural_key):
        d = dict((name, value) for name, value in (port_deltas[port] or {}).items()
                 if not _positive(value) or value > allowed.get(name, 0))
        hca, number = split_port_key(port)
        ll = _link_layer_of(link_layer, port)
        nd = (netdevs or {}).get(port) or "the netdev of %s" % port
        values = {"hca": hca, "port": number, "netdev": nd}
        eth = ll == "Ethernet"
        is_lossless = eth and bool(lossless)
        ethtool_read = any(name.endswith("_phy") for name in d)

        def add(severity, check, expected, found, cause, fix, _number=number, _hca=hca):
            out.append(finding(host, severity, check, _hca, _number, expected, found, cause, fix))

        for name in ("rx_discards_phy", "out_of_buffer"):
            if eth and _positive(d.get(name)):
                if name == "rx_discards_phy":
                    cause = ("the NIC dropped received packets for lack of buffer%s: PFC is not taking effect (the "
                             "traffic runs on another priority than the lossless one, PFC is off on the host or the "
                             "switch, or the switch ignores the pause)" % (" on a lossless port" if is_lossless else ""))
                    fix = ("compare `mlnx_qos -i {netdev}` (PFC, trust) with the switch's PFC and DSCP config; make "
                           "the RDMA traffic use the declared ToS (NCCL_IB_TC); re-run hpcnet.rdma.roce").format(**values)
                else:
                    cause = ("the HCA dropped packets because the receive queue had no posted buffer: the consumer "
                             "falls behind (CPU or NUMA placement, too few receive WQEs)")
                    fix = ("bind the job to the NUMA node of {hca}; check the receive queue depth of the transport "
                           "(UCX / NCCL settings)").format(**values)
                if not is_lossless:
                    cause += "; no priority is declared lossless, so RoCE retransmits (go-back-N) and slows down"
                    fix += "; declare the lossless priority (roce_pfc_priorities) or rely on ECN"
                add("error" if is_lossless else "warning", "counter_discards",
                    "0 (lossless priorities %s)" % lossless if is_lossless else "0", "%s +%d" % (name, d[name]),
                    cause, fix)
        if is_lossless and ethtool_read:
            for prio in lossless:
                if "rx_prio%d_pause" % prio not in d and "tx_prio%d_pause" % prio not in d:
                    add("error", "counter_pfc", "PFC on priority %d" % prio, "no rx_prio%d_pause counter" % prio,
                        "PFC is off on priority %d of {netdev} (mlx5 lists the pause counters of PFC priorities "
                        "only): its traffic is not lossless and drops under congestion".format(**values) % prio,
                        "turn PFC on for priority %d (hpcnet.rdma.roce roce_pfc_priorities; `mlnx_qos -i {netdev} "
                        "--pfc ...`)".format(**values) % prio)
        for name, severity, cause in _ERROR_COUNTERS:
            if name.endswith("_phy") and not eth:
                continue
            if _positive(d.get(name)):
                add(severity, "counter_link_errors", _at_most(name, allowed), "%s +%d" % (name, d[name]), cause,
                    _LINK_FIX.format(**values))
        for name in sorted(d):
            m = _PRIO_PAUSE.match(name)
            if m and _positive(d[name]) and int(m.group(2)) not in lossless:
                add("warning", "counter_pause", "no pause on priority %s (lossless: %s)" % (m.group(2), lossless or "none"),
                    "%s +%d" % (name, d[name]),
                    "PFC pause frames on priority %s, which the roce profile does not declare lossless: the host or "
                    "the switch has PFC on another priority set" % m.group(2),
                    "align the PFC priorities of the host (`mlnx_qos -i {netdev}`) and the switch with "
                    "roce_pfc_priorities".format(**values))
        for name in ("rx_global_pause", "tx_global_pause"):
            if _positive(d.get(name)):
                add("warning", "counter_pause", "%s +0 (PFC, not link-level pause)" % name, "%s +%d" % (name, d[name]),
                    "link-level (global) pause frames: global pause stalls every priority of the link, not only "
                    "the lossless one",
                    "turn global pause off (`ethtool -A {netdev} rx off tx off`, hpcnet.rdma.roce roce_global_pause: "
                    "false) and use PFC".format(**values))
        for name, severity in (("tx_pause_storm_error_events", "error"), ("tx_pause_storm_warning_events", "warning")):
            if _positive(d.get(name)):
                add(severity, "counter_pfc_storm", "%s +0" % name, "%s +%d" % (name, d[name]),
                    "a PFC pause storm: the host could not drain its receive buffer and kept pausing the link%s" % (
                        "; the NIC's storm guard stopped sending pause" if severity == "error" else ""),
                    "check the host for a stalled consumer (CPU, PCIe, NUMA); `ethtool -S {netdev} | grep "
                    "pause_storm`; the switch's PFC watchdog".format(**values))
        out.extend(_health_findings(host, hca, number, values, d, lossless if is_lossless else [], eth, allowed,
                                    seconds))
        if is_lossless or ll == "InfiniBand":
            moved = ["%s +%d" % (n, d[n]) for n in _LOSS_COUNTERS if _positive(d.get(n))]
            if moved:
                add("warning", "counter_retransmits", "0 (lossless)", ", ".join(moved),
                    "packets were lost in the fabric and retransmitted on a port that should be lossless",
                    "look for the drops on the path: the discard and pause counters here, the switch's counters; "
                    "`mlxlink -d {hca} -p {port} -c`".format(**values))
    resets = {}
    for note in notes or []:
        if note.get("kind") == "reset" and note.get("port") in (port_deltas or {}):
            resets.setdefault(note["port"], []).append("%s %d -> %d" % (note["counter"], note["before"], note["after"]))
    for port in sorted(resets, key=natural_key):
        hca, number = split_port_key(port)
        out.append(finding(host, "warning", "counter_reset", hca, number, "counters only go up", ", ".join(resets[port]),
                           "the counters of this port went back during the traffic: a driver reload, a port reset "
                           "or `perfquery -R`; its deltas are lower bounds",
                           "re-run the traffic without resetting counters; `dmesg | grep -i mlx5` for a reset"))
    return out
