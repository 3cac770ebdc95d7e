"""THE one place where the simulator invents numbers for traffic: the declared fabric MODEL.

No RDMA traffic flows on a simulated host (there is no verbs device), so the stand-ins that "run" traffic
(perftest's ``ib_*_bw``/``ib_*_lat`` in ``simhost.tools.perftest``; the nccl-tests stand-in appended below) take
their numbers from this module and nowhere else. Everything here is a MODEL, stated with its constants; the
inputs are the simulated host's own state, read by :func:`port_view` exactly where a real host keeps it:

* ``class/infiniband/<hca>/ports/<p>/{link_layer,state,phys_state,rate,lid}``, the GID table and its
  ``gid_attrs/{types,ndevs}``; the port's netdev ``class/net/<if>/mtu`` (RoCE active MTU = ib_core's
  ``iboe_get_mtu()``: netdev MTU - 88 bytes of headers, rounded down to 4096/2048/1024/512/256; IB: 4096);
* the mlx5 DCB state of the netdev (``simhost.qos``: trust, DSCP->priority map, PFC bitmap, default priority);
* MLNX_OFED's global traffic class ``class/infiniband/<hca>/tc/<p>/traffic_class`` (``Global tclass=N``);
* the DCQCN switches ``class/net/<if>/ecn/roce_{np,rp}/enable/<prio>`` (inbox kernels: the firmware's Current
  ``ROCE_CC_PRIO_MASK_P<n>``, simhost.firmware.ecn_boot_values).

Bandwidth (:func:`pair_bandwidth`, sender = ``local``):

* line rate = the lower of the two ports' rates (``rate`` file, ``400 Gb/sec (4X NDR)`` -> 400);
* path MTU = the lower of the two ports' active MTUs (perftest's ``check_mtu`` exchange does the same);
* efficiency at path MTU 4096: ``EFFICIENCY_4096`` = InfiniBand 0.97, RoCE (Ethernet) 0.96; at a smaller path MTU
  it falls with the per-packet overhead ``WIRE_OVERHEAD`` (bytes on the wire per packet: RoCE v2 over IPv4 =
  Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 + preamble/SFD 8 + inter-frame gap 12 = 82;
  InfiniBand = LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26): eff(mtu) = E4096 x [mtu/(mtu+o)] / [4096/(4096+o)].
  RoCE at 1024: 0.907; IB at 1024: 0.951. An MTU mismatch therefore costs what the smaller MTU costs;
* RoCE only: the traffic priority. The sender's ToS = MLNX_OFED's global tclass if set, else the QP's traffic
  class (perftest ``--tclass``, default 0). Each end classifies it with its own trust mode: ``dscp`` -> DSCP =
  ToS >> 2 through its dscp2prio map; ``pcp`` -> the default priority (DCB app selector 1, protocol 0; boot: 0),
  since the traffic is untagged (no VLAN is modelled). RoCE v1 (no IP header) always takes the ``pcp`` path;
* RoCE only: lossless iff PFC is on for the sender's priority at the sender AND for the receiver's priority at
  the receiver. Link-level (global) pause does not count: the fabric switch is assumed to run PFC only, the usual
  RoCE switch configuration. Lossy RoCE runs at ``LOSSY_FRACTION`` = 10% of line rate (the seed article's figure
  for 1% packet loss, ``LOSS_RATE``), whatever the MTU;
* InfiniBand is credit-based: always lossless;
* not usable (0 Gb/s): a port that is not ACTIVE, or two ports of different link layers.

Per message size (:func:`bw_at_size`): bw = min(pair bandwidth, message rate ceiling x size x 8), the ceiling
``MSG_RATE_MPPS`` per QP and verb (write 7.5, read 6.0, send 5.0 Mpps; near the real captures' ~7 Mpps write and
~4.9 Mpps send), times the QP count; BW peak = average x (1 + ``PEAK_OVER_AVG`` 0.001); message rate = bw /
(size x 8). Latency (:func:`latency_at_size`): t_typical = ``BASE_LATENCY_US`` (IB write 1.01, send 1.05, read
1.90; RoCE write 1.40, send 1.45, read 2.60 us) + size x 8 / line rate; t_min = typical - 0.03, t_avg = typical +
0.01, t_stdev 0.05, 99% = typical x 1.03, 99.9% = typical x 1.5, t_max = typical x 4 (``LAT_SHAPE``); on lossy
RoCE ``LOSS_RATE`` of the messages wait ``RETRANSMIT_US`` (8 us, a NAK round trip) more: t_avg += 1% x 8 us,
99% and above += 8 us.

Jitter (:func:`jitter`): every printed number is multiplied by 1 +/- ``JITTER`` (0.2%), a hash of a seed built
from the two host names, devices and the row, so that repeated runs print the same numbers.

Counters (:func:`counter_deltas`, :func:`apply_counters`): traffic moves the counters of both hosts, each in its own
tree. Packets = ceil(size / path MTU) per message; bytes on the port = payload + ``HEADER_BYTES`` per packet
(RoCE 62 = the 82 above without preamble and gap; IB 26). Sender: ``counters/port_xmit_data`` (+= bytes / 4, the
PMA's 4-byte words), ``port_xmit_packets``, ``unicast_xmit_packets``; receiver the ``rcv`` ones. RoCE also the
``ethtool -S`` counters (``simhost.qos.invented_counter`` reads them from ``.simhost/state/counters.json``):
``{tx,rx}_bytes_phy``, ``{tx,rx}_packets_phy``, ``{tx,rx}_prio<p>_{bytes,packets}``,
``{tx,rx}_vport_rdma_unicast_{bytes,packets}``. Per GB (10^9 payload bytes) moved, ``CONGESTION_PER_GB``:
* lossless RoCE: the receiver sends 20 PFC pause frames on its priority (``tx_prio<p>_pause``, 1 us each in
  ``tx_prio<p>_pause_duration``) and the sender receives them (``rx_prio<p>_pause``, ``..._duration``); where ECN is
  enabled for the priority, the receiver marks 100 packets (``hw_counters/np_ecn_marked_roce_packets``) and sends
  one CNP per 2 marked (``np_cnp_sent``), which the sender handles (``rp_cnp_handled``, if its rp is enabled);
* lossy RoCE: ``LOSS_RATE`` (1%) of the packets are dropped at the receiver (``rx_discards_phy``), one in ten of
  those for lack of a receive buffer (``hw_counters/out_of_buffer``), each drop is an out-of-sequence arrival at
  the receiver (``out_of_sequence``) and a NAK at the sender (``packet_seq_err``).
ACKs, read requests and CNP bytes are not counted. A run that fails (transport retry exceeded) adds 1 to the
sender's ``hw_counters/local_ack_timeout_err``. The PMA's narrow PortCounters (``PMA_COUNTER_MAX``:
``symbol_error`` 16 bits, ``link_downed``/``link_error_recovery`` 8 bits, ...) saturate at all ones, as the IB
spec's fields do; the data/packet counters and everything else are 64-bit.

Fault injection (:func:`pfc_storm_deltas` and the functions after it; ``python3 -m simhost counters``,
simhost/faults.py). MODEL, with mlx5's names and units (kernel Documentation/.../mlx5/counters.rst):
* PFC storm of S seconds on priority p at a port of rate R: XOFF frames at ``pause_frames_per_second(R)`` =
  R / (``PFC_PAUSE_QUANTA`` 65535 x ``PFC_QUANTUM_BITS`` 512 bits), i.e. one frame per full pause time (400 Gb/s:
  11921 frames/s; a real NIC refreshes XOFF somewhat earlier), and S x 10^6 us of pause (``_pause_duration`` is in
  microseconds). ``tx`` (default: this host's buffer is full, it sends pause): ``tx_prio<p>_pause`` and
  ``tx_prio<p>_pause_duration``; mlx5's PFC stall prevention at its boot setting (kernel commit 2afa609f5c97: "By
  default the stall prevention timeout is configured to 8 sec"; warning watermark 85% of it, at least 80 ms):
  past 6.8 s ``tx_pause_storm_warning_events`` + 1, past 8 s also ``tx_pause_storm_error_events`` + 1 and the
  device stops sending pause, so frames and duration stop at 8 s (the drops that follow are not modelled:
  inject them with ``drops``). ``rx`` (the peer storms this port): ``rx_prio<p>_pause``, ``_pause_duration`` and
  ``rx_prio<p>_pause_transition`` + 1 (the XOFF -> XON at the end); no storm guard (that is the sender's).
* ECN: ``hw_counters/np_ecn_marked_roce_packets`` + N and ``np_cnp_sent`` + M, M by default N x
  ``CONGESTION_PER_GB["cnp_per_marked"]`` (rounded), the rule traffic uses (RoCE ports only: IB has no such files).
* drops: ``rx_discards_phy`` (ethtool, RoCE) or ``hw_counters/out_of_buffer`` (any port).
* symbol errors: ``counters/symbol_error`` (saturating) on every port; on a RoCE port also ethtool's
  ``rx_symbol_err_phy`` (IEEE 802.3 group) and ``rx_pcs_symbol_err_phy`` (physical layer group), equal in the
  real capture rdma-outputs/ethtool-S-mlx5-02 (386 and 386). mlx5_ib answers a RoCE port's ``counters/`` too
  (mad.c process_pma_cmd: PortCounters from the firmware's PPCNT InfiniBand group, only data/packets from the
  vport); that the firmware counts Ethernet PHY errors there is an assumption (no capture of a RoCE port with errors).
* flap: ``counters/link_downed`` + N (saturating; ``link_error_recovery`` unchanged; on a RoCE port the same
  assumption as for ``symbol_error``), ``class/net/<if>/carrier_changes`` + 2N (carrier lost and back), and on a
  RoCE port ``link_down_events_phy`` + N (physical layer group); state and rate end as they were (a flap, not an
  unplug: ``simhost cable`` pulls a cable).
Every fault needs a port with link (``phys_state`` LinkUp). Values injected on a priority with PFC off are kept in
counters.json; ``ethtool -S`` lists them once PFC is on there (mlx5 lists per-priority PFC counters only then),
``dcb -s pfc show`` (requests/indications, all 8 priorities) shows them at once.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import socket
from pathlib import Path

from . import firmware, qos, statefile, sysfs

# ----------------------------------------------------------------------------------------- the constants
EFFICIENCY_4096 = {"InfiniBand": 0.97, "Ethernet": 0.96}
WIRE_OVERHEAD = {"InfiniBand": 26, "Ethernet": 82}
HEADER_BYTES = {"InfiniBand": 26, "Ethernet": 62}
LOSSY_FRACTION = 0.10
LOSS_RATE = 0.01
MSG_RATE_MPPS = {"write": 7.5, "read": 6.0, "send": 5.0}
PEAK_OVER_AVG = 0.001
BASE_LATENCY_US = {
    ("InfiniBand", "write"): 1.01, ("InfiniBand", "send"): 1.05, ("InfiniBand", "read"): 1.90,
    ("Ethernet", "write"): 1.40, ("Ethernet", "send"): 1.45, ("Ethernet", "read"): 2.60,
}
LAT_SHAPE = {"min_minus": 0.03, "avg_plus": 0.01, "stdev": 0.05, "p99": 1.03, "p999": 1.5, "max": 4.0}
RETRANSMIT_US = 8.0
JITTER = 0.002
CONGESTION_PER_GB = {
    "pause_frames": 20,          # lossless RoCE: PFC pause frames sent by the receiver
    "pause_duration_us": 1,      # per pause frame
    "ecn_marked": 100,           # lossless RoCE with ECN on the priority: packets marked at the receiver
    "cnp_per_marked": 0.5,       # CNPs sent per marked packet
    "out_of_buffer_per_drop": 0.1,
}
# fault injection (``python3 -m simhost counters``, :func:`fault_deltas`): a PFC storm
PFC_PAUSE_QUANTA = 0xFFFF        # pause time one XOFF frame asks for, in quanta (the maximum a PFC frame carries)
PFC_QUANTUM_BITS = 512           # one pause quantum = 512 bit times at the port's rate (IEEE 802.1Qbb / 802.3 31B)
PFC_STALL_CRITICAL_MS = 8000     # mlx5 PFC stall prevention, device_stall_critical_watermark at boot (8 s)
PFC_STALL_MINOR_PERCENT = 85     # MLX5E_PFC_PREVEN_MINOR_PRECENT: the warning watermark, % of the critical one
PFC_STALL_MIN_MS = 80            # MLX5E_PFC_PREVEN_TOUT_MIN_MSEC: the warning watermark's floor
# IB PortCounters field widths (IBA 16.1.3.5): the PMA saturates these at all ones; the others are 64-bit
# (the extended data/packet counters mlx5 reports with IB_PMA_CLASS_CAP_EXT_WIDTH)
PMA_COUNTER_MAX = {
    "counters/symbol_error": 0xFFFF, "counters/link_error_recovery": 0xFF, "counters/link_downed": 0xFF,
    "counters/port_rcv_errors": 0xFFFF, "counters/port_rcv_remote_physical_errors": 0xFFFF,
    "counters/port_rcv_switch_relay_errors": 0xFFFF, "counters/port_xmit_discards": 0xFFFF,
    "counters/port_xmit_constraint_errors": 0xFF, "counters/port_rcv_constraint_errors": 0xFF,
    "counters/local_link_integrity_errors": 0xF, "counters/excessive_buffer_overrun_errors": 0xF,
    "counters/VL15_dropped": 0xFFFF, "counters/port_xmit_wait": 0xFFFFFFFF,
}
COUNTERS_FILE = "counters.json"
IB_MTUS = (4096, 2048, 1024, 512, 256)
# ib_core iboe_get_mtu() as simhost's ibv_devinfo applies it (GRH 40 + BTH 12 + 4 + IPv4/UDP 28 + ICRC 4)
ROCE_MTU_HEADERS = 88
PORT_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}


# ------------------------------------------------------------------------------------------ the port view
def _rate_gbps(text: str | None) -> float:
    match = re.match(r"\s*([\d.]+)\s*Gb/sec", text or "")
    return float(match.group(1)) if match else 0.0


def iboe_mtu(netdev_mtu: int) -> int:
    """ib_core ``iboe_get_mtu()``: the largest IB MTU that fits in the netdev MTU less the RoCE headers."""
    room = netdev_mtu - ROCE_MTU_HEADERS
    for mtu in IB_MTUS:
        if room >= mtu:
            return mtu
    return 0


def _gid_bytes(gid: str) -> bytes:
    return bytes.fromhex(gid.replace(":", "")) if gid else bytes(16)


def gid_is_zero(gid: str) -> bool:
    return not any(_gid_bytes(gid))


def gid_is_v4mapped(gid: str) -> bool:
    """perftest's ``ipv6_addr_v4mapped()``: ``::ffff:a.b.c.d`` (or the IPv4 multicast ``ff0e::ffff:...``)."""
    raw = _gid_bytes(gid)
    return raw[:12] == bytes(10) + b"\xff\xff" or raw[:12] == b"\xff\x0e" + bytes(8) + b"\xff\xff"


