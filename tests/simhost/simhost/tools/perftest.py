"""Stand-ins for perftest's ``ib_write_bw``, ``ib_write_lat``, ``ib_read_bw``, ``ib_read_lat``, ``ib_send_bw`` and
``ib_send_lat``: one program, the test picked by the name it runs under.

Server (no host argument) and client really meet over TCP on the out-of-band port (``-p``, default 18515): the
server listens on every IPv4 address (perftest: AF_INET, AI_PASSIVE, SO_REUSEADDR) and serves one client; each side
sends one JSON line with its port view (simhost.fabric_model.port_view: GID, LID, link layer, rate, MTU, PFC/trust
state, netdev MTU) and its QP numbers (QPN/PSN/RKey/VAddr, random but well-formed), the stand-in of perftest's
fixed-size key exchange. Both then decide, from the same two views, what perftest and the hardware would do, and
print it. Numbers come only from simhost.fabric_model (THE model); counters move in each host's own tree.

Formats: perftest's printf strings as Debian 12's perftest 4.5+0.17 binary holds them (read from the binary; the
same as the capture tests/fixtures/real/perftest-nccl-tests/ib_write_bw-client-rocev2-01.txt): ``ctx_print_test_info``
with its real TABs (``\\t\\t`` before the second column, ``rdma_cm QPs\\t :``), ``RESULT_LINE`` (87 dashes),
``RESULT_FMT``/``RESULT_FMT_G`` (``MB/sec``), ``REPORT_FMT`` (``\\t\\t`` + 3 blanks before the message rate),
``REPORT_FMT_EXT`` (6 decimals when the average is below 0.1 Gb/s), ``RESULT_FMT_LAT``/``REPORT_FMT_LAT``,
``BASIC_ADDR_FMT`` + ``READ_FMT`` + ``RDMA_FMT`` (C's ``%#04x`` of 0 is ``0000``), ``PERF_GID_FMT`` (``%02d`` bytes).
The one exception, as asked for the current form: the client's connect failure prints the two lines fixed by
linux-rdma/perftest PR #228 (``Unable to open file descriptor for socket connection`` / `` Unable to init the
socket connection``); 4.5+0.17 runs them together on one line (capture ib_write_bw-error-connect-01).

Failures, in perftest's order (write_bw.c / read_lat.c flow, perftest_resources.c ``ctx_find_dev``,
perftest_parameters.c ``set_link_layer``, perftest_communication.c):
* no device / ``-d`` unknown: `` Did not detect devices `` + `` If device exists, check if driver is up`` /
  ``IB device X not found``, then `` Unable to find the Infiniband/RoCE device`` (exit 1), before any connection;
* port not ACTIVE: `` Port number N state is Down`` / `` Couldn't set the link layer`` / `` Couldn't get context for
  the device`` (exit 1), before any connection (a server with a down port never listens);
* client, nothing listening: ``Couldn't connect to H:P`` + the two lines above (exit 1); unknown host:
  ``<gai_strerror> for H:P`` / ``Problem in resolving basic address and port`` + the same;
* ``-x`` beyond the GID table (``ibv_query_gid`` fails): `` Unable to set up socket connection`` on that side
  after the connection; the peer prints its header, then the key exchange fails
  (``ethernet_read_keys: Couldn't read remote address`` / `` Unable to read from|to socket/rdma_cm`` /
  `` Failed to exchange data between server and clients``);
* ``-x`` on an empty entry reads a zero GID (rdma-core: "Preserve API behavior for empty GID"); one side's GID
  IPv4-mapped and the other's not (link-local, IPv6, zero): both print `` Found Incompatibility issue with GID
  types.`` / `` Please Try to use a different IP version.`` (``ctx_check_gid_compatibility``, exit 1);
* a zero GID on either side otherwise: ``Failed to modify QP <qpn> to RTR`` / `` Unable to Connect the HCA's
  through the link`` on both sides (the empty source GID has no attributes; a zero destination cannot be resolved);
* GIDs of different RoCE types (v1 vs v2) or different link layers with GIDs: the QPs connect, the traffic never
  arrives: `` Completion with error at client`` / `` Failed status 12: wr_id 0 syndrom 0x81`` / ``scnt=N, ccnt=0``
  (IBV_WC_RETRY_EXC_ERR) after a short wait, and the server's key-exchange failure;
* link layers differ and only one side uses a GID (IB without ``-x``): the key messages differ in size and the
  exchange fails (the RoCE side at once; an IB server after printing its local address);
* ``-T``/``--tos`` without rdma_cm: `` TOS only valid for rdma_cm based QP and RawEth QP `` (stdout, exit 1).
Not simulated (``simhost: <tool>: option '-X' is not simulated``, exit 1): rdma_cm (-R), duration (-D),
bidirectional (-b), other connection types, events, CUDA, and the rest of perftest's options.
Timeouts are the caller's business, but nothing hangs forever: a server gives up after ``ACCEPT_TIMEOUT`` (120 s,
``$SIMHOST_PERFTEST_ACCEPT_TIMEOUT``) without a client, as perftest's accept() failure path prints it
(``server accept: Connection timed out`` / ``accept() failed``), and a peer that sends nothing for
``EXCHANGE_TIMEOUT`` (60 s) counts as gone.
"""

