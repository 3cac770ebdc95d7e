"""Stand-in for nccl-tests' ``all_reduce_perf``, ``all_gather_perf`` and ``alltoall_perf`` on a simulated host.

The real OpenMPI ``mpirun`` starts one Python process per rank (``python3-mpi4py``). Each rank does what NCCL 2.25
does on that host, from what the host shows:

* reads the NCCL configuration as NCCL's ``initEnv`` does: the environment first, then ``$NCCL_CONF_FILE`` (else
  ``~/.nccl.conf``), then ``/etc/nccl.conf`` (``KEY=VALUE`` lines, ``#`` comments; a file never overrides a variable
  that is already set);
* reads the simulated sysfs tree (``$SIMHOST_SYSFS_ROOT``, default ``/run/simhost/sys``): ports (state, link layer,
  rate, LID, GID table, the RoCE netdev's MTU), ``module/nvidia`` (the GPU driver marker) and
  ``module/nvidia_peermem/version`` (the file NCCL's ``ncclIbGdrSupport`` checks);
* chooses as ``transport/net_ib.cc`` does: the ACTIVE IB/RoCE ports that ``NCCL_IB_HCA`` keeps (``^`` excludes, ``=``
  matches names exactly, ``:port`` picks a port; unset = every ACTIVE port), the GID index (``NCCL_IB_GID_INDEX`` as
  given, else the RoCE v2 IPv4 GID that ``ncclIbGetGidIndex`` picks), the socket transport when no port is usable or
  ``NCCL_IB_DISABLE=1``, GPUDirect RDMA (``/GDRDMA``) only with nvidia_peermem loaded on a GPU host;
* prints NCCL's ``NCCL_DEBUG`` lines (``NCCL_DEBUG_SUBSYS`` honoured, default INIT,BOOTSTRAP,ENV) and rank 0
  nccl-tests' header, rank lines, result table and footer, in the formats of the real captures in
  ``tests/fixtures/real/perftest-nccl-tests`` and ``tests/fixtures/real/nccl-logs``.

MPI is used only where nccl-tests uses it: gathering the ranks' host names and state, broadcasting the unique id,
barriers. Everything else is pure functions (:func:`rank_state`, :func:`job_phases`, :func:`render_job`), so the unit
tests render a whole job without MPI. The numbers (bandwidth, time) come from the declared model in
``simhost/fabric_model.py`` (section "nccl-tests"); see the README, "nccl-tests stand-in". Stdlib only (+ mpi4py).
"""

from __future__ import annotations

import getopt
import hashlib
import ipaddress
import os
import socket
import struct
import sys
from pathlib import Path

from .. import fabric_model, sysfs
from ._common import getopt_message

# ------------------------------------------------------------------------------------------------ what is emulated
NCCL_VERSION = "2.25.1"             # the banner of the real 2.25.1 captures (all_gather_perf-multinode-01, fail-nccl-info-01)
NCCL_CUDA = "12.8"
CUDA_DRIVER_VERSION = 12040         # CUDA 12.4: what the 550 driver of the GPU marker supports
GPU_NAME = "NVIDIA H100 80GB HBM3"
GPU_BUS_IDS = [0x19, 0x3a, 0x4c, 0x5c, 0x9a, 0xba, 0xca, 0xda]     # PCI bus of cudaDev 0..7 (all_reduce_perf-multinode-01)
GPU_MEM_BYTES = 85029158912         # cudaDeviceProp.totalGlobalMem of an H100 80GB HBM3
TESTS = {
    # name: (source file in nccl-tests' unwind lines, operation column, bus bandwidth factor, per-rank count divisor)
    "all_reduce_perf": {"file": "all_reduce.cu", "reduce": True, "per_rank": False, "inplace_checked": True},
    "all_gather_perf": {"file": "all_gather.cu", "reduce": False, "per_rank": True, "inplace_checked": True},
    "alltoall_perf": {"file": "alltoall.cu", "reduce": False, "per_rank": True, "inplace_checked": False},
}
TYPES = {"int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8, "uint64": 8,
         "half": 2, "float16": 2, "float": 4, "float32": 4, "double": 8, "float64": 8, "bfloat16": 2}
TYPE_NAMES = {"char": "int8", "int": "int32", "float16": "half", "float32": "float", "float64": "double"}
OPS = ("sum", "prod", "max", "min", "avg")
NCCL_RESULT = {
    2: "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    3: "internal error - please report this issue to the NCCL developers",
    6: "remote process exited or there was a network error",
}
TEST_NCCL_ERROR = 3                 # testResult_t testNcclError: nccl-tests' exit status after "Test NCCL failure"
# nccl-tests' unwind after an NCCL failure in the first collective (all_reduce_perf-fail-nccl-01: common.cu:392 is
# NCCLCHECK(ncclCommGetAsyncError) in testStreamSynchronize); the same line numbers are used for the other tests
FAIL_AT = ("common.cu", 392)
FAIL_UNWIND = [("common.cu", 590), (None, 90), ("common.cu", 623), ("common.cu", 1078), ("common.cu", 891)]
DEBUG_LEVELS = {"VERSION": 1, "WARN": 2, "INFO": 3, "ABORT": 4, "TRACE": 5}
SUBSYS = ("INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "CALL", "PROXY", "NVLS", "BOOTSTRAP",
          "REG", "PROFILE", "RAS")
DEFAULT_SUBSYS = {"INIT", "BOOTSTRAP", "ENV"}


class UsageError(Exception):
    """A command line nccl-tests refuses: ``message`` goes to ``stream``, the process exits with ``code``."""

    def __init__(self, message: str, code: int, stream: str = "stdout", stderr: str = ""):
        super().__init__(message)
        self.message, self.code, self.stream, self.stderr = message, code, stream, stderr


# ------------------------------------------------------------------------------------------------ command line
LONG_OPTS = ["nthreads=", "ngpus=", "minbytes=", "maxbytes=", "stepbytes=", "stepfactor=", "iters=", "agg_iters=",
             "warmup_iters=", "parallel_init=", "check=", "op=", "datatype=", "root=", "blocking=", "stream_null=",
             "timeout=", "cudagraph=", "report_cputime=", "average=", "output_file=", "help"]
SHORT_OPTS = "t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:hG:C:a:F:"
LONG_TO_SHORT = {"nthreads": "t", "ngpus": "g", "minbytes": "b", "maxbytes": "e", "stepbytes": "i", "stepfactor": "f",
                 "iters": "n", "agg_iters": "m", "warmup_iters": "w", "parallel_init": "p", "check": "c", "op": "o",
                 "datatype": "d", "root": "r", "blocking": "z", "stream_null": "y", "timeout": "T", "cudagraph": "G",
                 "report_cputime": "C", "average": "a", "output_file": "F", "help": "h"}
