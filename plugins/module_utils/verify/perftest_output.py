# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What perftest (``ib_write_bw``, ``ib_read_lat``, ...) prints: its output parsed, its failures classified.

Pure Python, no Ansible imports. The formats come from linux-rdma/perftest ``src/perftest_parameters.h`` and
``perftest_parameters.c`` / ``perftest_communication.c`` / ``perftest_resources.c`` and are checked against the real
captures in ``tests/fixtures/real/perftest-nccl-tests`` (upstream 4.x to 25.x, and a vendor fork):

* banner: the test title centred on its own line (``RDMA_Write BW Test``, ``Send Latency Test``...), between two
  ``RESULT_LINE`` dashed lines; the parameters follow as ``Key : value`` pairs, one or two per line, with spaces or
  real TABs between them (``ctx_print_test_info``);
* addresses: ``BASIC_ADDR_FMT`` `` %s address: LID %#04x QPN %#06x PSN %#06x`` + ``READ_FMT`` `` OUT %#04x`` +
  ``RDMA_FMT`` `` RKey %#08x VAddr %#016Lx`` (+ `` SRQN``), then `` GID: `` with 16 bytes printed ``%02d`` (decimal);
* the table: ``RESULT_FMT`` / ``RESULT_FMT_G`` (``#bytes #iterations BW peak[MB/sec] BW average[MB/sec]
  MsgRate[Mpps]``, ``MiB/sec`` since 24.07, ``Gb/sec`` with ``--report_gbits``; per-port, ``#sl`` and ``CPU_Util``
  variants), ``RESULT_FMT_LAT`` (``t_min`` ... ``99.9% percentile``) and ``RESULT_FMT_LAT_DUR`` (``t_avg`` only); the
  rows are ``REPORT_FMT*`` printf lines, read here by position under the column names the header printed.

Units: perftest computes ``MB/sec`` as bytes / 0x100000 (``format_factor = (report_fmt == MBS) ? 0x100000 :
125000000`` in ``print_report_bw``), so its ``MB/sec`` was always MiB/s and 24.07 only renamed the label. Rule used
here: ``MB/sec`` and ``MiB/sec`` are both 2^20 bytes/s (x 8 x 2^20 / 10^9 to Gb/s); ``Gb/sec`` is 10^9 bit/s (kept).
The half-duplex server of ``ib_write_bw``/``ib_read_bw`` prints the client's numbers under its own header
(``print_full_bw_report(&user_param, &rem_bw_rep, NULL)``), so those numbers are in the client's unit: the parser
checks each table against its message rate (unit-free: bw = msg rate x bytes) and uses the unit that fits
(``values_unit``), with a warning when it differs from the printed one.

Running the tools (argv, process, timeout) and the module's verdict are in ``perftest_run``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

# Tools whose server side prints no result table (read_lat: the client reads the server's memory; the server prints
# banner, header and addresses, then one dashed line and exits 0: see ib_read_lat-server-ib-01.txt).
SERVER_PRINTS_NO_TABLE = ("ib_read_lat",)
_NO_TABLE_TITLES = ("RDMA_Read Latency Test",)

MIB_GBPS = 8.0 * 1048576 / 1e9      # 1 MiB/s (perftest's MB/sec and MiB/sec) in Gb/s
_UNIT_GBPS = {"Gb/sec": 1.0, "MB/sec": MIB_GBPS, "MiB/sec": MIB_GBPS}

_DASHES = re.compile(r"^\s*-{20,}\s*$")
_BANNER = re.compile(r"^\s*(\S[^:]*?\bTest)\s*$")
_WAITING = re.compile(r"\*\s*Waiting for client to connect\.\.\.\s*\*")
_STARS = re.compile(r"^\s*\*+\s*$")
_ADDR = re.compile(r"^\s*(local|remote) address:\s+LID\s+(\S+)\s+QPN\s+(\S+)\s+PSN\s+(\S+)"
                   r"(?:\s+OUT\s+(\S+))?(?:\s+RKey\s+(\S+)\s+VAddr\s+(\S+))?(?:\s+(?:SRQN|XRC SRQN|DC SRQN)\s+(\S+))?")