from __future__ import annotations

import getopt
import json
import os
import random
import socket
import sys
import time

from .. import fabric_model, kernelfs, sysfs
from ._common import getopt_message

RESULT_LINE = "-" * 87 + "\n"
RESULT_FMT = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
RESULT_FMT_G = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
REPORT_FMT = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n"
REPORT_FMT_EXT = " %-7d    %d           %-7.6f            %-7.6f            %-7.6f\n"
RESULT_FMT_LAT = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]"
                  "   99% percentile[usec]   99.9% percentile[usec] \n")
REPORT_FMT_LAT = (" %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t"
                  "%-7.2f\n")
WAITING = ("\n************************************\n* Waiting for client to connect... *\n"
           "************************************\n")
NO_PEAK_WARNING = " WARNING: BW peak won't be measured in this run.\n"

TOOLS = {
    "ib_write_bw": ("write", "bw"), "ib_write_lat": ("write", "lat"),
    "ib_read_bw": ("read", "bw"), "ib_read_lat": ("read", "lat"),
    "ib_send_bw": ("send", "bw"), "ib_send_lat": ("send", "lat"),
}
TITLE = {"write": "RDMA_Write", "read": "RDMA_Read", "send": "Send"}
PORT_STATE_NAMES = {0: "Nop", 1: "Down", 2: "Init", 3: "Armed", 4: "", 5: "Active Defer"}
MTU_ENUM = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
DEF_PORT = 18515
DEF_SIZE_BW, DEF_SIZE_LAT = 65536, 2
DEF_ITERS_BW, DEF_ITERS_LAT = 5000, 1000
DEF_TX_BW, DEF_TX_LAT, DEF_RX_SEND = 128, 1, 512
DEF_CQ_MOD = 100
MAX_OUT_READ = 16
INLINE = {("write", "lat"): 220, ("send", "lat"): 236}
NO_PEAK_ITERS = 20000
ACCEPT_TIMEOUT = 120.0
EXCHANGE_TIMEOUT = 60.0
CONNECT_TIMEOUT = 30.0
RETRY_WAIT = 0.5                 # transport retries exhausted (7 x 4.096 us x 2^14 ~ 0.5 s)
WC_RETRY_EXC_ERR, SYNDROME = 12, 0x81
MIB_PER_GBIT = 1e9 / 8 / 1048576     # perftest's MB/sec is bytes / 0x100000 (format_factor)

SHORT = "d:i:p:x:s:n:aq:m:Ft:T:"
LONG = ["ib-dev=", "ib-port=", "port=", "gid-index=", "size=", "iters=", "all", "qp=", "mtu=", "CPU-freq",
        "tx-depth=", "tos=", "report_gbits", "tclass="]
NOT_SIMULATED_SHORT = set("RDbcehVzSuwlrEMgCHUOWIjkKLoPQvXYZ")
NOT_SIMULATED_LONG = {
    "rdma_cm", "duration", "bidirectional", "connection", "events", "help", "version", "com_rdma_cm", "sl",
    "use_cuda", "use_cuda_dmabuf", "use_rocm", "run_infinitely", "report-both", "dualport", "post_list", "ipv6",
    "odp", "force-link", "disable_pcie_relaxed", "cpu_util", "mr_per_qp", "perform_warm_up", "out_json",
    "out_json_file", "inline_size", "rx-depth", "source_ip", "margin", "retry_count", "dont_xchg_versions",
    "use_hugepages", "use_old_post_send", "ipv6-addr", "mmap", "mmap-offset", "cq-mod", "ib-port2", "gid-index2",
    "limit_bw", "limit_msgrate", "noPeak", "reversed", "report-counters", "latency_gap", "pkey_index",
}