def _ecn_enabled(root: Path, netdev: str | None, side: str) -> list:
    """Priorities with DCQCN enabled at the notification (np) or reaction (rp) point."""
    if not netdev:
        return []
    edir = sysfs.netdev_dir(netdev, root) / "ecn" / ("roce_%s" % side) / "enable"
    if edir.is_dir():
        return [p for p in range(8) if (sysfs.read(edir / str(p)) or "0").strip() == "1"]
    try:
        files = firmware.ecn_boot_values(root).get(netdev) or {}
    except Exception:  # pylint: disable=broad-except
        files = {}
    if not files:
        return list(range(8))
    return [p for p in range(8) if files.get("roce_%s/enable/%d" % (side, p))]


def _global_tclass(root: Path, hca: str, port: int) -> int | None:
    text = sysfs.read(sysfs.ib_dir(hca, root) / "tc" / str(port) / "traffic_class") or ""
    match = re.search(r"Global tclass=(\d+)", text)
    return int(match.group(1)) if match else None


def port_view(sysfs_root, hca: str, port: int) -> dict:
    """What the simulated host's own state says about one port: every input of the model, nothing invented.

    Keys: host, hca, port, exists, link_layer, state, state_num, phys_state, rate, rate_gbps, lid, sm_lid,
    active_mtu, netdev, netdev_mtu, gid_tbl_len, gids [{index, gid, type, ndev}] (non-empty entries only),
    node_guid, and for RoCE ports: trust, dscp2prio (64), default_prio, pfc_enabled [priorities], global_tclass
    (None or 0..255), ecn_np_enabled, ecn_rp_enabled [priorities]."""
    root = Path(sysfs_root)
    view = {"host": socket.gethostname(), "hca": hca, "port": int(port), "exists": False}
    pdir = sysfs.port_dir(hca, int(port), root)
    if not sysfs.ib_dir(hca, root).is_dir() or not pdir.is_dir():
        return view
    link_layer = sysfs.read(pdir / "link_layer") or "InfiniBand"
    state_num = sysfs.num_value(sysfs.read(pdir / "state"))
    phys = sysfs.read(pdir / "phys_state") or ""
    gids = [{"index": i, "gid": gid, "type": gtype, "ndev": ndev}
            for i, gid, gtype, ndev in sysfs.gid_table(hca, int(port), root) if gid and not gid_is_zero(gid)]
    netdev = sysfs.port_netdev(hca, int(port), root)
    netdev_mtu = None
    if netdev:
        text = sysfs.read(sysfs.netdev_dir(netdev, root) / "mtu")
        netdev_mtu = int(text) if text and text.strip().isdigit() else None
    if link_layer == "Ethernet":
        active_mtu = iboe_mtu(netdev_mtu or 1500)
    else:
        active_mtu = 4096
    view.update({
        "exists": True,
        "link_layer": link_layer,
        "state_num": state_num,
        "state": PORT_STATES.get(state_num, "NOP"),
        "phys_state": phys.split(":", 1)[-1].strip(),
        "rate": sysfs.read(pdir / "rate") or "",
        "rate_gbps": _rate_gbps(sysfs.read(pdir / "rate")),
        "lid": sysfs.num_value(sysfs.read(pdir / "lid")),
        "sm_lid": sysfs.num_value(sysfs.read(pdir / "sm_lid")),
        "active_mtu": active_mtu,
        "netdev": netdev,
        "netdev_mtu": netdev_mtu,
        "gid_tbl_len": len(sysfs.ls(pdir / "gids")),
        "gids": gids,
        "node_guid": sysfs.read(sysfs.ib_dir(hca, root) / "node_guid") or "",
    })
    if link_layer == "Ethernet":
        st = qos.load(netdev, root) if netdev else qos.default_port_state()
        default_prio = 0
        for sel, prio, proto in st.get("apps", []):
            if sel == qos.SEL_ETHERTYPE and proto == 0:
                default_prio = prio
                break
        view.update({
            "trust": st["trust"],
            "dscp2prio": list(st["dscp2prio"]),
            "default_prio": default_prio,
            "pfc_enabled": [p for p in range(8) if st["pfc_en"] >> p & 1],
            "global_tclass": _global_tclass(root, hca, int(port)),
            "ecn_np_enabled": _ecn_enabled(root, netdev, "np"),
            "ecn_rp_enabled": _ecn_enabled(root, netdev, "rp"),
        })
    return view