_GID = re.compile(r"^\s*(GID|MGID):\s*((?:\d+|[0-9a-fA-F]+)(?::(?:\d+|[0-9a-fA-F]+)){15})\s*$")
_PAIR = re.compile(r"([^:\t]*?[A-Za-z*][^:\t]*?)\s*:\s*(\S+)")
_TABLE_HEAD = re.compile(r"^\s*#bytes\b")
_COLUMN = re.compile(r"#\w+|BW\s+(?:peak|average|Port\d)\[[^\]]+\]|MsgRate(?:\s+Port\d)?\[[^\]]+\]|t_\w+\[usec\]"
                     r"|\d+(?:\.\d+)?%\s+percentile\[usec\]|CPU_Util\[%+\]")
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
_ROW = re.compile(r"^\s*\d+\s+\d+(?:\s+(?:%s))+\s*$" % _NUM, re.I)
_SECTION = re.compile(r"^\s*(Local|Remote) results:\s*$")

_WARNING_PATTERNS = [re.compile(p, re.I) for p in (
    r"\bwarning\b",
    r"Conflicting CPU frequency values detected",
    r"Test integrity may be harmed",
    r"Requested mtu is higher than active mtu",
    r"Changing to (?:active mtu|this MTU|0)\b",
    r"Changing msg size",
    r"inline size set to",
    r"Disabling it",
    r"Max msg size in (?:UD|RawEth) is MTU",
    r"Specified PKey Index",
    r"Min msg size for RawEth",
)]

