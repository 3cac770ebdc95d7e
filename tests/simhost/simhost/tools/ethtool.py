"""Fake ``ethtool`` (netlink ethtool 6.x) for the simulated mlx5 RoCE netdevs: ``-a``/``--show-pause``
(``-I``/``--include-statistics``), ``-A``/``--pause`` and ``-S``/``--statistics``. Anything else, and any netdev
the simulator does not own, goes to the real ethtool (/usr/sbin/ethtool or /sbin/ethtool) when it is installed;
without one the call fails as on a host without the binary (``ethtool: command not found``, status 127).

Pause state is simhost.qos's (global pause on at boot; autoneg off). The -S counter list is mlx5's layout
(names of tests/fixtures/real/rdma-outputs/ethtool-S-mlx5-02.txt, a ConnectX-6 Dx on a recent kernel, the per-
priority groups for all 8 priorities): per-priority traffic counters always, the five PFC counters
``{rx,tx}_prioN_pause``, ``..._pause_duration``, ``rx_prioN_pause_transition`` only for priorities with PFC on,
the same five with ``global`` only while link-level pause is on (mlx5e_grp_per_prio_pfc_fill_strings). Every
value is simhost.qos.invented_counter() (0 unless traffic or ``simhost counters`` moved it); a value kept for a
PFC counter of a priority with PFC off is not listed until PFC is turned on there, as the list follows the PFC
state. Messages and exit codes are those of real ethtool 6.1 runs (tests/fixtures/real/qos-firmware/ethtool-*-error-*.txt).
"""

from __future__ import annotations

import os
import sys

from .. import kernelfs, qos

REAL_ETHTOOL = ("/usr/sbin/ethtool", "/sbin/ethtool")