USAGE = ("USAGE: %s \n\t[-t,--nthreads <num threads>] \n\t[-g,--ngpus <gpus per thread>] \n\t"
         "[-b,--minbytes <min size in bytes>] \n\t[-e,--maxbytes <max size in bytes>] \n\t"
         "[-i,--stepbytes <increment size>] \n\t[-f,--stepfactor <increment factor>] \n\t"
         "[-n,--iters <iteration count>] \n\t[-m,--agg_iters <aggregated iteration count>] \n\t"
         "[-w,--warmup_iters <warmup iteration count>] \n\t[-p,--parallel_init <0/1>] \n\t"
         "[-c,--check <check iteration count>] \n\t[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t"
         "[-d,--datatype <nccltype/all>] \n\t[-r,--root <root>] \n\t[-z,--blocking <0/1>] \n\t"
         "[-y,--stream_null <0/1>] \n\t[-T,--timeout <time in seconds>] \n\t[-G,--cudagraph <num graph launches>] \n\t"
         "[-C,--report_cputime <0/1>] \n\t[-a,--average <0/1/2/3> report average iteration time "
         "<0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t[-h,--help]\n")


def parse_size(text: str) -> int:
    """nccl-tests' ``parsesize``: a number with an optional K/M/G suffix (powers of 1024); -1 when invalid."""
    text = (text or "").strip()
    mult = 1
    if len(text) > 1 and text[-1].lower() in "kmg":
        mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[text[-1].lower()]
        text = text[:-1]
    try:
        value = float(text)
    except ValueError:
        return -1
    return int(value * mult) if value >= 0 else -1


def _strtol(text: str) -> int:
    """C ``strtol(s, NULL, 0)``: leading number in base 10, 0x.. hex or 0.. octal; 0 when there is none."""
    text = (text or "").strip()
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    for base, prefix, digits in ((16, ("0x", "0X"), "0123456789abcdefABCDEF"), (8, ("0",), "01234567")):
        if body.startswith(prefix) and len(body) > 1:
            lead = body[2:] if base == 16 else body[1:]
            num = ""
            for ch in lead:
                if ch not in digits:
                    break
                num += ch
            return sign * int(num, base) if num else 0
    num = ""
    for ch in body:
        if not ch.isdigit():
            break
        num += ch
    return sign * int(num) if num else 0


def parse_args(prog: str, args: list[str]) -> dict:
    """nccl-tests' options (getopt_long, its defaults); raises :class:`UsageError` as the real one exits."""
    opts = {"nthreads": 1, "ngpus": 1, "minbytes": 32 << 20, "maxbytes": 32 << 20, "stepbytes": 1 << 20,
            "stepfactor": 1, "iters": 20, "agg_iters": 1, "warmup_iters": 5, "check": 1, "op": "sum",
            "datatype": "float", "root": 0, "cudagraph": 0, "average": 1}
    try:
        pairs, _rest = getopt.gnu_getopt(list(args), SHORT_OPTS, LONG_OPTS)
    except getopt.GetoptError as exc:
        raise UsageError("invalid option '?'\n" + USAGE % prog, 0, stderr=getopt_message(prog, exc)) from None
    for flag, value in pairs:
        key = LONG_TO_SHORT.get(flag.lstrip("-"), flag.lstrip("-"))
        if key == "h":
            raise UsageError(USAGE % prog, 0)
        if key in "be":
            size = parse_size(value)
            if size < 0:
                raise UsageError("invalid size specified for '%s'\n" % ("minbytes" if key == "b" else "maxbytes"),
                                 255, "stderr")
            opts["minbytes" if key == "b" else "maxbytes"] = size
        elif key == "o":
            opts["op"] = value if value in OPS else "sum"
        elif key == "d":
            opts["datatype"] = TYPE_NAMES.get(value, value) if value in TYPES else "float"
        else:
            name = {"t": "nthreads", "g": "ngpus", "i": "stepbytes", "f": "stepfactor", "n": "iters",
                    "m": "agg_iters", "w": "warmup_iters", "c": "check", "r": "root", "G": "cudagraph",
                    "a": "average"}.get(key)
            if name:
                opts[name] = _strtol(value)
    if opts["minbytes"] > opts["maxbytes"]:
        raise UsageError("invalid sizes for 'minbytes' and 'maxbytes': %d > %d\n" % (opts["minbytes"], opts["maxbytes"]),
                         255, "stderr")
    opts["ngpus"] = max(1, opts["ngpus"])
    opts["nthreads"] = max(1, opts["nthreads"])
    return opts


def sizes(opts: dict) -> list[int]:
    """The sizes nccl-tests' TimeTest loops over (factor when -f > 1, else steps of -i bytes)."""
    out, size = [], opts["minbytes"]
    while size <= opts["maxbytes"] and len(out) < 4096:
        out.append(size)
        nxt = size * opts["stepfactor"] if opts["stepfactor"] > 1 else size + opts["stepbytes"]
        if nxt <= size:
            break
        size = nxt
    return out


# ------------------------------------------------------------------------------------------------ NCCL configuration
def parse_conf(text: str | None) -> dict:
    """``KEY=VALUE`` lines of an nccl.conf (NCCL's setEnvFile): ``#`` lines and lines without ``=`` are skipped."""
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key, value = key.strip(), value.strip()
        if key and key not in out:
            out[key] = value
    return out


def conf_texts(env: dict, home: str | None = None, etc: str = "/etc/nccl.conf") -> list[str]:
    """The configuration files NCCL reads, in its order: ``$NCCL_CONF_FILE`` (else ``~/.nccl.conf``), ``/etc/nccl.conf``."""
    paths = [env.get("NCCL_CONF_FILE") or os.path.join(home or env.get("HOME") or os.path.expanduser("~"), ".nccl.conf"),
             etc]
    texts = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                texts.append(fh.read())
        except OSError:
            texts.append("")
    return texts


def nccl_env(env: dict, conf) -> dict:
    """The variables NCCL sees: the process environment, then each file's values for names not yet set."""
    out = {k: v for k, v in (env or {}).items() if isinstance(k, str)}
    for text in ([conf] if isinstance(conf, str) or conf is None else list(conf)):
        for key, value in parse_conf(text).items():
            out.setdefault(key, value)
    return out


def parse_if_list(text: str | None) -> tuple[bool, bool, list[tuple[str, int]]]:
    """NCCL's ``NCCL_IB_HCA`` / ``NCCL_SOCKET_IFNAME`` grammar: ``[^][=]name[:port][,name[:port]...]``.

    Returns (exclude, exact, [(name, port or -1)]) as net_ib.cc reads it (``^`` first, then ``=``)."""
    text = text or ""
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    items = []
    for part in text.split(","):
        if not part:
            continue
        name, _, port = part.partition(":")
        items.append((name, _strtol(port) if port else -1))
    return exclude, exact, items