def gid_entry(view: dict, index: int) -> dict | None:
    """The GID table entry ``index`` of a view (None: empty or beyond the table)."""
    for entry in view.get("gids", []):
        if entry["index"] == index:
            return entry
    return None


def default_gid_index(view: dict, ipv6: bool = False) -> int:
    """perftest's ``get_best_gid_index()`` on RoCE: an IPv4-mapped GID beats any other (IPv6 with ``--ipv6``),
    then RoCE v2 beats v1; the first best index wins. Empty entries are skipped. 0 when the table is empty."""
    best_key, best_index = None, 0
    for entry in view.get("gids", []):
        key = (gid_is_v4mapped(entry["gid"]) != ipv6, entry.get("type") == "RoCE v2")
        if best_key is None or key > best_key:
            best_key, best_index = key, entry["index"]
    return best_index


# ------------------------------------------------------------------------------------ traffic priority
def traffic_priority(view: dict, tos: int, roce_v1: bool = False) -> tuple:
    """(priority, explanation) of RoCE traffic with ToS ``tos`` as the port of ``view`` classifies it."""
    if view.get("trust") == "dscp" and not roce_v1:
        dscp = tos >> 2
        prio = view["dscp2prio"][dscp]
        return prio, "trust dscp: DSCP %d -> priority %d" % (dscp, prio)
    prio = view.get("default_prio", 0)
    why = "RoCE v1 has no IP header" if roce_v1 else "trust pcp"
    return prio, "%s: untagged -> priority %d" % (why, prio)