HEAD = (
    "rx_packets rx_bytes tx_packets tx_bytes tx_tso_packets tx_tso_bytes tx_tso_inner_packets "
    "tx_tso_inner_bytes tx_added_vlan_packets tx_nop tx_mpwqe_blks tx_mpwqe_pkts rx_lro_packets rx_lro_bytes "
    "rx_ecn_mark rx_removed_vlan_packets rx_csum_unnecessary rx_csum_none rx_csum_complete "
    "rx_csum_complete_tail rx_csum_complete_tail_slow rx_csum_unnecessary_inner rx_xdp_drop rx_xdp_redirect "
    "rx_xdp_tx_xmit rx_xdp_tx_mpwqe rx_xdp_tx_inlnw rx_xdp_tx_nops rx_xdp_tx_full rx_xdp_tx_err rx_xdp_tx_cqe "
    "tx_csum_none tx_csum_partial tx_csum_partial_inner tx_queue_stopped tx_queue_dropped tx_xmit_more "
    "tx_recover tx_cqes tx_queue_wake tx_cqe_err tx_xdp_xmit tx_xdp_mpwqe tx_xdp_inlnw tx_xdp_nops "
    "tx_xdp_full tx_xdp_err tx_xdp_cqes tx_cqe_compress_blks tx_cqe_compress_pkts rx_wqe_err "
    "rx_mpwqe_filler_cqes rx_mpwqe_filler_strides rx_oversize_pkts_sw_drop rx_buff_alloc_err "
    "rx_cqe_compress_blks rx_cqe_compress_pkts rx_cache_reuse rx_cache_full rx_cache_empty rx_cache_busy "
    "rx_cache_ext rx_cache_rdc rx_cache_alloc rx_cache_waive rx_congst_umr rx_arfs_err rx_recover "
    "rx_pet_hdr_lookup_drop rx_pet_mdata_lookup_drop ch_events ch_poll ch_arm ch_aff_change ch_force_irq "
    "ch_eq_rearm rx_xsk_packets rx_xsk_bytes rx_xsk_csum_complete rx_xsk_csum_unnecessary "
    "rx_xsk_csum_unnecessary_inner rx_xsk_csum_none rx_xsk_ecn_mark rx_xsk_removed_vlan_packets "
    "rx_xsk_xdp_drop rx_xsk_xdp_redirect rx_xsk_wqe_err rx_xsk_mpwqe_filler_cqes rx_xsk_mpwqe_filler_strides "
    "rx_xsk_oversize_pkts_sw_drop rx_xsk_buff_alloc_err rx_xsk_cqe_compress_blks rx_xsk_cqe_compress_pkts "
    "rx_xsk_congst_umr rx_xsk_arfs_err tx_xsk_xmit tx_xsk_mpwqe tx_xsk_inlnw tx_xsk_full tx_xsk_err "
    "tx_xsk_cqes rx_out_of_buffer rx_if_down_packets rx_steer_missed_packets dev_internal_queue_oob "
    "rx_vport_unicast_packets rx_vport_unicast_bytes tx_vport_unicast_packets tx_vport_unicast_bytes "
    "rx_vport_multicast_packets rx_vport_multicast_bytes tx_vport_multicast_packets tx_vport_multicast_bytes "
    "rx_vport_broadcast_packets rx_vport_broadcast_bytes tx_vport_broadcast_packets tx_vport_broadcast_bytes "
    "rx_vport_rdma_unicast_packets rx_vport_rdma_unicast_bytes tx_vport_rdma_unicast_packets "
    "tx_vport_rdma_unicast_bytes rx_vport_rdma_multicast_packets rx_vport_rdma_multicast_bytes "
    "tx_vport_rdma_multicast_packets tx_vport_rdma_multicast_bytes tx_packets_phy rx_packets_phy "
    "rx_crc_errors_phy tx_bytes_phy rx_bytes_phy tx_multicast_phy tx_broadcast_phy rx_multicast_phy "
    "rx_broadcast_phy rx_in_range_len_errors_phy rx_out_of_range_len_phy rx_oversize_pkts_phy "
    "rx_symbol_err_phy tx_mac_control_phy rx_mac_control_phy rx_unsupported_op_phy rx_pause_ctrl_phy "
    "tx_pause_ctrl_phy rx_discards_phy tx_discards_phy tx_errors_phy rx_undersize_pkts_phy rx_fragments_phy "
    "rx_jabbers_phy rx_64_bytes_phy rx_65_to_127_bytes_phy rx_128_to_255_bytes_phy rx_256_to_511_bytes_phy "
    "rx_512_to_1023_bytes_phy rx_1024_to_1518_bytes_phy rx_1519_to_2047_bytes_phy rx_2048_to_4095_bytes_phy "
    "rx_4096_to_8191_bytes_phy rx_8192_to_10239_bytes_phy link_down_events_phy rx_pcs_symbol_err_phy "
    "rx_corrected_bits_phy rx_err_lane_0_phy rx_err_lane_1_phy rx_err_lane_2_phy rx_err_lane_3_phy "
    "rx_buffer_passed_thres_phy rx_pci_signal_integrity tx_pci_signal_integrity outbound_pci_stalled_rd "
    "outbound_pci_stalled_wr outbound_pci_stalled_rd_events outbound_pci_stalled_wr_events "
).split()
CHANNEL = (
    "module_unplug module_bus_stuck module_high_temp module_bad_shorted ch0_events ch0_poll ch0_arm "
    "ch0_aff_change ch0_force_irq ch0_eq_rearm rx0_packets rx0_bytes rx0_csum_complete rx0_csum_complete_tail "
    "rx0_csum_complete_tail_slow rx0_csum_unnecessary rx0_csum_unnecessary_inner rx0_csum_none rx0_xdp_drop "
    "rx0_xdp_redirect rx0_lro_packets rx0_lro_bytes rx0_ecn_mark rx0_removed_vlan_packets rx0_wqe_err "
    "rx0_mpwqe_filler_cqes rx0_mpwqe_filler_strides rx0_oversize_pkts_sw_drop rx0_buff_alloc_err "
    "rx0_cqe_compress_blks rx0_cqe_compress_pkts rx0_cache_reuse rx0_cache_full rx0_cache_empty "
    "rx0_cache_busy rx0_cache_waive rx0_cache_ext rx0_cache_rdc rx0_cache_alloc rx0_congst_umr rx0_arfs_err "
    "rx0_recover rx0_pet_hdr_lookup_drop rx0_pet_mdata_lookup_drop rx0_xdp_tx_xmit rx0_xdp_tx_mpwqe "
    "rx0_xdp_tx_inlnw rx0_xdp_tx_nops rx0_xdp_tx_full rx0_xdp_tx_err rx0_xdp_tx_cqes tx0_packets tx0_bytes "
    "tx0_tso_packets tx0_tso_bytes tx0_tso_inner_packets tx0_tso_inner_bytes tx0_csum_partial "
    "tx0_csum_partial_inner tx0_added_vlan_packets tx0_nop tx0_mpwqe_blks tx0_mpwqe_pkts tx0_csum_none "
    "tx0_stopped tx0_dropped tx0_xmit_more tx0_recover tx0_cqes tx0_cqe_compress_blks tx0_cqe_compress_pkts "
    "tx0_wake tx0_cqe_err tx0_xdp_xmit tx0_xdp_mpwqe tx0_xdp_inlnw tx0_xdp_nops tx0_xdp_full tx0_xdp_err "
    "tx0_xdp_cqes "
).split()
PER_PRIO_TRAFFIC = ("rx_prio%d_bytes", "rx_prio%d_packets", "rx_prio%d_discards", "tx_prio%d_bytes", "tx_prio%d_packets")
PFC_COUNTERS = ("rx_%s_pause", "rx_%s_pause_duration", "tx_%s_pause", "tx_%s_pause_duration", "rx_%s_pause_transition")
STORM = ("tx_pause_storm_warning_events", "tx_pause_storm_error_events")
PER_TC_CONGEST = ("rx_prio%d_buf_discard", "rx_prio%d_cong_discard", "rx_prio%d_marked")