# perftest's own failure lines (linux-rdma/perftest sources; stderr), most specific first. Each: kind, patterns, cause,
# fix. cause/fix are %-formatted with the named groups of the first pattern that matched (d: dict with defaults).
_FAILURES = [
    ("bad_arguments", [r"Parser function exited with Error",
                       r"(?P<what>\S.*) should be between (?P<lo>-?\d+) and (?P<hi>\d+)",
                       r"Invalid Connection type", r"unrecognized option|invalid option"],
     "perftest rejected its command line (%(what)s)",
     "run the tool with --help on this host to see the options its version takes; an older perftest may not know an "
     "option passed in extra_args"),
    ("device_not_found", [r"IB device (?P<device>\S+) not found"],
     "HCA %(device)s does not exist on this host (the name is wrong or the device was renamed)",
     "list the HCAs with ibv_devices or 'rdma link show' and use one of those names (for example mlx5_0 or a "
     "predictable name such as rocep1s0f0)"),
    ("no_device", [r"Did not detect devices", r"No IB devices found", r"If device exists, check if driver is up",
                   r"Unable to find the Infiniband/RoCE device"],
     "no RDMA device is visible on this host: the HCA driver (mlx5_core/mlx5_ib or the vendor's) is not loaded, the "
     "device is not passed into the container (/dev/infiniband), or the HCA is missing",
     "check ibv_devices and 'rdma link show'; load the driver (modprobe mlx5_ib) or install the RDMA stack "
     "(hpcnet.rdma.ofed_stack); in a container pass /dev/infiniband and the RDMA device plugin's resource"),
    ("port_query_failed", [r"Unable to query port (?P<port>\d+)? ?attributes", r"Unable to query port\b"],
     "the HCA has no port %(port)s (ib_port is wrong) or the driver cannot answer port queries",
     "check the HCA's ports with ibstat or 'rdma link show' and set ib_port to an existing port (1 for the first)"),
    ("port_not_active", [r"Port number (?P<port>\d+) state is (?P<state>[\w ]+?)\s*$"],
     "port %(port)s of the HCA is %(state)s, not ACTIVE: the cable or switch port is down, or (InfiniBand) no subnet "
     "manager has brought the port from INIT/ARMED to ACTIVE",
     "check the link with ibstat (State, Physical state) and the cable and switch port; on InfiniBand check that an SM "
     "runs (sminfo) and sees the port"),
    ("link_layer_unknown", [r"Link layer on port (?P<port>\d+) is Unknown", r"Unable to determine link layer"],
     "the port's link layer is neither InfiniBand nor Ethernet (a port that is not configured or a driver fault)",
     "check the port with ibv_devinfo (link_layer) and the adapter's link type (mlxconfig LINK_TYPE_P1)"),
    ("device_open_failed", [r"Couldn't get context for the device"],
     "the HCA exists but perftest could not use it (opening the device or checking its port and MTU failed)",
     "check the permissions of /dev/infiniband/uverbs*, the memlock limit (ulimit -l) and the port state (ibstat)"),
    ("port_in_use", [r"Couldn't listen to port (?P<port>\d+)", r"rdma_bind_addr failed"],
     "the server could not listen on TCP port %(port)s: another process (often a perftest server left behind) "
     "already uses it",
     "stop the process holding the port (ss -ltnp 'sport = :%(port)s') or choose another port (-p, the port option)"),
    ("server_not_listening", [r"Couldn't connect to (?P<addr>\S+?):(?P<port>\d+)\s*$"],
     "no perftest server listens at %(addr)s port %(port)s: the server side was not started (or not yet), it failed, "
     "it already exited, or a firewall blocks the out-of-band TCP connection",
     "start the server side first on %(addr)s with the same test and port, check its output, and allow TCP port "
     "%(port)s between the hosts' management addresses"),
    ("rdma_cm_failed", [r"rdma_resolve_addr failed", r"rdma_resolve_route failed", r"Received \d+ times ADDR_ERROR",
                        r"unexpected CM event", r"Unexpected CM event", r"bad event waiting for connect request",
                        r"Unable to perform rdma_client function", r"Unable to connect \(retries = \d+\)",
                        r"rdma_listen failed", r"Function rdma_(?:connect|accept) failed"],
     "rdma_cm could not resolve or connect to the peer (-R): the address is not reachable over the RDMA port's "
     "IP interface (no IP on the RoCE netdev, no route, or the peer's rdma_cm listener is gone)",
     "ping the peer over the RDMA interface's IP, check 'rdma link show' (netdev) and ip route; or run without -R "
     "(out-of-band TCP exchange)"),
    ("gid_type_mismatch", [r"Found Incompatibility issue with GID types", r"Please Try to use a different IP version"],
     "the two sides use different GID types (an IPv4-mapped GID on one side, an IPv6 GID on the other)",
     "use GID indexes of the same kind on both hosts (show_gids: the RoCE v2 entry with the IPv4 address)"),
    ("qp_connect_failed", [r"Failed to modify QP (?P<qpn>\d+ )?to (?P<state>RTR|RTS|INIT)",
                           r"Unable to Connect the HCA's through the link"],
     "the queue pair could not move to %(state)s, so the HCAs cannot reach each other: on RoCE a wrong GID index "
     "(an empty entry, a RoCE v1 or link-local GID, a GID the peer cannot route to); on InfiniBand no path (LID 0 "
     "because no SM configured the port, a port that requires a GRH, or a P_Key mismatch)",
     "on RoCE pick the RoCE v2 GID with the interface's IPv4 address (show_gids; hpcnet.rdma.rdma_facts gid_index) "
     "on both sides; on InfiniBand check the LIDs and the SM (ibstat, sminfo) and the partition"),
    ("create_qp_failed", [r"Unable to create (?:Masked Atomic )?QP", r"Failed to create QP",
                          r"Couldn't create IB resources", r"Couldn't get device attributes", r"Couldn't create CQ",
                          r"Couldn't allocate PD", r"Couldn't allocate MR",
                          r"Couldn't register MR|Couldn't create a rec\w+ CQ",
                          r"Unable to create the resources needed by comm struct"],
     "the HCA refused to create the test's resources (QP, CQ, PD or memory registration): the user-space provider "
     "(rdma-core/libmlx5) does not match the kernel driver, the memlock limit is too low, or the HCA is out of "
     "resources",
     "check ulimit -l (unlimited for RDMA), that rdma-core and the kernel driver come from the same stack (MOFED "
     "user space on an inbox kernel fails this way), and dmesg for the driver's reason"),
    ("completion_error", [r"Completion with error at (?P<side>client|server)",
                          r"Failed status (?P<status>\d+): wr_id \d+ syndrom (?P<syndrome>0x[0-9a-fA-F]+)"],
     "work requests completed with an error (status %(status)s%(status_name)s): the traffic stopped flowing between "
     "the HCAs (transport retries exhausted: packet loss, a link that went down, a peer that went away)",
     "check the port counters (symbol_error, link_downed, port_rcv_errors; RoCE discards and pause frames) and, on "
     "RoCE, that PFC/ECN are on for the traffic's priority end to end"),
    ("exchange_failed", [r"Failed to exchange data between server and clients?",
                         r"Unable to (?:read|write) (?:to|from) socket/rd(?:ma|am)_cm",
                         r"ethernet_read_keys: Couldn't read remote address",
                         r"Couldn't read remote address", r"ethernet_read_data: Couldn't read reports",
                         r"Couldn't send (?:local address|reports)",
                         r"Failed to exchange .* between server and client"],
     "the out-of-band exchange with the other side broke: the peer closed the connection (it failed first, see its "
     "own output) or the two sides run incompatible perftest versions or options",
     "read the other side's output for its own failure; run the same perftest version with the same test options "
     "(-s, -q, -R, --report_gbits) on both hosts"),
    ("cpu_frequency", [r"Can't produce a report"],
     "perftest could not read a stable CPU frequency (frequency scaling), so it cannot turn cycles into time",
     "pass -F (the module always does) or set the CPU governor to performance"),
    ("below_limit", [r"Error: BW result is below bw limit", r"Error: Msg rate\s+is below msg_rate limit"],
     "the result is below the limit given with --limit_bw / --limit_msgrate",
     "check the port rate and the path; lower the limit if it is wrong"),
    ("socket_failed", [r"Unable to init the socket connection", r"Unable to open file descriptor for socket connection",
                       r"accept\(\) failed", r"Problem in resolving basic add?ress and port"],
     "the out-of-band TCP connection between the two sides could not be set up",
     "check that the server address resolves and is reachable, and that the TCP port is free on the server"),
]
_FAILURES = [(kind, [re.compile(p) for p in pats], cause, fix) for kind, pats, cause, fix in _FAILURES]
_ERROR_LINE = [p for _k, pats, _c, _f in _FAILURES for p in pats]