def path_mtu(local_view: dict, remote_view: dict, user_mtu: int | None = None) -> int:
    mine = local_view.get("active_mtu") or 4096
    if user_mtu and user_mtu in IB_MTUS and user_mtu < mine:
        mine = user_mtu
    theirs = remote_view.get("active_mtu") or 4096
    return min(mine, theirs)


def mtu_efficiency(link_layer: str, mtu: int) -> float:
    o = WIRE_OVERHEAD.get(link_layer, 82)
    e4096 = EFFICIENCY_4096.get(link_layer, 0.96)
    return e4096 * (mtu / (mtu + o)) / (4096 / (4096 + o))


def _usable(view: dict) -> bool:
    return bool(view.get("exists")) and view.get("state") == "ACTIVE"


def pair_bandwidth(local_view: dict, remote_view: dict, tclass: int = 0, mtu: int | None = None,
                   roce_v1: bool = False) -> dict:
    """The model's bandwidth of traffic from the port of ``local_view`` (sender) to ``remote_view`` (receiver).

    Returns {gbps, line_rate_gbps, efficiency, lossless, priority (sender's), remote_priority, tos, path_mtu,
    link_layer, usable, ecn (receiver marks: np enabled), ecn_rp (sender reacts), reasons [str]}. ``mtu`` is a
    path MTU already agreed (else computed)."""
    reasons = []
    out = {"gbps": 0.0, "line_rate_gbps": 0.0, "efficiency": 0.0, "lossless": False, "priority": None,
           "remote_priority": None, "tos": None, "path_mtu": 0, "link_layer": local_view.get("link_layer"),
           "usable": False, "ecn": False, "ecn_rp": False, "reasons": reasons}
    for name, view in (("local", local_view), ("remote", remote_view)):
        if not _usable(view):
            reasons.append("%s port %s/%s on %s is not ACTIVE (%s)" % (
                name, view.get("hca"), view.get("port"), view.get("host"), view.get("state", "missing")))
    if local_view.get("link_layer") != remote_view.get("link_layer"):
        reasons.append("link layers differ: %s and %s" % (local_view.get("link_layer"), remote_view.get("link_layer")))
    if reasons:
        return out
    link_layer = local_view["link_layer"]
    line = min(local_view["rate_gbps"], remote_view["rate_gbps"])
    pmtu = mtu or path_mtu(local_view, remote_view)
    eff = mtu_efficiency(link_layer, pmtu)
    out.update({"line_rate_gbps": line, "path_mtu": pmtu, "usable": True})
    reasons.append("line rate %g Gb/s = min(%g, %g)" % (line, local_view["rate_gbps"], remote_view["rate_gbps"]))
    reasons.append("path MTU %d (active MTU %d and %d)" % (
        pmtu, local_view.get("active_mtu"), remote_view.get("active_mtu")))
    if link_layer != "Ethernet":
        out.update({"lossless": True, "efficiency": eff, "gbps": line * eff})
        reasons.append("InfiniBand: credit-based, lossless; efficiency %.3f" % eff)
        return out
    tos = local_view.get("global_tclass")
    if tos is None:
        tos = int(tclass or 0)
        reasons.append("ToS %d (traffic class of the QP)" % tos)
    else:
        reasons.append("ToS %d (global tclass of %s, overrides the QP's)" % (tos, local_view.get("hca")))
    prio, why = traffic_priority(local_view, tos, roce_v1)
    rprio, rwhy = traffic_priority(remote_view, tos, roce_v1)
    reasons.append("sender %s" % why)
    reasons.append("receiver %s" % rwhy)
    lossless = prio in local_view.get("pfc_enabled", []) and rprio in remote_view.get("pfc_enabled", [])
    out.update({"priority": prio, "remote_priority": rprio, "tos": tos, "lossless": lossless})
    if lossless:
        out.update({"efficiency": eff, "gbps": line * eff,
                    "ecn": rprio in remote_view.get("ecn_np_enabled", []),
                    "ecn_rp": prio in local_view.get("ecn_rp_enabled", [])})
        reasons.append("PFC on priority %d at both ends: lossless; efficiency %.3f" % (prio, eff))
    else:
        where = []
        if prio not in local_view.get("pfc_enabled", []):
            where.append("priority %d at %s (%s)" % (prio, local_view.get("netdev"), local_view.get("host")))
        if rprio not in remote_view.get("pfc_enabled", []):
            where.append("priority %d at %s (%s)" % (rprio, remote_view.get("netdev"), remote_view.get("host")))
        out.update({"efficiency": LOSSY_FRACTION, "gbps": line * LOSSY_FRACTION})
        reasons.append("no PFC on %s: lossy RoCE, %g%% loss -> %g%% of line rate" % (
            " and ".join(where), LOSS_RATE * 100, LOSSY_FRACTION * 100))
    return out


