"""Fake ``ibv_devinfo`` (rdma-core libibverbs/examples/devinfo.c) drawn from the simulated sysfs tree."""

from __future__ import annotations

import getopt
import ipaddress
import os
import socket
import sys

from .. import sysfs
from ._common import getopt_message as _getopt_message

PORT_STATE = {1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE"}
PHYS_STATE = {1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION TRAINNING", 5: "LINK_UP",
              6: "LINK_ERROR_RECOVERY", 7: "PHY TEST"}
WIDTH_ENUM = {1: 1, 4: 2, 8: 4, 12: 8, 2: 16}          # "4X" -> IB_WIDTH_4X (2)
SPEED_ENUM = {"SDR": (1, "2.5 Gbps"), "DDR": (2, "5.0 Gbps"), "QDR": (4, "10.0 Gbps"), "FDR10": (8, "10.0 Gbps"),
              "FDR": (16, "14.0 Gbps"), "EDR": (32, "25.0 Gbps"), "HDR": (64, "50.0 Gbps"),
              "NDR": (128, "100.0 Gbps"), "XDR": (256, "200.0 Gbps")}
MTU_ENUM = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
DEV_CAP_FLAGS = [(0, "RESIZE_MAX_WR"), (1, "BAD_PKEY_CNTR"), (2, "BAD_QKEY_CNTR"), (3, "RAW_MULTI"),
                 (4, "AUTO_PATH_MIG"), (5, "CHANGE_PHY_PORT"), (6, "UD_AV_PORT_ENFORCE"), (7, "CURR_QP_STATE_MOD"),
                 (8, "SHUTDOWN_PORT"), (9, "INIT_TYPE"), (10, "PORT_ACTIVE_EVENT"), (11, "SYS_IMAGE_GUID"),
                 (12, "RC_RNR_NAK_GEN"), (13, "SRQ_RESIZE"), (14, "N_NOTIFY_CQ"), (17, "MEM_WINDOW"),
                 (18, "UD_IP_CSUM"), (20, "XRC"), (21, "MEM_MGT_EXTENSIONS"), (23, "MEM_WINDOW_TYPE_2A"),
                 (24, "MEM_WINDOW_TYPE_2B"), (25, "RC_IP_CSUM"), (26, "RAW_IP_CSUM"), (29, "MANAGED_FLOW_STEERING")]
IBV_PORT_IP_BASED_GIDS = 1 << 26

# ConnectX-7 device limits (values as reported by a CX-7, fw 28.x: tests/fixtures/real/rdma-outputs/ibv_devinfo-v-02.txt)
CX7_LIMITS = [
    ("max_mr_size", "\t\t\t", "0xffffffffffffffff"), ("page_size_cap", "\t\t\t", "0xfffffffffffff000"),
    ("max_qp", "\t\t\t\t", "131072"), ("max_qp_wr", "\t\t\t", "32768"), ("device_cap_flags", "\t\t", None),
    ("max_sge", "\t\t\t", "30"), ("max_sge_rd", "\t\t\t", "30"), ("max_cq", "\t\t\t\t", "16777216"),
    ("max_cqe", "\t\t\t", "4194303"), ("max_mr", "\t\t\t\t", "16777216"), ("max_pd", "\t\t\t\t", "8388608"),
    ("max_qp_rd_atom", "\t\t\t", "16"), ("max_ee_rd_atom", "\t\t\t", "0"), ("max_res_rd_atom", "\t\t", "2097152"),
    ("max_qp_init_rd_atom", "\t\t", "16"), ("max_ee_init_rd_atom", "\t\t", "0"), ("atomic_cap", "\t\t\t", "ATOMIC_HCA (1)"),
    ("max_ee", "\t\t\t\t", "0"), ("max_rdd", "\t\t\t", "0"), ("max_mw", "\t\t\t\t", "16777216"),
    ("max_raw_ipv6_qp", "\t\t", "0"), ("max_raw_ethy_qp", "\t\t", "0"), ("max_mcast_grp", "\t\t\t", "2097152"),
    ("max_mcast_qp_attach", "\t\t", "240"), ("max_total_mcast_qp_attach", "\t", "503316480"),
    ("max_ah", "\t\t\t\t", "2147483647"), ("max_fmr", "\t\t\t", "0"), ("max_srq", "\t\t\t", "8388608"),
    ("max_srq_wr", "\t\t\t", "32767"), ("max_srq_sge", "\t\t\t", "31"), ("max_pkeys", "\t\t\t", "128"),
    ("local_ca_ack_delay", "\t\t", "16"),
]
CX7_DEVICE_CAP_FLAGS = 0xED721C36
CX7_TAIL = """\tgeneral_odp_caps:
\t\t\t\t\tODP_SUPPORT
\t\t\t\t\tODP_SUPPORT_IMPLICIT
\trc_odp_caps:
\t\t\t\t\tSUPPORT_SEND
\t\t\t\t\tSUPPORT_RECV
\t\t\t\t\tSUPPORT_WRITE
\t\t\t\t\tSUPPORT_READ
\t\t\t\t\tSUPPORT_SRQ
\tuc_odp_caps:
\t\t\t\t\tNO SUPPORT
\tud_odp_caps:
\t\t\t\t\tSUPPORT_SEND
\txrc_odp_caps:
\t\t\t\t\tSUPPORT_SEND
\t\t\t\t\tSUPPORT_WRITE
\t\t\t\t\tSUPPORT_READ
\t\t\t\t\tSUPPORT_SRQ
\tcompletion timestamp_mask:\t\t\t0x7fffffffffffffff
\thca_core_clock:\t\t\t156250kHZ
\traw packet caps:
\t\t\t\t\tC-VLAN stripping offload
\t\t\t\t\tScatter FCS offload
\t\t\t\t\tIP csum offload
\t\t\t\t\tDelay drop
\tdevice_cap_flags_ex:\t\t0x30000055ED721C36
\t\t\t\t\tRAW_SCATTER_FCS
\t\t\t\t\tPCI_WRITE_END_PADDING
\t\t\t\t\tUnknown flags: 0x3000001000000000
\ttso_caps:
\t\tmax_tso:\t\t\t262144
\t\tsupported_qp:
\t\t\t\t\tSUPPORT_RAW_PACKET
\trss_caps:
\t\tmax_rwq_indirection_tables:\t\t\t65536
\t\tmax_rwq_indirection_table_size:\t\t\t2048
\t\trx_hash_function:\t\t\t\t0x1
\t\trx_hash_fields_mask:\t\t\t\t0x800000FF
\t\tsupported_qp:
\t\t\t\t\tSUPPORT_RAW_PACKET
\tmax_wq_type_rq:\t\t\t8388608
\tpacket_pacing_caps:
\t\tqp_rate_limit_min:\t1kbps
\t\tqp_rate_limit_max:\t400000000kbps
\t\tsupported_qp:
\t\t\t\t\tSUPPORT_RAW_PACKET
\ttag matching not supported

\tcq moderation caps:
\t\tmax_cq_count:\t65535
\t\tmax_cq_period:\t4095 us

\tmaximum available device memory:\t131072Bytes

\tnum_comp_vectors:\t\t63
"""

USAGE = """Usage: {prog}             print the ca attributes

Options:
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default all ports)
  -l, --list             print only the IB devices names
  -v, --verbose          print all the attributes of the IB device(s)
"""


def _iboe_mtu(ndev_mtu: int) -> int:
    """ib_core iboe_get_mtu(): netdev MTU minus RoCE headers, rounded down to an IB MTU."""
    mtu = ndev_mtu - 40 - 12 - 4 - 28 - 4
    for ib_mtu in (4096, 2048, 1024, 512, 256):
        if mtu >= ib_mtu:
            return ib_mtu
    return 0


def _gid_line(index: int, gid: str, gtype: str | None, link_layer: str) -> str | None:
    raw = ipaddress.IPv6Address(int(gid.replace(":", ""), 16)).packed
    if not any(raw[8:]):            # null_gid(): interface id all zero
        return None
    suffix = ""
    if gtype is None:
        kind = None
    elif "v2" in gtype:
        kind = "v2"
    else:
        kind = "v1"
    if link_layer == "Ethernet":
        suffix = ", " + {"v1": "RoCE v1", "v2": "RoCE v2", None: "Invalid gid type"}[kind]
    if kind == "v2":
        text = socket.inet_ntop(socket.AF_INET6, raw)
    elif kind == "v1":
        text = gid
    else:
        return None
    return f"\t\t\tGID[{index:3d}]:\t\t{text}{suffix}"


def print_device(dev: str, want_port: int, verbose: bool, out: list) -> int:
    r = sysfs.root()
    d = sysfs.ib_dir(dev)
    ports = sysfs.ports(dev)
    if want_port and want_port > len(ports):
        sys.stderr.write("Invalid port requested for device\n")
        return 4
    guid = (sysfs.read(d / "node_guid") or "0000:0000:0000:0000")
    sysguid = (sysfs.read(d / "sys_image_guid") or "0000:0000:0000:0000")
    fn = sysfs.pci_function(dev)
    part_id = int(sysfs.read(fn / "device") or "0", 16)
    out.append(f"hca_id:\t{dev}")
    out.append("\ttransport:\t\t\tInfiniBand (0)")
    fw = sysfs.read(d / "fw_ver")
    if fw:
        out.append(f"\tfw_ver:\t\t\t\t{fw}")
    out.append(f"\tnode_guid:\t\t\t{guid}")
    out.append(f"\tsys_image_guid:\t\t\t{sysguid}")
    out.append("\tvendor_id:\t\t\t0x02c9")
    out.append(f"\tvendor_part_id:\t\t\t{part_id}")
    out.append(f"\thw_ver:\t\t\t\t0x{int(sysfs.read(d / 'hw_rev') or '0', 0):X}")
    board = sysfs.read(d / "board_id")
    if board:
        out.append(f"\tboard_id:\t\t\t{board}")
    out.append(f"\tphys_port_cnt:\t\t\t{len(ports)}")
    if verbose:
        for key, tabs, val in CX7_LIMITS:
            if key == "device_cap_flags":
                out.append(f"\t{key}:{tabs}0x{CX7_DEVICE_CAP_FLAGS:08x}")
                known = 0
                for bit, name in DEV_CAP_FLAGS:
                    known |= 1 << bit
                    if CX7_DEVICE_CAP_FLAGS & (1 << bit):
                        out.append(f"\t\t\t\t\t{name}")
                if CX7_DEVICE_CAP_FLAGS & ~known:
                    out.append(f"\t\t\t\t\tUnknown flags: 0x{CX7_DEVICE_CAP_FLAGS & ~known & 0xFFFFFFFF:X}")
            else:
                out.append(f"\t{key}:{tabs}{val}")
        out.extend(CX7_TAIL.rstrip("\n").split("\n"))
    for port in ports:
        if want_port and port != want_port:
            continue
        p = sysfs.port_dir(dev, port)
        ll = sysfs.read(p / "link_layer") or "InfiniBand"
        state = sysfs.num_value(sysfs.read(p / "state"))
        phys = sysfs.num_value(sysfs.read(p / "phys_state"))
        if ll == "Ethernet":
            nd = sysfs.port_netdev(dev, port)
            nd_mtu = int(sysfs.read(sysfs.netdev_dir(nd, r) / "mtu") or "1500") if nd else 1500
            active_mtu = _iboe_mtu(nd_mtu)
        else:
            active_mtu = 4096
        out.append(f"\t\tport:\t{port}")
        out.append(f"\t\t\tstate:\t\t\t{PORT_STATE.get(state, 'invalid state')} ({state})")
        out.append(f"\t\t\tmax_mtu:\t\t4096 ({MTU_ENUM[4096]})")
        out.append(f"\t\t\tactive_mtu:\t\t{active_mtu} ({MTU_ENUM.get(active_mtu, 0)})")
        out.append(f"\t\t\tsm_lid:\t\t\t{sysfs.num_value(sysfs.read(p / 'sm_lid'))}")
        out.append(f"\t\t\tport_lid:\t\t{sysfs.num_value(sysfs.read(p / 'lid'))}")
        out.append(f"\t\t\tport_lmc:\t\t0x{int(sysfs.read(p / 'lid_mask_count') or '0'):02x}")
        out.append(f"\t\t\tlink_layer:\t\t{ll}")
        if verbose:
            cap = int(sysfs.read(p / "cap_mask") or "0", 16)
            if ll == "Ethernet":
                cap |= IBV_PORT_IP_BASED_GIDS
            rate = (sysfs.read(p / "rate") or "").split("(")[-1].rstrip(")").split()
            width = int(rate[0].rstrip("X")) if len(rate) == 2 else 1
            speed_enum, speed_text = SPEED_ENUM.get(rate[1] if len(rate) == 2 else "", (0, "invalid speed"))
            gids = sysfs.gid_table(dev, port)
            out.append("\t\t\tmax_msg_sz:\t\t0x40000000")
            out.append(f"\t\t\tport_cap_flags:\t\t0x{cap:08x}")
            out.append("\t\t\tport_cap_flags2:\t0x" + ("0032" if ll == "InfiniBand" else "0000"))
            out.append("\t\t\tmax_vl_num:\t\t" + ("8 (4)" if ll == "InfiniBand" else "invalid value (0)"))
            out.append("\t\t\tbad_pkey_cntr:\t\t0x0")
            out.append("\t\t\tqkey_viol_cntr:\t\t0x0")
            out.append(f"\t\t\tsm_sl:\t\t\t{int(sysfs.read(p / 'sm_sl') or '0')}")
            out.append(f"\t\t\tpkey_tbl_len:\t\t{len(sysfs.ls(p / 'pkeys'))}")
            out.append(f"\t\t\tgid_tbl_len:\t\t{len(gids)}")
            out.append("\t\t\tsubnet_timeout:\t\t" + ("18" if ll == "InfiniBand" else "0"))
            out.append("\t\t\tinit_type_reply:\t0")
            out.append(f"\t\t\tactive_width:\t\t{width}X ({WIDTH_ENUM.get(width, 0)})")
            out.append(f"\t\t\tactive_speed:\t\t{speed_text} ({speed_enum})")
            out.append(f"\t\t\tphys_state:\t\t{PHYS_STATE.get(phys, 'invalid physical state')} ({phys})")
            for index, gid, gtype, _ndev in gids:
                line = _gid_line(index, gid, gtype, ll)
                if line:
                    out.append(line)
        out.append("")
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0])
    try:
        opts, _args = getopt.gnu_getopt(argv[1:], "d:i:lv", ["ib-dev=", "ib-port=", "list", "verbose"])
    except getopt.GetoptError as exc:
        sys.stderr.write(_getopt_message(prog, exc))
        sys.stdout.write(USAGE.format(prog=prog))
        return 255
    devname, port, verbose = None, 0, False
    r = sysfs.root()
    for opt, val in opts:
        if opt in ("-d", "--ib-dev"):
            devname = val
        elif opt in ("-i", "--ib-port"):
            try:
                port = int(val, 0)
            except ValueError:
                port = 0
            if port <= 0:
                sys.stdout.write(USAGE.format(prog=prog))
                return 1
        elif opt in ("-v", "--verbose"):
            verbose = True
        elif opt in ("-l", "--list"):
            if not (r / "class/infiniband_verbs/abi_version").exists():
                sys.stderr.write("Failed to get IB devices list: Unknown error -38\n")
                return 255
            devs = sysfs.verbs_devices()  # ibv_get_device_list order (kernel device index)
            lines = [f"{len(devs)} HCA{'s' if len(devs) != 1 else ''} found:"] + [f"\t{d}" for d in devs] + [""]
            sys.stdout.write("\n".join(lines) + "\n")
            return 0
    if not (r / "class/infiniband_verbs/abi_version").exists():
        sys.stderr.write("Failed to get IB devices list: Unknown error -38\n")
        return 255
    devs = sysfs.verbs_devices()  # ibv_get_device_list order (kernel device index)
    out: list = []
    rc = 0
    if devname:
        if devname not in devs:
            sys.stderr.write(f"IB device '{devname}' wasn't found\n")
            return 255
        rc = print_device(devname, port, verbose, out)
    else:
        if not devs:
            sys.stderr.write("No IB devices found\n")
            return 255
        for dev in devs:
            rc |= print_device(dev, port, verbose, out)
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return rc