# ibv_wc_status numbers (libibverbs verbs.h) for the completion_error cause.
_WC_STATUS = {1: "IBV_WC_LOC_LEN_ERR", 2: "IBV_WC_LOC_QP_OP_ERR", 4: "IBV_WC_LOC_PROT_ERR", 5: "IBV_WC_WR_FLUSH_ERR",
              9: "IBV_WC_REM_INV_REQ_ERR", 10: "IBV_WC_REM_ACCESS_ERR", 11: "IBV_WC_REM_OP_ERR",
              12: "IBV_WC_RETRY_EXC_ERR", 13: "IBV_WC_RNR_RETRY_EXC_ERR"}


# ---------------------------------------------------------------------------------------------------------- parsing
def _snake(key):
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def _int(text, base=10):
    try:
        return int(text, base)
    except (TypeError, ValueError):
        return None


def _hexint(text):
    """``0x43a``, ``0000`` (LID printed ``%#04x`` of 0 is ``0000``) -> int."""
    return _int(text, 16)


def _float(text):
    try:
        val = float(text)
    except (TypeError, ValueError):
        return None
    return val if math.isfinite(val) else None


def _header_value(key, raw):
    """One ``Key : value`` of perftest's test info -> (snake_case key, typed value)."""
    unit = re.match(r"^(-?\d+(?:\.\d+)?)\[(\w+)\]$", raw)
    if raw in ("ON", "OFF"):
        value = raw == "ON"
    elif unit:
        value = _int(unit.group(1)) if "." not in unit.group(1) else float(unit.group(1))
        if unit.group(2) not in ("B",):
            key = "%s_%s" % (key, unit.group(2).lower())
    elif re.match(r"^-?\d+$", raw):
        value = int(raw)
    else:
        value = raw
    renames = {"number_of_qps": "qps", "transport_type": "transport", "rdma_cm_qps": "rdma_cm",
               "data_ex_method": "data_exchange", "using_srq": "srq", "max_inline_data": "max_inline_bytes",
               "outstand_reads": "outstanding_reads"}
    return renames.get(key, key), value