# -------------------------------------------------------------------------------------- rows of numbers
def jitter(seed: str, key) -> float:
    """Deterministic factor in [1 - JITTER, 1 + JITTER] for ``key`` under ``seed`` (the host names)."""
    digest = hashlib.sha256(("%s|%s" % (seed, key)).encode()).digest()
    unit = int.from_bytes(digest[:8], "big") / float(1 << 64)
    return 1.0 + JITTER * (2.0 * unit - 1.0)


def bw_at_size(pair: dict, size: int, verb: str = "write", qps: int = 1, seed: str = "") -> dict:
    """{bw_avg_gbps, bw_peak_gbps, msg_rate_mpps} of one perftest row (size in bytes)."""
    ceiling = MSG_RATE_MPPS.get(verb, 7.5) * max(1, qps) * 1e6 * size * 8 / 1e9
    avg = min(pair["gbps"], ceiling) * jitter(seed, ("bw", size))
    peak = avg * (1 + PEAK_OVER_AVG) * jitter(seed, ("peak", size)) ** 0.25
    peak = max(peak, avg)
    return {"bw_avg_gbps": avg, "bw_peak_gbps": peak, "msg_rate_mpps": avg * 1e9 / (size * 8) / 1e6}


def latency_at_size(pair: dict, size: int, verb: str = "write", seed: str = "") -> dict:
    """{t_min, t_max, t_typical, t_avg, t_stdev, p99, p999} in microseconds of one latency row."""
    base = BASE_LATENCY_US.get((pair.get("link_layer") or "Ethernet", verb), 1.40)
    line = pair.get("line_rate_gbps") or 1.0
    typical = (base + size * 8 / (line * 1000.0)) * jitter(seed, ("lat", size))
    shape = LAT_SHAPE
    row = {"t_min": typical - shape["min_minus"], "t_typical": typical, "t_avg": typical + shape["avg_plus"],
           "t_stdev": shape["stdev"] * jitter(seed, ("sd", size)), "p99": typical * shape["p99"],
           "p999": typical * shape["p999"], "t_max": typical * shape["max"] * jitter(seed, ("max", size))}
    if pair.get("link_layer") == "Ethernet" and not pair.get("lossless"):
        row["t_avg"] += LOSS_RATE * RETRANSMIT_US
        for key in ("p99", "p999", "t_max"):
            row[key] += RETRANSMIT_US
    return row