# ---------------------------------------------------------------------------------------------- output
def out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def err(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def c_hex(value: int, width: int) -> str:
    """C's ``%#0<width>x``: ``0x``-prefixed and zero-padded, but 0 has no prefix (``%#04x`` of 0 is ``0000``)."""
    if value == 0:
        return "0" * width
    return "%#0*x" % (width, value)


def gid_decimal(gid: str) -> str:
    """perftest's PERF_GID_FMT body: 16 bytes, each ``%02d``."""
    raw = bytes.fromhex(gid.replace(":", "")) if gid else bytes(16)
    return ":".join("%02d" % b for b in raw)


# -------------------------------------------------------------------------------------------- arguments
class Usage(Exception):
    def __init__(self, text: str, code: int = 1, stream: str = "err"):
        super().__init__(text)
        self.text, self.code, self.stream = text, code, stream


def _int_arg(text: str) -> int:
    """strtol(optarg, NULL, 0): base prefixes, leading digits only, 0 on garbage."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body[:2].lower() == "0x":
        base, digits, body = 16, "0123456789abcdef", body[2:]
    elif body.startswith("0") and len(body) > 1:
        base, digits, body = 8, "01234567", body[1:]
    else:
        base, digits = 10, "0123456789"
    n = 0
    for ch in body.lower():
        if ch not in digits:
            break
        n = n * base + digits.index(ch)
    return sign * n


def _check(value: int, lo: int, hi: int, name: str) -> int:
    if value < lo or value > hi:
        raise Usage(" %s should be between %d and %d\n" % (name, lo, hi))
    return value


def parse_args(prog: str, argv: list) -> dict:
    verb, tst = TOOLS[prog]
    p = {"prog": prog, "verb": verb, "tst": tst, "ib_dev": None, "ib_port": 1, "port": DEF_PORT, "gid_index": -1,
         "size": DEF_SIZE_BW if tst == "bw" else DEF_SIZE_LAT, "iters": DEF_ITERS_BW if tst == "bw" else DEF_ITERS_LAT,
         "all": False, "qps": 1, "mtu": 0, "report_gbits": False, "tclass": 0, "tos": None,
         "tx_depth": DEF_TX_BW if tst == "bw" else DEF_TX_LAT, "server": None}
    for arg in argv:
        if arg.startswith("--"):
            name = arg[2:].split("=", 1)[0]
            if name in NOT_SIMULATED_LONG:
                raise Usage("simhost: %s: option '--%s' is not simulated\n" % (prog, name))
        elif arg.startswith("-") and len(arg) > 1 and arg[1] in NOT_SIMULATED_SHORT:
            raise Usage("simhost: %s: option '-%s' is not simulated\n" % (prog, arg[1]))
    try:
        opts, args = getopt.gnu_getopt(argv, SHORT, LONG)
    except getopt.GetoptError as exc:
        raise Usage(getopt_message(prog, exc) + " Invalid Command or flag.\n Please check command line and run "
                    "again.\n\n Parser function exited with Error\n") from None
    for opt, val in opts:
        if opt in ("-d", "--ib-dev"):
            p["ib_dev"] = val
        elif opt in ("-i", "--ib-port"):
            p["ib_port"] = _check(_int_arg(val), 1, 3, "IB Port")
        elif opt in ("-p", "--port"):
            p["port"] = _check(_int_arg(val), 0, 65536, "Port")
        elif opt in ("-x", "--gid-index"):
            p["gid_index"] = _check(_int_arg(val), 0, 255, "Gid index")
            p["gid_user"] = True
        elif opt in ("-s", "--size"):
            p["size"] = _int_arg(val)
            if p["size"] < 1:
                raise Usage(" Message Size should be between %d and %d\n" % (1, (1 << 31) - 1))
        elif opt in ("-n", "--iters"):
            p["iters"] = _check(_int_arg(val), 5, 100000000, "Iteration num")
        elif opt in ("-a", "--all"):
            p["all"] = True
        elif opt in ("-q", "--qp"):
            p["qps"] = _check(_int_arg(val), 1, 16384, "num of qps")
        elif opt in ("-m", "--mtu"):
            p["mtu"] = _int_arg(val)
        elif opt in ("-t", "--tx-depth"):
            p["tx_depth"] = _check(_int_arg(val), 1, 15000, "Tx depth")
        elif opt in ("-T", "--tos"):
            p["tos"] = _check(_int_arg(val), 0, 256, "TOS")
        elif opt == "--tclass":
            p["tclass"] = _check(_int_arg(val), 0, 255, "traffic class")
        elif opt == "--report_gbits":
            p["report_gbits"] = True
    if len(args) > 1:
        raise Usage(" Invalid Command line. Please check command rerun \n Parser function exited with Error\n")
    p["server"] = args[0] if args else None
    if p["tos"] is not None:
        raise Usage(" TOS only valid for rdma_cm based QP and RawEth QP \n", 1, "out")
    p["sizes"] = [1 << i for i in range(1, 24)] if p["all"] else [p["size"]]
    p["no_peak"] = tst == "bw" and p["iters"] > NO_PEAK_ITERS
    return p


# ------------------------------------------------------------------------------------- local resources
def find_device(p: dict) -> str | None:
    devices = sysfs.verbs_devices()  # ibv_get_device_list order: the first is perftest's default
    if not devices:
        err(" Did not detect devices \n If device exists, check if driver is up\n")
        return None
    if p["ib_dev"] is None:
        return devices[0]
    if p["ib_dev"] not in devices:
        err("IB device %s not found\n" % p["ib_dev"])
        return None
    return p["ib_dev"]


def check_link(view: dict, p: dict) -> bool:
    if not view.get("exists"):
        err(" Unable to query port %d attributes\n" % p["ib_port"])
        return False
    if view["state_num"] != 4:
        err(" Port number %d state is %s\n" % (p["ib_port"], PORT_STATE_NAMES.get(view["state_num"], "")))
        return False
    return True


def local_setup(view: dict, p: dict) -> dict:
    """set_up_connection(): the GID (perftest's choice or ``-x``), LID and the QPs' keys."""
    rng = random.Random(os.urandom(16))
    me = {"gid_index": -1, "gid": None, "gid_type": None, "setup_error": False}
    if view["link_layer"] == "Ethernet" or p.get("gid_user"):
        idx = p["gid_index"] if p.get("gid_user") else fabric_model.default_gid_index(view)
        me["gid_index"] = idx
        if idx >= view.get("gid_tbl_len", 0):
            me["setup_error"] = True
        else:
            entry = fabric_model.gid_entry(view, idx)
            me["gid"] = entry["gid"] if entry else "0000:0000:0000:0000:0000:0000:0000:0000"
            me["gid_type"] = entry["type"] if entry else None
    base_qpn = rng.randint(0x100, 0x1f00)
    page = rng.randint(0x7f0000000, 0x7ffffffff) << 12
    me.update({
        "lid": view.get("lid", 0) if view["link_layer"] != "Ethernet" else 0,
        "qpns": [base_qpn + i for i in range(p["qps"])],
        "psns": [rng.randint(0, 0xffffff) for _ in range(p["qps"])],
        "rkey": rng.randint(0x1000, 0xffffff),
        "vaddrs": [page + i * 0x800000 for i in range(p["qps"])],
    })
    return me


# ------------------------------------------------------------------------------------------ the printing
def header_text(p: dict, role: str, dev: str, link_layer: str, mtu: int, gid_index: int) -> str:
    verb, tst = p["verb"], p["tst"]
    lines = [RESULT_LINE, "                    %s %sTest\n" % (TITLE[verb], "BW " if tst == "bw" else "Latency ")]
    lines.append(" Dual-port       : OFF\t\tDevice         : %s\n" % dev)
    lines.append(" Number of qps   : %d\t\tTransport type : IB\n" % p["qps"])
    lines.append(" Connection type : RC\t\tUsing SRQ      : OFF\n")
    lines.append(" PCIe relax order: ON\n")
    lines.append(" ibv_wr* API     : ON\n")
    if role == "client":
        lines.append(" TX depth        : %d\n" % p["tx_depth"])
    if verb == "send" and role == "server":
        lines.append(" RX depth        : %d\n" % DEF_RX_SEND)
    if tst == "bw":
        lines.append(" CQ Moderation   : %d\n" % min(DEF_CQ_MOD, p["iters"]))
    lines.append(" Mtu             : %d[B]\n" % mtu)
    lines.append(" Link type       : %s\n" % ("Ethernet" if link_layer == "Ethernet" else "IB"))
    if gid_index != -1:
        lines.append(" GID index       : %d\n" % gid_index)
    if verb == "read":
        lines.append(" Outstand reads  : %d\n" % MAX_OUT_READ)
    else:
        lines.append(" Max inline data : %d[B]\n" % INLINE.get((verb, tst), 0))
    lines.append(" rdma_cm QPs\t : OFF\n")
    lines.append(" Data ex. method : Ethernet\n")
    lines.append(RESULT_LINE)
    return "".join(lines)


def address_text(side: str, keys: dict, verb: str, i: int) -> str:
    text = " %s address: LID %s QPN %s PSN %s" % (
        side, c_hex(keys["lid"], 4), c_hex(keys["qpns"][i], 6), c_hex(keys["psns"][i], 6))
    if verb == "read":
        text += " OUT %s" % c_hex(MAX_OUT_READ, 4)
    if verb in ("read", "write"):
        text += " RKey %s VAddr %s" % (c_hex(keys["rkey"], 8), c_hex(keys["vaddrs"][i], 16))
    text += "\n"
    if keys["gid_index"] != -1:
        text += " GID: %s\n" % gid_decimal(keys.get("gid") or "")
    return text


def bw_row_text(size: int, iters: int, row: dict, gbits: bool, no_peak: bool) -> str:
    factor = 1.0 if gbits else MIB_PER_GBIT
    avg = row["bw_avg_gbps"] * factor
    peak = 0.0 if no_peak else row["bw_peak_gbps"] * factor
    if gbits and avg < 0.1:
        return REPORT_FMT_EXT % (size, iters, peak, avg, row["msg_rate_mpps"])
    return REPORT_FMT % (size, iters, peak, avg, row["msg_rate_mpps"])


def lat_row_text(size: int, iters: int, row: dict) -> str:
    return REPORT_FMT_LAT % (size, iters, row["t_min"], row["t_max"], row["t_typical"], row["t_avg"], row["t_stdev"],
                             row["p99"], row["p999"])


# --------------------------------------------------------------------------------------------- exchange
def send_line(sock: socket.socket, obj: dict) -> bool:
    try:
        sock.sendall((json.dumps(obj, separators=(",", ":"), sort_keys=True) + "\n").encode())
        return True
    except OSError:
        return False


def recv_line(rfile) -> dict | None:
    try:
        line = rfile.readline()
    except (OSError, socket.timeout):
        return None
    if not line:
        return None
    try:
        return json.loads(line.decode("utf-8"))
    except ValueError:
        return None


def exchange_failed(role: str) -> None:
    err("ethernet_read_keys: Couldn't read remote address\n")
    err(" Unable to read %s socket/rdma_cm\n" % ("from" if role == "client" else "to"))
    err(" Failed to exchange data between server and clients\n")


# ------------------------------------------------------------------------------------------------ a run
class Run:
    """One side of a test once the two hellos are known: decides and prints what perftest would."""

    def __init__(self, p: dict, role: str, view: dict, me: dict, peer: dict, sock, rfile):
        self.p, self.role, self.view, self.me, self.peer = p, role, view, me, peer
        self.sock, self.rfile = sock, rfile
        client, server = (me, peer) if role == "client" else (peer, me)
        cview, sview = (view, peer["view"]) if role == "client" else (peer["view"], view)
        self.client, self.server, self.cview, self.sview = client, server, cview, sview
        self.seed = "%s/%s|%s/%s" % (cview.get("host"), cview.get("hca"), sview.get("host"), sview.get("hca"))
        self.mtu = min(me["mtu"], peer["mtu"])

    # -- the model
    def pairs(self) -> tuple:
        c_v1 = self.client.get("gid_type") == "IB/RoCE v1"
        s_v1 = self.server.get("gid_type") == "IB/RoCE v1"
        c2s = fabric_model.pair_bandwidth(self.cview, self.sview, self.client.get("tclass", 0), self.mtu, c_v1)
        s2c = fabric_model.pair_bandwidth(self.sview, self.cview, self.server.get("tclass", 0), self.mtu, s_v1)
        return c2s, s2c

    def data_pair(self) -> dict:
        c2s, s2c = self.pairs()
        if self.p["tst"] == "lat":
            return min((c2s, s2c), key=lambda pr: (pr["lossless"], pr["gbps"]))
        return s2c if self.p["verb"] == "read" else c2s

    def peer_params(self) -> dict:
        return self.peer.get("params") or {}

    # -- the outcome
    def outcome(self) -> str:
        """'ok', 'gid_incompat', 'rtr', 'traffic', 'exchange1' or 'exchange2' (where this side fails)."""
        mine, theirs = self.me["gid_index"] != -1, self.peer["gid_index"] != -1
        if mine != theirs:
            if mine or self.role == "client":
                return "exchange1"
            return "exchange2"
        if mine:
            g1, g2 = self.me["gid"], self.peer["gid"]
            if fabric_model.gid_is_v4mapped(g1) != fabric_model.gid_is_v4mapped(g2):
                return "gid_incompat"
            if fabric_model.gid_is_zero(g1) or fabric_model.gid_is_zero(g2):
                return "rtr"
            if self.view["link_layer"] != self.peer["view"].get("link_layer"):
                return "traffic"
            if self.view["link_layer"] == "Ethernet" and self.me.get("gid_type") != self.peer.get("gid_type"):
                return "traffic"
        return "ok"

    def run(self) -> int:
        p, role = self.p, self.role
        out(header_text(p, role, self.view["hca"], self.view["link_layer"], self.mtu, self.me["gid_index"]))
        result = self.outcome()
        if result == "exchange1":
            exchange_failed(role)
            return 1
        if result == "gid_incompat":
            err("\n Found Incompatibility issue with GID types.\n")
            err(" Please Try to use a different IP version.\n\n")
            return 1
        if result == "rtr":
            err("Failed to modify QP %d to RTR\n" % self.me["qpns"][0])
            err(" Unable to Connect the HCA's through the link\n")
            return 1
        for i in range(p["qps"]):
            out(address_text("local", self.me, p["verb"], i))
        if result == "exchange2":
            exchange_failed(role)
            return 1
        for i in range(p["qps"]):
            out(address_text("remote", self.peer, p["verb"], i))
        if result == "traffic":
            return self.traffic_failure()
        return self.client_success() if role == "client" else self.server_success()

    # -- failures of the traffic
    def traffic_failure(self) -> int:
        p = self.p
        self.table_head()
        if self.role == "client" or (p["tst"] == "lat" and p["verb"] != "read"):
            time.sleep(RETRY_WAIT)
            err(" Completion with error at %s\n" % self.role)
            err(" Failed status %d: wr_id 0 syndrom 0x%x\n" % (WC_RETRY_EXC_ERR, SYNDROME))
            err("scnt=%d, ccnt=0\n" % p["tx_depth"])
            if p["tst"] == "bw":
                err(" Failed to complete run_iter_bw function successfully\n")
            else:
                err("Test exited with Error\n")
            if self.role == "client":
                fabric_model.apply_counters(sysfs.root(), self.view,
                                            {"sysfs": {"hw_counters/local_ack_timeout_err": 1}})
            return 1
        recv_line(self.rfile)
        if p["tst"] == "lat":
            err("Failed to close connection between server and client\n")
        else:
            exchange_failed(self.role)
        return 1

    def table_head(self) -> None:
        p = self.p
        if p["tst"] == "lat" and self.role == "server" and p["verb"] == "read":
            return
        out(RESULT_LINE)
        if p["tst"] == "bw":
            out(RESULT_FMT_G if p["report_gbits"] else RESULT_FMT)
        else:
            out(RESULT_FMT_LAT)

    # -- the rows
    def rows(self, params: dict, seed: str) -> list:
        pair = self.data_pair()
        outrows = []
        for size in params["sizes"]:
            if params["tst"] == "bw":
                row = fabric_model.bw_at_size(pair, size, params["verb"], params["qps"], seed)
                outrows.append((size, params["iters"] * params["qps"], row))
            else:
                outrows.append((size, params["iters"], fabric_model.latency_at_size(pair, size, params["verb"], seed)))
        return outrows

    def print_rows(self, rows: list, gbits: bool, no_peak: bool) -> None:
        for size, iters, row in rows:
            if self.p["tst"] == "bw":
                out(bw_row_text(size, iters, row, gbits, no_peak))
            else:
                out(lat_row_text(size, iters, row))

    def move_counters(self) -> None:
        """This host's share of what the run moved (the peer moves its own)."""
        c2s, s2c = self.pairs()
        client_params = self.p if self.role == "client" else self.peer_params()
        sizes, iters = client_params.get("sizes", [self.p["size"]]), client_params.get("iters", self.p["iters"])
        qps = client_params.get("qps", 1)
        verb, tst = self.p["verb"], self.p["tst"]
        count = iters * (qps if tst == "bw" else 1)
        messages = [(size, count) for size in sizes]
        flows = []                                   # (pair, sender role)
        if verb == "read":
            flows.append((s2c, "server"))
        else:
            flows.append((c2s, "client"))
            if tst == "lat":
                flows.append((s2c, "server"))
        total = {"sysfs": {}, "ethtool": {}}
        for pair, sender in flows:
            deltas = fabric_model.counter_deltas(pair, messages)
            mine = deltas["sender" if sender == self.role else "receiver"]
            for kind in ("sysfs", "ethtool"):
                for name, n in mine[kind].items():
                    total[kind][name] = total[kind].get(name, 0) + n
        fabric_model.apply_counters(sysfs.root(), self.view, total)

    def client_success(self) -> int:
        p = self.p
        self.table_head()
        rows = self.rows(p, self.seed)
        self.print_rows(rows, p["report_gbits"], p["no_peak"])
        out(RESULT_LINE)
        size, iters, last = rows[-1]
        send_line(self.sock, {"report": {"size": size, "iters": iters, "row": last, "gbits": p["report_gbits"],
                                         "no_peak": p["no_peak"]}})
        bye = recv_line(self.rfile)
        self.move_counters()
        if bye is None:
            err("Failed to close connection between server and client\n")
            return 1
        return 0

    def server_success(self) -> int:
        p = self.p
        self.table_head()
        report = recv_line(self.rfile)
        if report is None or "report" not in report:
            exchange_failed(self.role)
            return 1
        rep = report["report"]
        if p["tst"] == "bw" and p["verb"] != "send":
            # half-duplex write/read server: print_full_bw_report(&rem_bw_rep): the client's numbers, in the
            # client's unit, under this side's own header (capture ib_write_bw-server-rocev2-02)
            row = rep["row"]
            factor = 1.0 if rep.get("gbits") else MIB_PER_GBIT
            avg = row["bw_avg_gbps"] * factor
            peak = 0.0 if rep.get("no_peak") else row["bw_peak_gbps"] * factor
            fmt = REPORT_FMT_EXT if p["report_gbits"] and avg < 0.1 else REPORT_FMT
            out(fmt % (rep["size"], rep["iters"], peak, avg, row["msg_rate_mpps"]))
            out(RESULT_LINE)
        elif p["tst"] == "lat" and p["verb"] == "read":
            out(RESULT_LINE)
        else:
            mine = dict(p)
            mine.update({"sizes": self.peer_params().get("sizes", p["sizes"]),
                         "iters": self.peer_params().get("iters", p["iters"]),
                         "qps": self.peer_params().get("qps", p["qps"])})
            self.print_rows(self.rows(mine, self.seed + "|server"), p["report_gbits"], p["no_peak"])
            out(RESULT_LINE)
        send_line(self.sock, {"bye": True})
        self.move_counters()
        return 0


# --------------------------------------------------------------------------------------------- the sides
def hello(p: dict, role: str, view: dict, me: dict) -> dict:
    user_mtu = p["mtu"]
    mtu = view["active_mtu"]
    if user_mtu:
        if user_mtu in MTU_ENUM:
            if user_mtu > mtu:
                out("Requested mtu is higher than active mtu \nChanging to active mtu - %d\n" % MTU_ENUM.get(mtu, 0))
            else:
                mtu = user_mtu
        else:
            err(" Invalid MTU - %d \n Please choose mtu from {256,512,1024,2048,4096}\n Will run with the port active "
                "mtu - %d\n" % (user_mtu, MTU_ENUM.get(mtu, 0)))
    params = {k: p[k] for k in ("sizes", "iters", "qps", "verb", "tst", "report_gbits", "tclass")}
    return {"role": role, "tool": p["prog"], "view": view, "mtu": mtu, "tclass": p["tclass"], "params": params,
            **{k: me[k] for k in ("gid_index", "gid", "gid_type", "setup_error", "lid", "qpns", "psns", "rkey",
                                  "vaddrs")}}


def socket_failed() -> int:
    err("Unable to open file descriptor for socket connection\n")
    err(" Unable to init the socket connection\n")
    return 1


def serve(p: dict, view: dict) -> int:
    try:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("0.0.0.0", p["port"]))
        lsock.listen(1)
    except OSError:
        out(WAITING)
        err("Couldn't listen to port %d\n" % p["port"])
        return socket_failed()
    out(WAITING)
    lsock.settimeout(float(os.environ.get("SIMHOST_PERFTEST_ACCEPT_TIMEOUT", ACCEPT_TIMEOUT)))
    try:
        conn, _addr = lsock.accept()
    except (socket.timeout, OSError):
        err("server accept: Connection timed out\naccept() failed\n")
        lsock.close()
        return socket_failed()
    lsock.close()
    with conn:
        conn.settimeout(EXCHANGE_TIMEOUT)
        rfile = conn.makefile("rb")
        peer = recv_line(rfile)
        if peer is None or "view" not in peer:
            err("ethernet_read_data: Couldn't read reports\n Unable to read to socket/rdma_cm\n")
            return 1
        me = local_setup(view, p)
        mine = hello(p, "server", view, me)
        send_line(conn, mine)
        return after_hello(p, "server", view, mine, peer, conn, rfile)


def connect(p: dict, view: dict) -> int:
    host, port = p["server"], p["port"]
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        err("%s for %s:%d\n" % (exc.strerror or exc.args[-1], host, port))
        err("Problem in resolving basic address and port\n")
        return socket_failed()
    sock = None
    for family, stype, proto, _name, addr in infos:
        try:
            sock = socket.socket(family, stype, proto)
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect(addr)
            break
        except OSError:
            if sock:
                sock.close()
            sock = None
    if sock is None:
        err("Couldn't connect to %s:%d\n" % (host, port))
        return socket_failed()
    with sock:
        sock.settimeout(EXCHANGE_TIMEOUT)
        rfile = sock.makefile("rb")
        me = local_setup(view, p)
        mine = hello(p, "client", view, me)
        send_line(sock, mine)
        peer = recv_line(rfile)
        if peer is None or "view" not in peer:
            if me["setup_error"]:
                err(" Unable to set up socket connection\n")
                return 1
            err("ethernet_read_data: Couldn't read reports\n Unable to read from socket/rdma_cm\n")
            return 1
        return after_hello(p, "client", view, mine, peer, sock, rfile)


def after_hello(p: dict, role: str, view: dict, mine: dict, peer: dict, sock, rfile) -> int:
    if mine["setup_error"]:
        err(" Unable to set up socket connection\n")
        return 1
    if peer.get("setup_error"):
        out(header_text(p, role, view["hca"], view["link_layer"], min(mine["mtu"], peer["mtu"]), mine["gid_index"]))
        exchange_failed(role)
        return 1
    return Run(p, role, view, mine, peer, sock, rfile).run()


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0]) if argv else "ib_write_bw"
    if prog not in TOOLS:
        prog = "ib_write_bw"
    kernelfs.settle()
    try:
        p = parse_args(prog, argv[1:])
    except Usage as exc:
        (out if exc.stream == "out" else err)(exc.text)
        return exc.code
    if p["no_peak"]:
        out(NO_PEAK_WARNING)
    dev = find_device(p)
    if dev is None:
        err(" Unable to find the Infiniband/RoCE device\n")
        return 1
    view = fabric_model.port_view(sysfs.root(), dev, p["ib_port"])
    if not check_link(view, p):
        err(" Couldn't set the link layer\n")
        err(" Couldn't get context for the device\n")
        return 1
    if p["server"] is None:
        return serve(p, view)
    return connect(p, view)