def counter_names(st: dict) -> list:
    """The -S names in mlx5 order for a port in state ``st``."""
    names = list(HEAD)
    for prio in range(8):
        names += [fmt % prio for fmt in PER_PRIO_TRAFFIC]
    pfc = st["pfc_en"]
    for prio in range(8):
        if pfc >> prio & 1:
            names += [fmt % ("prio%d" % prio) for fmt in PFC_COUNTERS]
    if st["pause"]["rx"] or st["pause"]["tx"]:
        names += [fmt % "global" for fmt in PFC_COUNTERS]
    names += list(STORM) + list(CHANNEL)
    for prio in range(8):
        names += [fmt % prio for fmt in PER_TC_CONGEST]
    return names


def _real(argv: list) -> int:
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    for path in REAL_ETHTOOL:
        if os.path.isfile(path) and os.access(path, os.X_OK) and os.path.realpath(path) != me:
            sys.stdout.flush()
            os.execv(path, ["ethtool"] + argv)
    sys.stderr.write("ethtool: command not found\n")
    return 127


def _bad_args() -> int:
    sys.stderr.write("ethtool: bad command line argument(s)\nFor more information run ethtool -h\n")
    return 1


def _show_pause(dev: str, stats: bool) -> int:
    st = qos.load(dev)
    out = "Pause parameters for %s:\n" % dev
    out += "Autonegotiate:\t%s\n" % ("on" if st["pause"]["autoneg"] else "off")
    out += "RX:\t\t%s\n" % ("on" if st["pause"]["rx"] else "off")
    out += "TX:\t\t%s\n" % ("on" if st["pause"]["tx"] else "off")
    if stats:
        out += "Statistics:\n"
        out += "  tx_pause_frames: %d\n" % qos.invented_counter(dev, "tx_pause_frames")
        out += "  rx_pause_frames: %d\n" % qos.invented_counter(dev, "rx_pause_frames")
    sys.stdout.write(out + "\n")
    return 0


def _set_pause(dev: str, params: list) -> int:
    values: dict = {}
    while params:
        name = params.pop(0)
        if name not in ("autoneg", "rx", "tx"):
            sys.stderr.write("ethtool (-A): unknown parameter '%s'\n" % name)
            return 1
        if name in values:
            sys.stderr.write("ethtool (-A): duplicate parameter '%s'\n" % name)
            return 1
        if not params:
            sys.stderr.write("ethtool (-A): no value for parameter '%s'\n" % name)
            return 1
        val = params.pop(0)
        if val not in ("on", "off"):
            sys.stderr.write("ethtool (-A): invalid value '%s' for parameter '%s'\n" % (val, name))
            return 1
        values[name] = val == "on"
    st = qos.load(dev)
    if qos.set_pause(st, values.get("rx"), values.get("tx"), values.get("autoneg")):
        sys.stderr.write("netlink error: Invalid argument\n")
        return 76
    qos.save(dev, st)
    return 0


def _stats(dev: str) -> int:
    st = qos.load(dev)
    out = "NIC statistics:\n" + "".join("     %s: %d\n" % (n, qos.invented_counter(dev, n)) for n in counter_names(st))
    sys.stdout.write(out)
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    kernelfs.settle()
    args = argv[1:]
    include_stats = False
    while args and args[0] in ("-I", "--include-statistics"):
        include_stats = True
        args = args[1:]
    if not args:
        return _real(argv[1:])
    op = args[0]
    ops = {"-a": "show-pause", "--show-pause": "show-pause", "-A": "pause", "--pause": "pause", "-S": "stats",
           "--statistics": "stats"}
    if op not in ops:
        return _real(argv[1:])
    if len(args) < 2:
        return _bad_args()
    dev = args[1]
    if qos.netdev_kind(dev) != "mlx5":
        return _real(argv[1:])
    kind = ops[op]
    if kind == "show-pause":
        if len(args) > 2:
            sys.stderr.write("ethtool: unexpected parameter '%s'\n" % args[2])
            return 1
        return _show_pause(dev, include_stats)
    if kind == "pause":
        return _set_pause(dev, args[2:])
    if len(args) > 2:
        sys.stderr.write("ethtool (-S): unknown parameter '%s'\n" % args[2])
        return 1
    return _stats(dev)