# -------------------------------------------------------------------------------------------- counters
def counter_deltas(pair: dict, messages: list) -> dict:
    """What a run moves: ``messages`` = [(size, count), ...] sent from sender to receiver over ``pair``.

    Returns {"sender": {"sysfs": {rel path: n}, "ethtool": {name: n}}, "receiver": {...}} (only non-zero)."""
    ll = pair.get("link_layer") or "Ethernet"
    mtu = pair.get("path_mtu") or 4096
    payload = sum(size * count for size, count in messages)
    packets = sum(int(math.ceil(size / float(mtu))) * count for size, count in messages)
    wire = payload + packets * HEADER_BYTES.get(ll, 62)
    snd = {"sysfs": {}, "ethtool": {}}
    rcv = {"sysfs": {}, "ethtool": {}}
    if not payload:
        return {"sender": snd, "receiver": rcv}
    snd["sysfs"].update({"counters/port_xmit_data": wire // 4, "counters/port_xmit_packets": packets,
                         "counters/unicast_xmit_packets": packets})
    rcv["sysfs"].update({"counters/port_rcv_data": wire // 4, "counters/port_rcv_packets": packets,
                         "counters/unicast_rcv_packets": packets})
    if ll != "Ethernet":
        return {"sender": snd, "receiver": rcv}
    gbytes = payload / 1e9
    sprio, rprio = pair.get("priority") or 0, pair.get("remote_priority") or 0
    snd["ethtool"].update({"tx_bytes_phy": wire, "tx_packets_phy": packets, "tx_prio%d_bytes" % sprio: wire,
                           "tx_prio%d_packets" % sprio: packets, "tx_vport_rdma_unicast_bytes": wire,
                           "tx_vport_rdma_unicast_packets": packets})
    dropped = 0 if pair.get("lossless") else int(round(packets * LOSS_RATE))
    got = packets - dropped
    rwire = wire - dropped * (wire // max(packets, 1))
    rcv["ethtool"].update({"rx_bytes_phy": rwire, "rx_packets_phy": got, "rx_prio%d_bytes" % rprio: rwire,
                           "rx_prio%d_packets" % rprio: got, "rx_vport_rdma_unicast_bytes": rwire,
                           "rx_vport_rdma_unicast_packets": got})
    cong = CONGESTION_PER_GB
    if pair.get("lossless"):
        pauses = int(round(cong["pause_frames"] * gbytes))
        if pauses:
            rcv["ethtool"]["tx_prio%d_pause" % rprio] = pauses
            rcv["ethtool"]["tx_prio%d_pause_duration" % rprio] = pauses * cong["pause_duration_us"]
            snd["ethtool"]["rx_prio%d_pause" % sprio] = pauses
            snd["ethtool"]["rx_prio%d_pause_duration" % sprio] = pauses * cong["pause_duration_us"]
        if pair.get("ecn"):
            marked = int(round(cong["ecn_marked"] * gbytes))
            cnps = int(round(marked * cong["cnp_per_marked"]))
            rcv["sysfs"]["hw_counters/np_ecn_marked_roce_packets"] = marked
            rcv["sysfs"]["hw_counters/np_cnp_sent"] = cnps
            if pair.get("ecn_rp"):
                snd["sysfs"]["hw_counters/rp_cnp_handled"] = cnps
    elif dropped:
        rcv["ethtool"]["rx_discards_phy"] = dropped
        rcv["sysfs"]["hw_counters/out_of_buffer"] = int(round(dropped * cong["out_of_buffer_per_drop"]))
        rcv["sysfs"]["hw_counters/out_of_sequence"] = dropped
        snd["sysfs"]["hw_counters/packet_seq_err"] = dropped
    for side in (snd, rcv):
        for kind in ("sysfs", "ethtool"):
            side[kind] = {k: v for k, v in side[kind].items() if v}
    return {"sender": snd, "receiver": rcv}


def apply_counters(sysfs_root, view: dict, deltas: dict) -> dict:
    """Add ``deltas`` ({"sysfs": {rel: n}, "ethtool": {name: n}, "netdev": {file: n}}) to the host of ``view``:
    the port's ``counters/``/``hw_counters/`` files (only those that exist, as the kernel has them; the IB
    PortCounters of ``PMA_COUNTER_MAX`` saturate there, as the PMA's 16-/8-bit fields do), the netdev's own files
    (``class/net/<if>/carrier_changes``) and, for its netdev, ``.simhost/state/counters.json`` (what ``ethtool -S``
    shows through ``simhost.qos.invented_counter``). Returns the new values, in the same shape."""
    root = Path(sysfs_root)
    out: dict = {"sysfs": {}, "ethtool": {}, "netdev": {}}
    netdev = view.get("netdev")
    for kind, base in (("sysfs", sysfs.port_dir(view["hca"], view["port"], root)),
                       ("netdev", sysfs.netdev_dir(netdev, root) if netdev else None)):
        for rel, n in sorted((deltas.get(kind) or {}).items()):
            text = sysfs.read(base / rel) if base is not None else None
            if text is None:
                continue
            try:
                value = int(text.strip() or "0")
            except ValueError:
                value = 0
            new = value + n
            cap = PMA_COUNTER_MAX.get(rel) if kind == "sysfs" else None
            if cap is not None and new > cap:
                new = max(cap, value)
            statefile.write_text(base / rel, "%d\n" % new)
            out[kind][rel] = new
    moved = deltas.get("ethtool") or {}
    if moved and netdev:
        path = sysfs.state_dir(root) / COUNTERS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        text = sysfs.read(path)
        data = json.loads(text) if text else {}
        mine = data.setdefault(netdev, {})
        for name, n in moved.items():
            mine[name] = int(mine.get(name, 0)) + n
            out["ethtool"][name] = mine[name]
        statefile.write_json(path, data, indent=1, sort_keys=True)
    return out


# ============================================================================== fault injection
# ``python3 -m simhost counters ACTION ...`` (simhost/faults.py checks the input, this part says what moves).
# MODEL (see the module docstring, "Fault injection"); every function returns deltas for apply_counters().
def pause_frames_per_second(rate_gbps: float) -> float:
    """PFC XOFF frames a port in a pause storm sends per second: one per pause time of ``PFC_PAUSE_QUANTA``
    quanta of ``PFC_QUANTUM_BITS`` bit times at the port's rate (400 Gb/s: one per 83.9 us, 11921/s)."""
    return rate_gbps * 1e9 / float(PFC_PAUSE_QUANTA * PFC_QUANTUM_BITS)


def pfc_stall_watermarks_ms() -> tuple:
    """(warning, critical) of mlx5's PFC stall prevention at its boot setting: (6800, 8000) ms."""
    minor = max(PFC_STALL_MIN_MS, PFC_STALL_CRITICAL_MS * PFC_STALL_MINOR_PERCENT // 100)
    return minor, PFC_STALL_CRITICAL_MS


def pfc_storm_deltas(rate_gbps: float, priority: int, seconds: float, direction: str = "tx") -> dict:
    """A pause storm of ``seconds`` on ``priority``. ``tx``: this port's receive buffer is full, it sends XOFF
    without pause; past the warning watermark ``tx_pause_storm_warning_events`` + 1, past the critical one
    ``tx_pause_storm_error_events`` + 1 and the device stops sending pause (the storm's frames and duration end
    there). ``rx``: the peer storms this port: frames and duration received, and the one XOFF -> XON transition
    at the storm's end (``rx_prio<p>_pause_transition``)."""
    paused_s = float(seconds)
    events = {}
    if direction == "tx":
        minor_ms, critical_ms = pfc_stall_watermarks_ms()
        if paused_s * 1000.0 > minor_ms:
            events["tx_pause_storm_warning_events"] = 1
        if paused_s * 1000.0 > critical_ms:
            events["tx_pause_storm_error_events"] = 1
            paused_s = critical_ms / 1000.0
    frames = int(round(pause_frames_per_second(rate_gbps) * paused_s))
    ethtool = {"%s_prio%d_pause" % (direction, priority): frames,
               "%s_prio%d_pause_duration" % (direction, priority): int(round(paused_s * 1e6))}
    if direction == "rx":
        ethtool["rx_prio%d_pause_transition" % priority] = 1
    ethtool.update(events)
    return {"sysfs": {}, "ethtool": {k: v for k, v in ethtool.items() if v}, "netdev": {}}


def ecn_deltas(marked: int, cnp: int | None = None) -> dict:
    """ECN-marked RoCE packets seen by this port's notification point and the CNPs it sent for them (default:
    ``CONGESTION_PER_GB["cnp_per_marked"]`` per marked packet, as traffic moves them; 0 = marks without CNPs)."""
    if cnp is None:
        cnp = int(round(marked * CONGESTION_PER_GB["cnp_per_marked"]))
    sysfs_ = {"hw_counters/np_ecn_marked_roce_packets": marked, "hw_counters/np_cnp_sent": cnp}
    return {"sysfs": {k: v for k, v in sysfs_.items() if v}, "ethtool": {}, "netdev": {}}


def drop_deltas(count: int, counter: str = "rx_discards_phy") -> dict:
    """Receive drops: ``rx_discards_phy`` (ethtool, no port receive buffer) or ``out_of_buffer`` (hw_counters,
    no receive WQE posted)."""
    if counter == "out_of_buffer":
        return {"sysfs": {"hw_counters/out_of_buffer": count} if count else {}, "ethtool": {}, "netdev": {}}
    return {"sysfs": {}, "ethtool": {counter: count} if count else {}, "netdev": {}}


def symbol_error_deltas(link_layer: str, count: int) -> dict:
    """Symbol errors on the port's PHY: the PMA's ``counters/symbol_error`` (saturates at 0xFFFF) on every port,
    and on an Ethernet port the PHY counters ethtool shows, ``rx_symbol_err_phy`` and ``rx_pcs_symbol_err_phy``."""
    if not count:
        return {"sysfs": {}, "ethtool": {}, "netdev": {}}
    ethtool = {"rx_symbol_err_phy": count, "rx_pcs_symbol_err_phy": count} if link_layer == "Ethernet" else {}
    return {"sysfs": {"counters/symbol_error": count}, "ethtool": ethtool, "netdev": {}}


def flap_deltas(link_layer: str, times: int) -> dict:
    """``times`` link flaps (down, then up again: the port ends in the state it had): ``counters/link_downed``
    (saturates at 0xFF; ``link_error_recovery`` stays: the link went down, it did not recover), the netdev's
    ``carrier_changes`` (+2 each: carrier lost and back) and on an Ethernet port ``link_down_events_phy``."""
    if not times:
        return {"sysfs": {}, "ethtool": {}, "netdev": {}}
    ethtool = {"link_down_events_phy": times} if link_layer == "Ethernet" else {}
    return {"sysfs": {"counters/link_downed": times}, "ethtool": ethtool, "netdev": {"carrier_changes": 2 * times}}


# ==================================================================================== nccl-tests
# The numbers of the nccl-tests stand-in (simhost/tools/nccl_tests.py: all_reduce_perf, all_gather_perf,
# alltoall_perf). MODEL, not measurement:
#
# * a rank's network path to the next rank of the ring: for each NCCL channel, the pair_bandwidth() of the NIC the
#   channel uses at each end (channel c -> NIC c mod n at either end; NCCL_IB_TC as the QP's traffic class), divided
#   by the number of channels sharing the busier of the two NICs, summed over the channels, in GB/s (/8), times
#   NCCL_EFFICIENCY: "gdr" when both ends have GPUDirect RDMA, "host" when the data is staged through host memory;
#   the NICs of a host are shared by its ranks whose next rank is on another host;
# * NCCL's socket transport: NCCL_SOCKET_GBYTES per host (the management network, TCP); two ranks of one host:
#   NCCL_INTRA_NODE_GBYTES (shared memory over PCIe Gen4 x16, NCCL's own "PCI[24.0]");
# * the job's large-message bus bandwidth (busbw) = the lowest of the ranks' paths (the ring runs at its slowest
#   link);
# * per size: time = ring steps (2(n-1) for all_reduce, n-1 for all_gather/alltoall) x NCCL_STEP_LATENCY_US of the
#   slowest kind of link + size / peak algbw, with algbw = busbw / nccl-tests' factor (2(n-1)/n for all_reduce,
#   (n-1)/n for all_gather and alltoall); algbw = size / time, busbw = algbw x factor, as nccl-tests computes them;
#   each time is multiplied by jitter() (+/- 0.2%, seeded by the hosts, the size and in/out-of-place).
NCCL_EFFICIENCY = {"gdr": 0.92, "host": 0.70}
NCCL_SOCKET_GBYTES = 1.2
NCCL_INTRA_NODE_GBYTES = 24.0
NCCL_STEP_LATENCY_US = {"InfiniBand": 5.0, "Ethernet": 6.0, "Socket": 30.0, "intra": 3.0}


def nccl_bus_factor(reduce: bool, nranks: int) -> float:
    """nccl-tests' busbw / algbw: 2(n-1)/n for all_reduce (``reduce``), (n-1)/n for all_gather and alltoall."""
    if nranks < 1:
        return 0.0
    return (2.0 if reduce else 1.0) * (nranks - 1) / nranks


def nccl_path_gbytes(local_views: list, remote_views: list, nchannels: int, tclass: int = 0, gdr: bool = True) -> float:
    """GB/s of one rank's network path to its ring peer over ``nchannels`` channels (see the section's notes)."""
    if not local_views or not remote_views:
        return 0.0
    gbps = 0.0
    for c in range(nchannels):
        li, ri = c % len(local_views), c % len(remote_views)
        share = max(sum(1 for x in range(nchannels) if x % len(local_views) == li),
                    sum(1 for x in range(nchannels) if x % len(remote_views) == ri))
        gbps += pair_bandwidth(local_views[li], remote_views[ri], tclass)["gbps"] / share
    return gbps / 8.0 * NCCL_EFFICIENCY["gdr" if gdr else "host"]


def nccl_row(reduce: bool, size: int, nranks: int, busbw_peak: float, step_latency_us: float,
             seed: str = "", key=None) -> tuple:
    """(time in us, algbw GB/s, busbw GB/s) of one nccl-tests row of ``size`` bytes."""
    factor = nccl_bus_factor(reduce, nranks)
    steps = max(1, (2 if reduce else 1) * (nranks - 1))
    peak = max(busbw_peak, 1e-6)
    alg_peak = peak / factor if factor > 0 else peak
    time_us = (steps * step_latency_us + size / (alg_peak * 1e3)) * jitter(seed, ("nccl", size, key))
    algbw = size / time_us / 1e3
    return time_us, algbw, algbw * factor