def match_if_list(name: str, port: int, items: list, exact: bool) -> bool:
    """NCCL's ``matchIfList``: an empty list matches everything; a prefix (or exact) name and the port if given."""
    if not items:
        return True
    for want, want_port in items:
        hit = name == want if exact else name.startswith(want)
        if hit and (want_port == -1 or port == -1 or want_port == port):
            return True
    return False


# ------------------------------------------------------------------------------------------------ the host, as NCCL sees it
def _rd(path: Path) -> str | None:
    return sysfs.read(path)


def gid_bytes(text: str | None) -> bytes | None:
    """``fe80:0000:...`` (sysfs form) -> 16 bytes; None when unreadable."""
    try:
        return ipaddress.IPv6Address(text.strip()).packed if text else None
    except ValueError:
        return None


def gid_text(raw: bytes | None) -> str:
    """inet_ntop(AF_INET6) of a GID, as NCCL prints local/remote GIDs (``::ffff:10.0.1.11``, ``fe80::...``, ``::``)."""
    if not raw:
        return "::"
    if raw[:12] == b"\x00" * 10 + b"\xff\xff":
        return "::ffff:" + ".".join(str(b) for b in raw[12:])
    return ipaddress.IPv6Address(raw).compressed


def gid_halves(raw: bytes | None) -> tuple[int, int]:
    """(subnet_prefix, interface_id) as the little-endian 64-bit numbers NCCL prints with %lX / %lu."""
    raw = raw or b"\x00" * 16
    return struct.unpack("<Q", raw[:8])[0], struct.unpack("<Q", raw[8:16])[0]


def _configured(raw: bytes | None) -> bool:
    """net_ib.cc ``configuredGid``: not all-zero and not the bare fe80:: prefix."""
    if not raw or raw == b"\x00" * 16:
        return False
    return not (raw[:8] == b"\xfe\x80" + b"\x00" * 6 and raw[4:] == b"\x00" * 12)


def _link_local(raw: bytes | None) -> bool:
    return bool(raw) and raw[:8] == b"\xfe\x80" + b"\x00" * 6


def _ipv4_mapped(raw: bytes | None) -> bool:
    return bool(raw) and raw[:12] == b"\x00" * 10 + b"\xff\xff"


def _rate_gbps(text: str | None) -> float:
    try:
        return float((text or "0").split()[0])
    except ValueError:
        return 0.0


def _mtu_enum(link_layer: str, netdev_mtu: int | None) -> int:
    """enum ibv_mtu of a port's active MTU (fabric_model.iboe_mtu on RoCE, 4096 on IB): 4096 -> 5 ... 256 -> 1."""
    size = 4096 if link_layer == "InfiniBand" else fabric_model.iboe_mtu(netdev_mtu or 1500)
    return {4096: 5, 2048: 4, 1024: 3, 512: 2, 256: 1}.get(size, 1)


def ib_ports(root: Path) -> list[dict]:
    """Every port of every RDMA device in ibv_get_device_list order (the kernel's device index order, sysfs.verbs_devices),
    as ibv_query_port shows it."""
    out = []
    for dev in sysfs.verbs_devices(root):
        for port in sysfs.ports(dev, root):
            pdir = sysfs.port_dir(dev, port, root)
            ll = _rd(pdir / "link_layer") or "InfiniBand"
            netdev = sysfs.port_netdev(dev, port, root) if ll == "Ethernet" else None
            mtu = None
            if netdev:
                try:
                    mtu = int(_rd(sysfs.netdev_dir(netdev, root) / "mtu") or 0) or None
                except ValueError:
                    mtu = None
            out.append({"hca": dev, "port": port, "state": sysfs.num_value(_rd(pdir / "state")),
                        "link_layer": ll, "rate_gbps": _rate_gbps(_rd(pdir / "rate")),
                        "lid": sysfs.num_value(_rd(pdir / "lid")) if ll == "InfiniBand" else 0,
                        "gid_tbl_len": len(sysfs.ls(pdir / "gids")), "netdev": netdev, "netdev_mtu": mtu,
                        "mtu": _mtu_enum(ll, mtu)})
    return out


def gid_entry(root: Path, hca: str, port: int, index: int) -> dict:
    """One GID table entry: raw bytes (None past the table), type (None for an empty entry), its netdev."""
    pdir = sysfs.port_dir(hca, port, root)
    text = _rd(pdir / "gids" / str(index))
    return {"index": index, "raw": gid_bytes(text), "type": _rd(pdir / "gid_attrs/types" / str(index)),
            "exists": text is not None}


def select_gid_index(root: Path, nic: dict, env: dict) -> int:
    """``ncclIbGetGidIndex``: IB -> 0; RoCE -> NCCL_IB_GID_INDEX when set (>= 0), else the GID of the wanted
    family (IPv4 unless NCCL_IB_ADDR_FAMILY=AF_INET6) and RoCE version (NCCL_IB_ROCE_VERSION_NUM, default 2)."""
    if nic["link_layer"] == "InfiniBand":
        return 0
    want = _strtol(env["NCCL_IB_GID_INDEX"]) if env.get("NCCL_IB_GID_INDEX", "").strip() else -1
    if want >= 0:
        return want
    family6 = env.get("NCCL_IB_ADDR_FAMILY") == "AF_INET6"
    version = _strtol(env.get("NCCL_IB_ROCE_VERSION_NUM") or "2") or 2
    usable = []
    for i in range(nic["gid_tbl_len"]):
        g = gid_entry(root, nic["hca"], nic["port"], i)
        if _configured(g["raw"]) and not _link_local(g["raw"]) and _ipv4_mapped(g["raw"]) != family6:
            usable.append((i, 2 if (g["type"] or "").endswith("v2") else 1))
    for i, ver in usable:
        if ver == version:
            return i
    return usable[0][0] if usable else 0


def gid_problem(nic: dict) -> str | None:
    """What is wrong with the GID a RoCE port uses: ``out_of_range`` (no such entry), ``empty`` (zero GID),
    ``link_local`` (fe80::), ``roce_v1`` (an IB/RoCE v1 GID); None when it is a routable RoCE v2 GID or on IB."""
    if nic["link_layer"] == "InfiniBand":
        return None
    if not nic["gid_exists"]:
        return "out_of_range"
    if not _configured(nic["gid_raw"]):
        return "empty"
    if _link_local(nic["gid_raw"]):
        return "link_local"
    if not (nic["gid_type"] or "").endswith("v2"):
        return "roce_v1"
    return None