def _gid(text):
    """perftest's `` GID: `` 16 bytes ``%02d`` (decimal; hex in forks) -> the sysfs form ``0000:...:ffff:0a00:000b``."""
    parts = text.split(":")
    octets = [_int(p) for p in parts]
    if any(o is None or o > 255 for o in octets):
        octets = [_int(p, 16) for p in parts]
        if any(o is None or o > 255 for o in octets):
            return None, None
    gid = ":".join("%02x%02x" % (octets[i], octets[i + 1]) for i in range(0, 16, 2))
    ipv4 = None
    if octets[:10] == [0] * 10 and octets[10:12] == [255, 255]:
        ipv4 = "%d.%d.%d.%d" % tuple(octets[12:])
    return gid, ipv4


def _column_key(name):
    """Column name as perftest prints it -> (result row key, bandwidth unit printed in the name or None)."""
    n = re.sub(r"\s+", " ", name)
    fixed = {"#bytes": "bytes", "#iterations": "iterations", "#sl": "sl", "MsgRate[Mpps]": "msg_rate_mpps",
             "t_min[usec]": "t_min_us", "t_max[usec]": "t_max_us", "t_typical[usec]": "t_typical_us",
             "t_avg[usec]": "t_avg_us", "t_stdev[usec]": "t_stdev_us", "99% percentile[usec]": "p99_us",
             "99.9% percentile[usec]": "p99_9_us"}
    if n in fixed:
        return fixed[n], None
    m = re.match(r"^BW (peak|average|Port(\d))\[([^\]]+)\]$", n)
    if m:
        base = {"peak": "bw_peak", "average": "bw_avg"}.get(m.group(1), "bw_port%s" % m.group(2))
        return base, m.group(3)
    m = re.match(r"^MsgRate Port(\d)\[Mpps\]$", n)
    if m:
        return "msg_rate_port%s_mpps" % m.group(1), None
    if n.startswith("CPU_Util"):
        return "cpu_util_pct", None
    m = re.match(r"^(\d+(?:\.\d+)?)% percentile\[usec\]$", n)
    if m:
        return "p%s_us" % m.group(1).replace(".", "_"), None
    return _snake(n), None


def _row(tokens, columns):
    row = {}
    for (key, _unit), tok in zip(columns, tokens):
        # bandwidth columns (unit set) stay raw here, in the printed unit; _finish_table adds the Gb/s values
        row[key] = _int(tok) if key in ("bytes", "iterations", "sl") else _float(tok)
    return row


def _is_warning(line):
    return any(p.search(line) for p in _WARNING_PATTERNS)


def _is_error(line):
    return any(p.search(line) for p in _ERROR_LINE)


def _fit_unit(rows, printed):
    """The unit the bandwidth numbers are really in: the printed one unless the message rate says otherwise."""
    probe = [r for r in rows if r.get("bw_avg") and r.get("msg_rate_mpps") and r.get("bytes")]
    if not probe or printed not in _UNIT_GBPS:
        return printed
    best = max(probe, key=lambda r: r["bw_avg"] * _UNIT_GBPS[printed])
    implied = best["msg_rate_mpps"] * 1e6 * best["bytes"] * 8 / 1e9     # Gb/s: bw = msg rate x message size
    if implied <= 0:
        return printed

    def fits(unit, tol):
        return abs(best["bw_avg"] * _UNIT_GBPS[unit] / implied - 1.0) <= tol

    if fits(printed, 0.5):
        return printed
    for unit in ("Gb/sec", "MiB/sec"):
        if _UNIT_GBPS[unit] != _UNIT_GBPS[printed] and fits(unit, 0.1):
            return unit
    return printed


def _finish_table(table, warnings):
    """Convert a table's bandwidth columns to Gb/s: ``bw_avg`` (raw) -> ``bw_avg_gbps`` etc."""
    printed = table["unit"]
    values_unit = _fit_unit(table["rows"], printed)
    if values_unit != printed:
        warnings.append("the table is headed %s but its numbers match the message rate only in %s: a half-duplex "
                        "server prints the client's report in the client's unit (run both sides with the same "
                        "--report_gbits setting)" % (printed, values_unit))
    factor = _UNIT_GBPS.get(values_unit)
    rows = []
    for raw in table["rows"]:
        row = {}
        for key, val in raw.items():
            row[key] = val
            if key in table["bw_keys"]:
                row[key + "_gbps"] = None if (val is None or factor is None) else round(val * factor, 6)
        rows.append(row)
    table["rows"] = rows
    table["values_unit"] = values_unit
    return table


def parse_output(text):
    """Any perftest tool's output (client or server, bw or lat) -> dict; see the module's RETURN for the keys.

    Lines outside the structure are sorted into ``warnings`` (perftest's notices), ``errors`` (perftest's failure
    lines, see :func:`classify_failure`) and ``extra_lines`` (CUDA initialisation, vendor-fork lines...).
    """
    out = {"test": None, "kind": None, "bidirectional": False, "role": None, "header": {}, "local": [], "remote": [],
           "unit": None, "values_unit": None, "columns": [], "results": [], "local_results": [], "remote_results": [],
           "warnings": [], "errors": [], "extra_lines": []}
    tables = []
    table = None
    section = "results"
    in_header = False
    last_addr = None
    for raw_line in (text or "").splitlines():
        line = raw_line.rstrip("\r\n")
        stripped = line.strip()
        if not stripped:
            continue
        if _DASHES.match(line):
            in_header = False
            table = None
            last_addr = None
            continue
        if _WAITING.search(line):
            out["role"] = "server"
            continue
        if _STARS.match(line):
            continue
        banner = _BANNER.match(line)
        if banner and out["test"] is None and not _is_error(line) and not _is_warning(line):
            title = re.sub(r"\s+", " ", banner.group(1))
            out["test"], out["kind"], out["bidirectional"] = title, "lat" if "Latency" in title else "bw", \
                "Bidirectional" in title
            in_header = True
            continue
        addr = _ADDR.match(line)
        if addr:
            side, lid, qpn, psn, outs, rkey, vaddr, srqn = addr.groups()
            entry = {"lid": _hexint(lid), "qpn": _hexint(qpn), "psn": _hexint(psn), "out_reads": _hexint(outs),
                     "rkey": rkey, "vaddr": vaddr, "srqn": srqn, "gid": None, "gid_ipv4": None, "gid_printed": None}
            out[side].append(entry)
            last_addr = entry
            in_header = False
            continue
        gid = _GID.match(line)
        if gid and last_addr is not None:
            last_addr["gid"], last_addr["gid_ipv4"] = _gid(gid.group(2))
            last_addr["gid_printed"] = gid.group(2)
            continue
        sec = _SECTION.match(line)
        if sec:
            section = "%s_results" % sec.group(1).lower()
            continue
        if _TABLE_HEAD.match(line):
            names = _COLUMN.findall(line)
            columns = [_column_key(n) for n in names]
            units = [u for _k, u in columns if u]
            table = {"section": section, "names": [re.sub(r"\s+", " ", n) for n in names], "columns": columns,
                     "unit": units[0] if units else None, "bw_keys": [k for k, u in columns if u], "rows": []}
            tables.append(table)
            if out["kind"] is None:
                out["kind"] = "lat" if any(k.startswith("t_") for k, _u in columns) else "bw"
            in_header = False
            continue
        if table is not None and _ROW.match(line):
            table["rows"].append(_row(line.split(), table["columns"]))
            continue
        if _is_error(line):
            out["errors"].append(stripped)
            continue
        if _is_warning(line):
            if stripped not in out["warnings"]:
                out["warnings"].append(stripped)
            continue
        if in_header and ":" in line:
            pairs = _PAIR.findall(line)
            if pairs:
                for key, val in pairs:
                    k, v = _header_value(_snake(key), val)
                    out["header"][k] = v
                continue
        out["extra_lines"].append(stripped)
    hdr = out["header"]
    if out["test"] is not None:
        hdr.setdefault("gid_index", None)      # printed only when a GID is used (RoCE, or -x on IB)
    for table in tables:
        _finish_table(table, out["warnings"])
        out[table["section"]].extend(table["rows"])
        if out["unit"] is None:
            out["unit"], out["values_unit"], out["columns"] = table["unit"], table["values_unit"], table["names"]
    return out