def host_interfaces() -> list[tuple[str, str]]:
    """(name, IPv4) of this host's interfaces (SIOCGIFADDR), in if_nameindex order; the kernel's, not the tree's."""
    out = []
    try:
        names = [n for _i, n in socket.if_nameindex()]
    except OSError:
        return out
    import fcntl     # pylint: disable=import-outside-toplevel
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in names:
            try:
                res = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            out.append((name, socket.inet_ntoa(res[20:24])))
    return out


def select_interfaces(ifaces: list[tuple[str, str]], ifname: str | None, max_ifs: int = 16) -> list[tuple[str, str]]:
    """``ncclFindInterfaces``: NCCL_SOCKET_IFNAME when set, else ``ib*`` first, then anything but docker/lo/virbr,
    then docker, then lo."""
    def pick(spec):
        exclude, exact, items = parse_if_list(spec)
        return [(n, ip) for n, ip in ifaces if match_if_list(n, -1, items, exact) ^ exclude][:max_ifs]
    if ifname:
        return pick(ifname)
    for spec in ("ib", "^docker,lo,virbr", "docker", "lo"):
        found = pick(spec)
        if found:
            return found
    return []


def gpu_state(root: Path, env: dict) -> dict:
    """The GPU driver marker and GPUDirect RDMA as NCCL 2.25 decides it: the NVIDIA driver loaded
    (``module/nvidia``) and ``module/nvidia_peermem/version`` present (ncclIbGdrSupport), unless
    NCCL_NET_GDR_LEVEL=LOC (or 0) turns it off. DMA-BUF is not simulated (the 550 driver's proprietary modules)."""
    driver = (root / "module/nvidia/initstate").is_file()
    version = _rd(root / "module/nvidia/version") if driver else None
    peermem = (root / "module/nvidia_peermem/version").is_file() or (root / "kernel/mm/memory_peers/nv_mem/version").is_file()
    level = (env.get("NCCL_NET_GDR_LEVEL") or "").strip().upper()
    return {"driver": driver, "driver_version": version, "peermem": peermem,
            "gdr": bool(driver and peermem and level not in ("LOC", "0"))}


def _debug(env: dict) -> tuple[int, set]:
    """NCCL_DEBUG level (0 = none, as when unset) and the NCCL_DEBUG_SUBSYS mask (``^`` inverts, ALL)."""
    level = DEBUG_LEVELS.get((env.get("NCCL_DEBUG") or "").strip().upper(), 0)
    spec = (env.get("NCCL_DEBUG_SUBSYS") or "").strip()
    if not spec:
        return level, set(DEFAULT_SUBSYS)
    invert = spec.startswith("^")
    names = {s.strip().upper() for s in spec.lstrip("^").split(",") if s.strip()}
    mask = set(SUBSYS) if "ALL" in names else names & set(SUBSYS)
    return level, (set(SUBSYS) - mask) if invert else mask


def rank_state(sysfs_root, env: dict, nccl_conf_text, hostname: str, local_rank: int, *, proc: int = 0,
               pid: int | None = None, ngpus: int = 1, ifaces: list | None = None) -> dict:
    """What one nccl-tests process (MPI rank ``proc``) finds and chooses on its host. Pure but for reading
    ``sysfs_root`` (and, when ``ifaces`` is None, the kernel's interface list).

    ``nccl_conf_text``: the text of the configuration files in NCCL's order (a string or a list, see
    :func:`conf_texts`). Returns a JSON-able dict (GIDs as hex): host, pid, proc, devices (cudaDev), env (what NCCL
    sees), debug, ifaces (bootstrap/socket interfaces), ib_disabled, nics (chosen ports with their GID), net
    (``IB``/``Socket``), gpu (driver, peermem, gdr)."""
    root = Path(sysfs_root)
    nenv = nccl_env(env, nccl_conf_text)
    found = host_interfaces() if ifaces is None else [tuple(i) for i in ifaces]
    ifs = select_interfaces(found, nenv.get("NCCL_SOCKET_IFNAME")) or [("lo", "127.0.0.1")]
    ib_disabled = "NCCL_IB_DISABLE" in nenv and _strtol(nenv["NCCL_IB_DISABLE"]) != 0
    nics = []
    if not ib_disabled:
        exclude, exact, items = parse_if_list(nenv.get("NCCL_IB_HCA"))
        for p in ib_ports(root):
            if p["state"] != 4 or p["link_layer"] not in ("InfiniBand", "Ethernet"):
                continue
            if not (match_if_list(p["hca"], p["port"], items, exact) ^ exclude):
                continue
            index = select_gid_index(root, p, nenv)
            g = gid_entry(root, p["hca"], p["port"], index)
            nic = dict(p, index=len(nics), gid_index=index, gid_raw=g["raw"], gid_type=g["type"], gid_exists=g["exists"])
            nic["gid_problem"] = gid_problem(nic)
            nic["gid_raw"] = (g["raw"] or b"").hex()
            nic["view"] = nic_view(root, p["hca"], p["port"], hostname)
            nics.append(nic)
    level, subsys = _debug(nenv)
    return {"host": hostname, "pid": int(pid if pid is not None else os.getpid()), "proc": proc,
            "local_rank": local_rank, "devices": [local_rank * ngpus + i for i in range(ngpus)],
            "env": {k: v for k, v in nenv.items() if k.startswith("NCCL_")}, "debug": level, "subsys": sorted(subsys),
            "ifaces": [list(i) for i in ifs], "ib_disabled": ib_disabled, "nics": nics,
            "net": "IB" if nics else "Socket", "gpu": gpu_state(root, nenv)}


# ------------------------------------------------------------------------------------------------ the numbers
# Every number comes from simhost/fabric_model.py (section "nccl-tests"); here only the ring's shape.
def nic_view(root: Path, hca: str, port: int, host: str) -> dict:
    """The fabric model's view of one port (kept in the rank state, so that its ring peers see it)."""
    view = fabric_model.port_view(root, hca, port)
    view["host"] = host
    return view


def ring(states: list[dict]) -> list[dict]:
    """The job's ranks in rank order: {rank, state, dev}."""
    out = []
    for st in sorted(states, key=lambda s: s["proc"]):
        for dev in st["devices"]:
            out.append({"rank": len(out), "state": st, "dev": dev})
    return out


def n_channels(states: list[dict]) -> int:
    """Channels per ring: two per NIC (the fewest NICs any rank has) when every rank is on IB, else two."""
    counts = [len(s["nics"]) for s in states if s["net"] == "IB"]
    return 2 * max(1, min(counts)) if counts and all(s["net"] == "IB" for s in states) else 2


def _chan_nic(c: int, nics: list) -> int:
    return c % len(nics) if nics else 0


def link_transport(a: dict, b: dict) -> str:
    """How rank state ``a`` reaches rank state ``b``: ``intra`` (same host), ``IB`` (both on IB) or ``Socket``."""
    if a["host"] == b["host"]:
        return "intra"
    return "IB" if a["net"] == "IB" and b["net"] == "IB" else "Socket"


def peak_busbw(states: list[dict]) -> float:
    """Large-message bus bandwidth (GB/s): the slowest rank's path to the next rank of the ring (fabric_model)."""
    ranks = ring(states)
    n = len(ranks)
    if n < 2:
        return fabric_model.NCCL_INTRA_NODE_GBYTES
    nch = n_channels(states)
    crossing = {}
    for r in ranks:
        if r["state"]["host"] != ranks[(r["rank"] + 1) % n]["state"]["host"]:
            crossing[r["state"]["host"]] = crossing.get(r["state"]["host"], 0) + 1
    best = None
    for r in ranks:
        a, b = r["state"], ranks[(r["rank"] + 1) % n]["state"]
        kind = link_transport(a, b)
        if kind == "intra":
            bw = fabric_model.NCCL_INTRA_NODE_GBYTES
        elif kind == "Socket":
            bw = fabric_model.NCCL_SOCKET_GBYTES / crossing.get(a["host"], 1)
        else:
            bw = fabric_model.nccl_path_gbytes([x["view"] for x in a["nics"]], [x["view"] for x in b["nics"]], nch,
                                               _strtol(a["env"].get("NCCL_IB_TC") or "0"),
                                               a["gpu"]["gdr"] and b["gpu"]["gdr"]) / crossing.get(a["host"], 1)
        best = bw if best is None else min(best, bw)
    return best


def step_latency_us(states: list[dict]) -> float:
    """Latency of one ring step: the slowest kind of link in the ring."""
    ranks = ring(states)
    n = len(ranks)
    lat = fabric_model.NCCL_STEP_LATENCY_US
    worst = lat["intra"]
    for r in ranks:
        a, b = r["state"], ranks[(r["rank"] + 1) % n]["state"]
        kind = link_transport(a, b)
        if kind == "IB":
            worst = max([worst] + [lat.get(x["link_layer"], lat["InfiniBand"]) for x in a["nics"]])
        elif kind == "Socket":
            worst = max(worst, lat["Socket"])
    return worst


# ------------------------------------------------------------------------------------------------ NCCL's log lines
class _Log:
    """The NCCL_DEBUG output of one process: ``host:pid:tid [cudaDev] NCCL INFO msg`` filtered by level and subsystem;
    WARN lines start with an empty line (NCCL's WARN format begins with a newline)."""

    def __init__(self, st: dict):
        self.st, self.lines = st, []
        self.mask = set(st["subsys"])

    def prefix(self, tid: int, dev: int) -> str:
        return "%s:%d:%d [%d] " % (self.st["host"], self.st["pid"], tid, dev)

    def info(self, tags: str, msg: str, tid: int, dev: int) -> None:
        if self.st["debug"] >= DEBUG_LEVELS["INFO"] and (tags == "ALL" or set(tags.split("|")) & self.mask):
            self.lines.append(self.prefix(tid, dev) + "NCCL INFO " + msg)

    def warn(self, loc: str, msg: str, tid: int, dev: int) -> None:
        if self.st["debug"] >= DEBUG_LEVELS["WARN"]:
            self.lines.append("")
            self.lines.append(self.prefix(tid, dev) + loc + " NCCL WARN " + msg)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def _tids(st: dict) -> dict:
    pid = st["pid"]
    return {"main": pid, "init": pid + 14, "proxy": pid + 17, "progress": pid + 21}


def _hex(seed: str, digits: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:digits]


def comm_ptr(comm_id: str, rank: int) -> str:
    return "0x55" + _hex("%s/%d" % (comm_id, rank), 10)


def bus_id(dev: int) -> int:
    return GPU_BUS_IDS[dev % len(GPU_BUS_IDS)]


def _iface_list(ifaces: list) -> str:
    return " ".join("[%d]%s:%s<0>" % (i, name, ip) for i, (name, ip) in enumerate(ifaces))


def _env_echo(log: _Log, st: dict, name: str, tid: int, dev: int) -> None:
    if name in st["env"]:
        log.info("ENV", "%s set by environment to %s." % (name, st["env"][name]), tid, dev)


def init_lines(st: dict, states: list[dict], comm_id: str) -> str:
    """One process's NCCL output from ncclGetUniqueId / ncclCommInitRank up to Init COMPLETE (NCCL 2.25.1: the
    network connections come later, at the first collective: NCCL_RUNTIME_CONNECT)."""
    log, t = _Log(st), _tids(st)
    ranks = ring(states)
    n = len(ranks)
    mine = [r for r in ranks if r["state"]["proc"] == st["proc"]]
    dev0 = st["devices"][0]
    hosts = []
    for r in ranks:
        if r["state"]["host"] not in hosts:
            hosts.append(r["state"]["host"])
    if st["proc"] == 0 and st["debug"] == DEBUG_LEVELS["VERSION"]:
        log.lines.append("NCCL version %s+cuda%s" % (NCCL_VERSION, NCCL_CUDA))
    if "NCCL_SOCKET_IFNAME" in st["env"]:
        log.info("ENV", "NCCL_SOCKET_IFNAME set by environment to %s" % st["env"]["NCCL_SOCKET_IFNAME"], t["main"], dev0)
    log.info("BOOTSTRAP|INIT", "Bootstrap: Using %s:%s<0>" % tuple(st["ifaces"][0]), t["main"], dev0)
    log.info("INIT", "cudaDriverVersion %d" % CUDA_DRIVER_VERSION, t["main"], dev0)
    if st["proc"] == 0:
        log.info("ALL", "NCCL version %s+cuda%s" % (NCCL_VERSION, NCCL_CUDA), t["main"], dev0)
    for r in mine:
        dev, tid = r["dev"], t["init"] + st["devices"].index(r["dev"])
        log.info("INIT|NET", "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.", tid, dev)
        if r is mine[0]:
            _env_echo(log, st, "NCCL_IB_DISABLE", tid, dev)
            if "NCCL_IB_HCA" in st["env"] and not st["ib_disabled"]:
                log.info("NET|ENV", "NCCL_IB_HCA set to %s" % st["env"]["NCCL_IB_HCA"], tid, dev)
            if st["nics"]:
                line = "".join(" [%d]%s:%d/%s" % (x["index"], x["hca"], x["port"], _ll(x)) for x in st["nics"])
                log.info("INIT|NET", "NET/IB : Using%s [RO]; OOB %s:%s<0>" % ((line,) + tuple(st["ifaces"][0])), tid, dev)
            else:
                if not st["ib_disabled"]:
                    log.info("INIT|NET", "NET/IB : No device found.", tid, dev)
                log.info("INIT|NET", "NET/Socket : Using %s" % _iface_list(st["ifaces"]), tid, dev)
        log.info("INIT", "Using network %s" % st["net"], tid, dev)
        log.info("INIT", "ncclCommInitRank comm %s rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId 0x%s - "
                         "Init START" % (comm_ptr(comm_id, r["rank"]), r["rank"], n, dev, dev, bus_id(dev), comm_id),
                 tid, dev)
    for r in mine:
        dev, tid = r["dev"], t["init"] + st["devices"].index(r["dev"])
        if r is mine[0]:
            _env_echo(log, st, "NCCL_NET_GDR_LEVEL", tid, dev)
        local = [x for x in ranks if x["state"]["host"] == st["host"]]
        log.info("INIT", "comm %s rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0"
                 % (comm_ptr(comm_id, r["rank"]), r["rank"], n, len(hosts), len(local), local.index(r)), tid, dev)
        nch = n_channels(states)
        if r["rank"] == 0:
            for c in range(nch):
                log.info("INIT", "Channel %02d/%02d : %s" % (c, nch, " ".join(str(x) for x in range(n))), tid, dev)
        up = r["rank"] - 1
        down = r["rank"] + 1 if r["rank"] + 1 < n else -1
        log.info("INIT", "Trees " + " ".join("[%d] %d/-1/-1->%d->%d" % (c, down, r["rank"], up) for c in range(nch)),
                 tid, dev)
        log.info("INIT", "P2P Chunksize set to 131072", tid, dev)
    for r in mine:
        dev, tid = r["dev"], t["init"] + st["devices"].index(r["dev"])
        nch = n_channels(states)
        log.info("INIT", "threadThresholds 8/8/64 | 16/8/64 | 512 | 512", tid, dev)
        log.info("INIT", "%d coll channels, %d collnet channels, 0 nvls channels, %d p2p channels, %d p2p channels per "
                         "peer" % (nch, nch, nch, nch), tid, dev)
        log.info("INIT", "CC Off, workFifoBytes 1048576", tid, dev)
        log.info("INIT", "ncclCommInitRank comm %s rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId 0x%s - "
                         "Init COMPLETE" % (comm_ptr(comm_id, r["rank"]), r["rank"], n, dev, dev, bus_id(dev), comm_id),
                 tid, dev)
        log.info("INIT", "Init timings - ncclCommInitRank: rank %d nranks %d total 0.45 (kernels 0.26, alloc 0.02, "
                         "bootstrap 0.01, allgathers 0.00, topo 0.08, graphs 0.00, connections 0.00, rest 0.08)"
                 % (r["rank"], n), tid, dev)
    return log.text()