# ---------------------------------------------------------------------------------------------------------- failures
def matching_lines(lines, patterns, groups, key=None):
    """The ``lines`` any of ``patterns`` matches, in order, once each; the named groups of the matches go into
    ``groups`` (the first value of a name wins; ``key`` maps a group's name to its key, for a pattern table that
    spells one field twice). The one matcher of the failure tables of perftest and of the launchers."""
    matched = []
    for ln in lines:
        for pat in patterns:
            m = pat.search(ln)
            if m:
                if ln not in matched:
                    matched.append(ln)
                for name, value in m.groupdict().items():
                    name = key(name) if key else name
                    if value is not None and name not in groups:
                        groups[name] = value.strip()
    return matched


class _Defaults(dict):
    def __missing__(self, key):
        return {"port": "?", "state": "?", "addr": "the server", "device": "?", "status": "?", "status_name": "",
                "what": "see the last lines", "qpn": "", "side": "?"}.get(key, "?")


def _server_waited(text):
    return bool(_WAITING.search(text or "")) and not _ADDR.search(text or "")


def classify_failure(text, rc, timed_out=False):
    """perftest's output and exit code -> ``{kind, cause, fix, evidence}`` or None.

    ``rc`` None (a saved log) classifies by the text alone; rc 0 without a timeout is a success (None). A process
    killed by the module's timeout is ``timeout`` unless perftest printed a failure of its own first.
    """
    if rc == 0 and not timed_out:
        return None
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for kind, patterns, cause, fix in _FAILURES:
        groups = _Defaults()
        evidence = matching_lines(lines, patterns, groups)
        if evidence:
            if kind == "completion_error" and _int(groups.get("status")) in _WC_STATUS:
                groups["status_name"] = " " + _WC_STATUS[_int(groups["status"])]
            if kind == "qp_connect_failed" and "state" not in groups:
                groups["state"] = "RTR/RTS"
            return {"kind": kind, "cause": cause % groups, "fix": fix % groups, "evidence": evidence[:5]}
    if timed_out:
        if _server_waited(text):
            return {"kind": "timeout", "evidence": [],
                    "cause": "the server waited for a client until the timeout: no client connected (the client "
                             "failed or never ran, or it connected to another address or port)",
                    "fix": "run the client against this host's management address and the same port; read the "
                           "client's output for its own failure"}
        return {"kind": "timeout", "evidence": [],
                "cause": "perftest did not finish before the timeout and was killed: the peer stopped answering or "
                         "the traffic stalled (for example RoCE losing packets without PFC, with retries timing out)",
                "fix": "raise the timeout for long runs (duration, iterations, many sizes); check the other side's "
                       "output and the port counters"}
    if rc is None:
        return None
    if rc < 0:
        return {"kind": "killed", "evidence": [],
                "cause": "perftest was killed by signal %d" % -rc,
                "fix": "check what killed it (OOM killer in dmesg, a job scheduler's limit)"}
    return {"kind": "exit_code", "evidence": [],
            "cause": "perftest exited with code %s without a failure line this module knows" % rc,
            "fix": "read the last lines of its output"}


# ---------------------------------------------------------------------------------------------------------- summary
def summary(parsed):
    """The largest-message row's numbers (the last such row when several share the size), {} without rows."""
    rows = (parsed or {}).get("results") or []
    if not rows:
        return {}
    best = None
    for row in rows:
        if best is None or (row.get("bytes") or 0) >= (best.get("bytes") or 0):
            best = row
    if parsed.get("kind") == "lat" or any(k.startswith("t_") for k in best):
        keys = ("bytes", "t_typical_us", "t_avg_us", "p99_us")
    else:
        keys = ("bytes", "bw_avg_gbps", "bw_peak_gbps", "msg_rate_mpps")
    return dict((k, best.get(k)) for k in keys)


def server_prints_no_table(test=None, parsed=None):
    """True for the server side of a test whose server prints no table (ib_read_lat)."""
    if test in SERVER_PRINTS_NO_TABLE:
        return True
    return bool(parsed and parsed.get("role") == "server" and parsed.get("test") in _NO_TABLE_TITLES)