# ------------------------------------------------------------------------------------------------ connections, failures
def _peer_port(a: dict, b: dict, c: int) -> int:
    """An ephemeral port of the peer's NET/IB listening socket (what ncclSocketToString prints after the address)."""
    return 32768 + int(_hex("%s/%d/%s/%d/%d" % (a["host"], a["pid"], b["host"], b["pid"], c), 4), 16) % 28000


def failures(states: list[dict]) -> dict:
    """The job's failure as NCCL would meet it at the first collective, per process: {proc: {...}}.

    * the NICs at the two ends of a connection have different link layers (IB to RoCE): the connecting rank's
      ncclIbConnect refuses the remote device (ncclInternalError);
    * a RoCE port of a rank uses an empty GID entry (zero GID) or an index past the table: its ``ibv_modify_qp`` to RTR
      fails (ENODATA / EINVAL) on that rank; the others are torn down by mpirun and print nothing;
    * a link-local (fe80::) or RoCE v1 GID on either end of a RoCE connection: the QPs connect, but on this routed
      RoCE v2 fabric no packet arrives, so both ends see completions with status 12 (retry counter exceeded).
    Empty dict when the job runs."""
    ranks = ring(states)
    n = len(ranks)
    if n < 2:
        return {}
    nch = n_channels(states)
    mixed = {}
    for r in ranks:
        a, b = r["state"], ranks[(r["rank"] + 1) % n]["state"]
        if link_transport(a, b) != "IB" or a["proc"] in mixed:
            continue
        for c in range(nch):
            na, nb = a["nics"][_chan_nic(c, a["nics"])], b["nics"][_chan_nic(c, b["nics"])]
            if na["link_layer"] != nb["link_layer"]:
                mixed[a["proc"]] = {"kind": "link_layer", "rank": r["rank"], "channel": c, "nic": na, "peer": b,
                                    "peer_nic": nb}
                break
    if mixed:
        return mixed
    qp = {}
    for r in ranks:
        a, b = r["state"], ranks[(r["rank"] + 1) % n]["state"]
        if link_transport(a, b) != "IB" or a["proc"] in qp:
            continue
        for c in range(nch):
            nic = a["nics"][_chan_nic(c, a["nics"])]
            if nic["gid_problem"] in ("empty", "out_of_range"):
                qp[a["proc"]] = {"kind": "modify_qp", "rank": r["rank"], "channel": c, "nic": nic,
                                 "peer": b, "peer_nic": b["nics"][_chan_nic(c, b["nics"])]}
                break
    if qp:
        return qp
    out = {}
    for r in ranks:
        a, b = r["state"], ranks[(r["rank"] + 1) % n]["state"]
        if link_transport(a, b) != "IB":
            continue
        for c in range(nch):
            na, nb = a["nics"][_chan_nic(c, a["nics"])], b["nics"][_chan_nic(c, b["nics"])]
            if na["gid_problem"] in ("link_local", "roce_v1") or nb["gid_problem"] in ("link_local", "roce_v1"):
                out.setdefault(a["proc"], {"kind": "completion", "rank": r["rank"], "channel": c, "nic": na,
                                           "peer": b, "peer_nic": nb, "opcode": "Send"})
                out.setdefault(b["proc"], {"kind": "completion", "rank": (r["rank"] + 1) % n, "channel": c, "nic": nb,
                                           "peer": a, "peer_nic": na, "opcode": "Recv"})
                break
    return out


def _ll(nic: dict) -> str:
    """NCCL_IB_LLSTR: ``IB`` or ``RoCE``."""
    return "IB" if nic["link_layer"] == "InfiniBand" else "RoCE"


def _gid_trace(log: _Log, st: dict, nic: dict, c: int, tid: int, dev: int) -> None:
    qpn = 1000 + 7 * c + st["proc"] % 5
    rkey, lkey = 0x1fff00 + c, 0x1fff00 + c
    if nic["link_layer"] == "InfiniBand":
        prefix, _iid = gid_halves(bytes.fromhex(nic["gid_raw"]) if nic["gid_raw"] else None)
        log.info("NET", "NET/IB: NCCL Dev %d IbDev %d Port %d qpn %d mtu %d LID %d subnet-prefix %d  FLID 0 "
                        "fifoRkey=0x%x fifoLkey=0x%x" % (nic["index"], nic["index"], nic["port"], qpn, nic["mtu"],
                                                         nic["lid"], prefix, rkey, lkey), tid, dev)
    else:
        prefix, iid = gid_halves(bytes.fromhex(nic["gid_raw"]) if nic["gid_raw"] else None)
        log.info("NET", "NET/IB: NCCL Dev %d IbDev %d Port %d qpn %d mtu %d GID %d (%X/%X) fifoRkey=0x%x fifoLkey=0x%x"
                 % (nic["index"], nic["index"], nic["port"], qpn, nic["mtu"], nic["gid_index"], prefix, iid, rkey, lkey),
                 tid, dev)


def _test_failure(st: dict, test: str, code: int) -> str:
    """nccl-tests' NCCLCHECK line and its TESTCHECK unwind (all_reduce_perf-fail-nccl-01)."""
    out = "%s: Test NCCL failure %s:%d '%s / '\n" % (st["host"], FAIL_AT[0], FAIL_AT[1], NCCL_RESULT[code])
    for src, line in FAIL_UNWIND:
        out += " .. %s pid %d: Test failure %s:%d\n" % (st["host"], st["pid"], src or TESTS[test]["file"], line)
    return out


def connect_lines(st: dict, states: list[dict], test: str, fail: dict | None) -> str:
    """One process's connection lines at the first collective, and its failure if it has one."""
    log, t = _Log(st), _tids(st)
    ranks = ring(states)
    n = len(ranks)
    nch = n_channels(states)
    gid_echoed = False
    for r in [x for x in ranks if x["state"]["proc"] == st["proc"]]:
        if n < 2:
            break
        dev, tid = r["dev"], t["progress"]
        prev, nxt = ranks[(r["rank"] - 1) % n], ranks[(r["rank"] + 1) % n]
        for direction, peer in (("receive", prev), ("send", nxt)):
            kind = link_transport(st, peer["state"])
            for c in range(nch):
                if kind == "intra":
                    if direction == "send":
                        log.info("INIT|P2P", "Channel %02d : %d[%d] -> %d[%d] via SHM/direct/direct"
                                 % (c, r["rank"], dev, nxt["rank"], nxt["dev"]), tid, dev)
                    continue
                src, dst = (peer, r) if direction == "receive" else (r, peer)
                if st["net"] == "IB":       # each process names its own network (a mixed job: see failures())
                    via = "NET/IB/%d%s" % (_chan_nic(c, st["nics"]), "/GDRDMA" if st["gpu"]["gdr"] else "")
                else:
                    via = "NET/Socket/%d" % (c % max(1, len(st["ifaces"])))
                log.info("INIT|NET", "Channel %02d/0 : %d[%d] -> %d[%d] [%s] via %s"
                         % (c, src["rank"], src["dev"], dst["rank"], dst["dev"], direction, via), tid, dev)
        if link_transport(st, nxt["state"]) == "IB":
            for c in range(nch):
                nic = st["nics"][_chan_nic(c, st["nics"])]
                if nic["link_layer"] == "Ethernet" and not gid_echoed:
                    _env_echo(log, st, "NCCL_IB_GID_INDEX", t["proxy"], dev)
                    gid_echoed = True
                _gid_trace(log, st, nic, c, t["proxy"], dev)
                if fail and fail["kind"] in ("modify_qp", "link_layer") and fail["channel"] == c:
                    break
    if fail and fail["kind"] == "link_layer":
        nic, peer_nic = fail["nic"], fail["peer_nic"]
        log.warn("transport/net_ib.cc:1151", "NET/IB : Remote %s device is incompatible with the local [%d]%s:%d/%s. Try "
                 "selecting NICs of only one link type using NCCL_IB_HCA"
                 % (_ll(peer_nic), nic["index"], nic["hca"], nic["port"], _ll(nic)), t["proxy"], st["devices"][0])
        log.info("INIT|NET", "transport/net.cc:897 -> 3", t["proxy"], st["devices"][0])
        return log.text() + _test_failure(st, test, 3)
    if fail and fail["kind"] == "modify_qp":
        nic, peer_nic = fail["nic"], fail["peer_nic"]
        errno_txt = "61 No data available" if nic["gid_problem"] == "empty" else "22 Invalid argument"
        log.warn("misc/ibvwrap.cc:309", "Call to ibv_modify_qp failed with %s, on dev %s:%d, curr state INIT, next state "
                 "RTR, local GID index %d, local GID %s, remote GID %s"
                 % (errno_txt, nic["hca"], nic["port"], nic["gid_index"],
                    gid_text(bytes.fromhex(nic["gid_raw"]) if nic["gid_raw"] else None),
                    gid_text(bytes.fromhex(peer_nic["gid_raw"]) if peer_nic["gid_raw"] else None)),
                 t["proxy"], st["devices"][0])
        log.info("INIT|NET", "transport/net_ib.cc:1117 -> 2", t["proxy"], st["devices"][0])
        log.info("INIT|NET", "transport/net.cc:897 -> 2", t["proxy"], st["devices"][0])
        return log.text() + _test_failure(st, test, 2)
    if n >= 2:
        gdr = 1 if st["gpu"]["gdr"] else 0
        for r in [x for x in ranks if x["state"]["proc"] == st["proc"]]:
            log.info("INIT", "Connected all rings, use ring PXN 0 GDR %d" % gdr, t["progress"], r["dev"])
    if fail and fail["kind"] == "completion":
        nic, peer_nic, peer = fail["nic"], fail["peer_nic"], fail["peer"]
        log.warn("transport/net_ib.cc:2453", "NET/IB: Got completion from peer %s<%d> with status=12 opcode=0 len=0 "
                 "vendor err 129 (%s) localGid %s remoteGids%s hca %s"
                 % (peer["ifaces"][0][1], _peer_port(st, peer, fail["channel"]), fail["opcode"],
                    gid_text(bytes.fromhex(nic["gid_raw"]) if nic["gid_raw"] else None),
                    gid_text(bytes.fromhex(peer_nic["gid_raw"]) if peer_nic["gid_raw"] else None), nic["hca"]),
                 t["progress"], st["devices"][0])
        log.info("INIT|NET", "transport/net.cc:1227 -> 6", t["progress"], st["devices"][0])
        return log.text() + _test_failure(st, test, 6)
    return log.text()


# ------------------------------------------------------------------------------------------------ nccl-tests' own output
TABLE_HEAD = (
    "#\n"
    "#                                                              out-of-place                       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n")


def header(opts: dict, states: list[dict]) -> str:
    """Rank 0's header: the parameters line, ``# Using devices`` and one line per rank (Pid %6d, host %10s)."""
    step = opts["stepfactor"] if opts["stepfactor"] > 1 else opts["stepbytes"]
    out = ("# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d "
           "validation: %d graph: %d\n" % (opts["nthreads"], opts["ngpus"], opts["minbytes"], opts["maxbytes"], step,
                                           "factor" if opts["stepfactor"] > 1 else "bytes", opts["warmup_iters"],
                                           opts["iters"], opts["agg_iters"], opts["check"], opts["cudagraph"]))
    out += "#\n# Using devices\n"
    for r in ring(states):
        out += "#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s\n" % (
            r["rank"], 0, r["state"]["pid"], r["state"]["host"], r["dev"], bus_id(r["dev"]), GPU_NAME)
    limit = (GPU_MEM_BYTES - (1 << 30)) // (3 if opts["check"] else 2)
    if opts["maxbytes"] > limit:
        out += "#\n# Reducing maxBytes to %d due to memory limitation\n" % limit
    return out


def _time_str(us: float) -> str:
    if us >= 10000.0:
        return "%7.0f" % us
    if us >= 100.0:
        return "%7.1f" % us
    return "%7.2f" % us


def results(test: str, opts: dict, states: list[dict], env: dict | None = None) -> tuple[str, int]:
    """The table rows and the footer (rank 0), and nccl-tests' exit status (1 when NCCL_TESTS_MIN_BW is missed)."""
    n = len(ring(states))
    word = TYPES[opts["datatype"]]
    limit = (GPU_MEM_BYTES - (1 << 30)) // (3 if opts["check"] else 2)
    peak, lat = peak_busbw(states), step_latency_us(states)
    seed = "|".join("%s/%d" % (st["host"], st["proc"]) for st in sorted(states, key=lambda x: x["proc"]))
    rows, bws = "", []
    redop = opts["op"] if TESTS[test]["reduce"] else "none"
    for size in sizes(dict(opts, maxbytes=min(opts["maxbytes"], limit))):
        count = size // word
        if TESTS[test]["per_rank"]:
            count //= n
            nbytes = count * n * word
        else:
            nbytes = count * word
        line = "%12d  %12d  %8s  %6s  %6s" % (nbytes, count, opts["datatype"], redop, "-1")
        for in_place in (False, True):
            time_us, algbw, busbw = fabric_model.nccl_row(TESTS[test]["reduce"], nbytes, n, peak, lat, seed, in_place)
            if opts["check"] and (not in_place or TESTS[test]["inplace_checked"]):
                wrong = "%5g" % 0
            else:
                wrong = "%5s" % "N/A"
            line += "  %7s  %6.2f  %6.2f  %s" % (_time_str(time_us), algbw, busbw, wrong)
            bws.append(busbw)
        rows += line + "\n"
    avg = sum(bws) / len(bws) if bws else 0.0
    min_bw = (env or {}).get("NCCL_TESTS_MIN_BW")
    verdict, rc = "", 0
    if min_bw:
        try:
            floor = float(min_bw)
        except ValueError:
            floor = 0.0
        verdict = "FAILED" if avg < floor * 0.9 else "OK"
        rc = 1 if verdict == "FAILED" else 0
    foot = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g %s\n#\n" % (avg, verdict)
    return rows + foot, rc


# ------------------------------------------------------------------------------------------------ the job
def job_phases(test: str, opts: dict, states: list[dict], comm_id: str, env: dict | None = None) -> dict:
    """What each process prints, phase by phase (the MPI glue prints a phase, then waits at a barrier):
    header (rank 0) / NCCL init (each) / table head (rank 0) / connections and failures (each) / rows and footer
    (rank 0, only when nothing failed). Returns {"phases": [{proc: text}], "rc": {proc: exit status}}."""
    states = sorted(states, key=lambda s: s["proc"])
    fails = failures(states)
    phases = [{0: header(opts, states)},
              {s["proc"]: init_lines(s, states, comm_id) for s in states},
              {0: TABLE_HEAD},
              {s["proc"]: connect_lines(s, states, test, fails.get(s["proc"])) for s in states}]
    rc = {s["proc"]: 0 for s in states}
    for proc in fails:
        rc[proc] = TEST_NCCL_ERROR
    if not fails:
        text, code = results(test, opts, states, env)
        phases.append({0: text})
        rc[0] = code
    return {"phases": phases, "rc": rc}


def render_job(test: str, argv: list[str], states: list[dict], comm_id: str = "9a0c6b1d2e3f4a5b",
               env: dict | None = None) -> tuple[str, int]:
    """The whole job's output in phase order (what mpirun shows, without the interleaving) and mpirun's status."""
    opts = parse_args(test, argv)
    job = job_phases(test, opts, states, comm_id, env)
    text = "".join(phase[p] for phase in job["phases"] for p in sorted(phase))
    return text, max(job["rc"].values()) if job["rc"] else 0


# ------------------------------------------------------------------------------------------------ MPI glue
LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE")


def _mpi_comm():
    """COMM_WORLD when a launcher started this process and mpi4py is there (imported only now: importing it
    initialises MPI); None for a process started by hand (one rank, as nccl-tests built without MPI)."""
    if not any(os.environ.get(name) for name in LAUNCHER_VARS):
        return None
    try:
        from mpi4py import MPI     # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return MPI.COMM_WORLD


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    test = os.path.basename(argv[0])
    if test not in TESTS:
        test = "all_reduce_perf"
    try:
        opts = parse_args(test, argv[1:])
    except UsageError as exc:
        sys.stderr.write(exc.stderr)
        (sys.stderr if exc.stream == "stderr" else sys.stdout).write(exc.message)
        return exc.code
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMIX_SIZE") or 1)
    comm = _mpi_comm()
    if comm is None and world > 1:
        sys.stderr.write("%s (simhost): this job has %d ranks but mpi4py is missing (install python3-mpi4py)\n"
                         % (test, world))
        return 1
    hostname = socket.gethostname()
    proc = comm.Get_rank() if comm is not None else 0
    hosts = comm.allgather(hostname) if comm is not None else [hostname]
    local_rank = hosts[:proc].count(hostname)
    env = dict(os.environ)
    state = rank_state(sysfs.root(), env, conf_texts(env), hostname, local_rank, proc=proc, ngpus=opts["ngpus"])
    states = comm.allgather(state) if comm is not None else [state]
    comm_id = _hex("%s/%d/%s" % (hostname, os.getpid(), os.urandom(8).hex()), 16) if proc == 0 else None
    comm_id = comm.bcast(comm_id, root=0) if comm is not None else comm_id
    job = job_phases(test, opts, states, comm_id, env)
    for phase in job["phases"]:
        text = phase.get(proc)
        if text:
            sys.stdout.write(text)
        sys.stdout.flush()
        if comm is not None:
            comm.Barrier()
    return job["rc"].get(proc, 0)
