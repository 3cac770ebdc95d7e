"""ONE model of the mlx5 driver's DCB/QoS state of the simulated Ethernet ports.

`mlnx_qos`, `dcb` and `ethtool` are three views of it (as on a real host they are three netlink clients of
the same mlx5 dcbnl/ethtool ops). The state lives as JSON in ``<root>/.simhost/state/qos.json`` (one entry per
netdev, created from the boot defaults on first use), so a rebuild of the tree (boot, driver reload) resets it.

The functions named like the mlx5 dcbnl ops (``setapp``, ``delapp``, ``setpfc``, ``setets``, ``setbuffer``,
``setmaxrate``, ``setdcbx``, ``set_pause``) apply the driver's rules (drivers/net/ethernet/mellanox/mlx5/core/
en_dcbnl.c, en_ethtool.c) and return 0 or a positive errno, which each tool reports the way it reports a
kernel error.

Boot defaults (what a freshly loaded mlx5 port reports), with their sources:
  trust pcp, no DSCP app entries     mlx5e_trust_initialize / mlx5e_dcbnl_init_app (no SEL_DSCP entry in pcp)
  firmware dscp2prio = dscp >> 3     mlnx_qos-01/-02 and qos-firmware/mlnx_qos-trust-dscp-01 (default table)
  PFC off on all priorities          qos-firmware/mlnx_qos-pcp-buffer-01, rdma-outputs/dcb-pfc-01
  pfc delay (cable len) 7            MLX5E_DEFAULT_CABLE_LEN; every mlnx_qos capture prints "Cable len: 7"
  prio_tc 1,0,2,3,4,5,6,7, TSA vendor, tc bw 100 (as getets reports vendor TCs)   mlx5e_ets_init; captures
  DCBX OS controlled (host|cee|ieee) LLDP_NB_DCBX_P1 False (firmware DCBX off) in mlxconfig-query-01; captures
  buffers: all priorities on buffer 0 of 524160 bytes     qos-firmware/mlnx_qos-pcp-buffer-01 (default pcp port)
           max_buffer_size 2044224                        qos-firmware/mlnx_qos-upstream-01 (NVIDIA example)
  maxrate unlimited (0)              captures ("ratelimit: unlimited")
  global pause rx on, tx on, autoneg off   NVIDIA docs "Both Tx and Rx global pause frames are enabled by
                                     default"; mlx5 set_pauseparam rejects autoneg (-EINVAL)

Model simplifications (documented in README): buffers change only by explicit buffer commands (the driver's
automatic lossless-buffer resizing on a PFC change is not modelled); PFC and global pause are independent.
"""

from __future__ import annotations

import copy
import errno
import json
from pathlib import Path

from . import statefile, sysfs

STATE_FILE = "qos.json"
NUM_PRIOS = 8
NUM_DSCP = 64

SEL_ETHERTYPE = 1
SEL_DSCP = 5
TSA_STRICT, TSA_CBS, TSA_ETS, TSA_VENDOR = 0, 1, 2, 255
TSA_NAMES = {TSA_STRICT: "strict", TSA_CBS: "cbs", TSA_ETS: "ets", TSA_VENDOR: "vendor"}
DCBX_HOST, DCBX_LLD_MANAGED, DCBX_CEE, DCBX_IEEE, DCBX_STATIC = 0x1, 0x2, 0x4, 0x8, 0x10
MLX5E_MAX_CABLE_LENGTH = 1000
MLX5E_100MB_KBPS = 100000
MLX5E_1GB_KBPS = 1000000

DEFAULT_BUFFER0 = 524160
DEFAULT_MAX_BUFFER = 2044224


def default_port_state() -> dict:
    return {
        "dcbx": DCBX_HOST | DCBX_CEE | DCBX_IEEE,
        "trust": "pcp",
        "apps": [],                                  # DCB app table, newest first: [selector, priority, protocol]
        "dscp2prio": [d >> 3 for d in range(NUM_DSCP)],   # firmware QPDPM table
        "pfc_en": 0,
        "cable_len": 7,
        "ets": {"prio_tc": [1, 0, 2, 3, 4, 5, 6, 7], "tc_tsa": [TSA_VENDOR] * NUM_PRIOS, "tc_bw": [100] * NUM_PRIOS},
        "buffer": {"prio2buffer": [0] * NUM_PRIOS, "buffer_size": [DEFAULT_BUFFER0] + [0] * 7,
                   "total_size": DEFAULT_MAX_BUFFER},
        "maxrate_kbps": [0] * NUM_PRIOS,
        "pause": {"rx": True, "tx": True, "autoneg": False},
    }


# ------------------------------------------------------------------------------------------ netdev kinds
def roce_netdevs(r: Path | None = None) -> dict:
    """{netdev: (rdma device, port)} of the simulated mlx5 Ethernet (RoCE) ports: the ones with DCB ops."""
    out = {}
    for dev in sysfs.simhost_profile(r).get("devices", []):
        for port in dev.get("ports", []):
            if port.get("link_layer") == "Ethernet":
                out[port["netdev"]] = (dev["name"], port["port"])
    return out


def netdev_kind(name: str, r: Path | None = None) -> str | None:
    """"mlx5" for a simulated RoCE port (dcbnl + mlx5 ethtool ops), "other" for another netdev of the tree
    (lo, the OOB veth, IPoIB: no dcbnl ops -> EOPNOTSUPP), None when there is no such netdev (ENODEV)."""
    if name in roce_netdevs(r):
        return "mlx5"
    if name and (sysfs.root() if r is None else r).joinpath("class/net", name).exists():
        return "other"
    return None


def stack_is_ofed(r: Path | None = None) -> bool:
    return (sysfs.simhost_profile(r).get("stack") or {}).get("provider") in ("mlnx_ofed", "doca")


# --------------------------------------------------------------------------------------------- storage
def _path(r: Path | None) -> Path:
    return sysfs.state_dir(r) / STATE_FILE


def load_all(r: Path | None = None) -> dict:
    text = sysfs.read(_path(r))
    return json.loads(text) if text else {}


def load(netdev: str, r: Path | None = None) -> dict:
    """The state of one RoCE netdev (boot defaults when nothing was set since the tree was built)."""
    return copy.deepcopy(load_all(r).get(netdev) or default_port_state())


def save(netdev: str, state: dict, r: Path | None = None) -> None:
    data = load_all(r)
    data[netdev] = state
    statefile.write_json(_path(r), data, indent=1, sort_keys=True, mkdir=True)


# ------------------------------------------------------------------------------- the driver's dcbnl ops
def dscp_app_count(st: dict) -> int:
    return sum(1 for sel, _prio, _proto in st["apps"] if sel == SEL_DSCP)


def setapp(st: dict, selector: int, priority: int, protocol: int) -> int:
    """mlx5e_dcbnl_ieee_setapp: DSCP only; the first DSCP entry switches trust to dscp; an existing entry for
    the DSCP is replaced; the new entry goes to the head of the list (dcb_app_add uses list_add)."""
    if selector != SEL_DSCP or not 0 <= protocol < NUM_DSCP:
        return errno.EINVAL
    if not 0 <= priority < NUM_PRIOS:
        return errno.EINVAL
    if not dscp_app_count(st):
        st["trust"] = "dscp"
    old_prio = st["dscp2prio"][protocol]
    st["dscp2prio"][protocol] = priority
    st["apps"] = [a for a in st["apps"] if a != [SEL_DSCP, old_prio, protocol]]
    if [SEL_DSCP, priority, protocol] in st["apps"]:      # dcb_ieee_setapp: exact duplicate -> -EEXIST
        return errno.EEXIST
    st["apps"].insert(0, [SEL_DSCP, priority, protocol])
    return 0


def delapp(st: dict, selector: int, priority: int, protocol: int) -> int:
    """mlx5e_dcbnl_ieee_delapp: the entry must match the firmware mapping; the DSCP then maps to priority 0;
    deleting the last DSCP entry switches trust back to pcp."""
    if selector != SEL_DSCP or not 0 <= protocol < NUM_DSCP:
        return errno.EINVAL
    if not dscp_app_count(st) or st["dscp2prio"][protocol] != priority:
        return errno.ENOENT
    if [SEL_DSCP, priority, protocol] not in st["apps"]:
        return errno.ENOENT
    st["apps"].remove([SEL_DSCP, priority, protocol])
    st["dscp2prio"][protocol] = 0
    if not dscp_app_count(st):
        st["trust"] = "pcp"
    return 0


def setpfc(st: dict, pfc_en: int, delay: int | None = None) -> int:
    """mlx5e_dcbnl_ieee_setpfc: pfc_en bitmap; the delay (cable length) is taken only when 0 < delay < 1000."""
    st["pfc_en"] = pfc_en & 0xFF
    if delay and 0 < delay < MLX5E_MAX_CABLE_LENGTH:
        st["cable_len"] = delay
    return 0


def setets(st: dict, prio_tc: list, tc_tsa: list, tc_bw: list) -> int:
    """mlx5e_dcbnl_ieee_setets: priorities map to TCs 0..7; ETS TCs' bandwidth must sum to 100. getets then
    reports 100 for strict and vendor TCs (what the firmware holds for them)."""
    if any(not 0 <= tc < NUM_PRIOS for tc in prio_tc):
        return errno.EINVAL
    if any(t not in TSA_NAMES for t in tc_tsa) or TSA_CBS in tc_tsa:
        return errno.EINVAL
    ets_bw = [bw for t, bw in zip(tc_tsa, tc_bw) if t == TSA_ETS]
    if ets_bw and sum(ets_bw) != 100:
        return errno.EINVAL
    st["ets"] = {"prio_tc": list(prio_tc), "tc_tsa": list(tc_tsa),
                 "tc_bw": [bw if t == TSA_ETS else 100 for t, bw in zip(tc_tsa, tc_bw)]}
    return 0


def setbuffer(st: dict, prio2buffer: list, buffer_size: list) -> int:
    """mlx5e_dcbnl_setbuffer: priorities map to buffers 0..7; the sizes may not exceed the port buffer."""
    if any(not 0 <= b < NUM_PRIOS for b in prio2buffer) or any(s < 0 for s in buffer_size):
        return errno.EINVAL
    if sum(buffer_size) > st["buffer"]["total_size"]:
        return errno.EINVAL
    st["buffer"]["prio2buffer"] = list(prio2buffer)
    st["buffer"]["buffer_size"] = list(buffer_size)
    return 0


def setmaxrate(st: dict, rates_kbps: list) -> int:
    """mlx5e_dcbnl_ieee_setmaxrate: 0 = unlimited; below 25.5 Gb/s the rate is rounded up to 100 Mb/s units,
    above to 1 Gb/s units (max 255 Gb/s), which is what reads back."""
    out = []
    for rate in rates_kbps:
        if rate == 0:
            out.append(0)
        elif rate <= 255 * MLX5E_100MB_KBPS:
            out.append(-(-rate // MLX5E_100MB_KBPS) * MLX5E_100MB_KBPS)
        elif rate <= 255 * MLX5E_1GB_KBPS:
            out.append(-(-rate // MLX5E_1GB_KBPS) * MLX5E_1GB_KBPS)
        else:
            return errno.EINVAL
    st["maxrate_kbps"] = out
    return 0


def setdcbx(st: dict, mode: int) -> int:
    """mlx5e_dcbnl_setdcbx: lld-managed is refused; 0 switches to firmware control; host mode stores the mode."""
    if mode & DCBX_LLD_MANAGED:
        return 1
    if mode == 0:
        st["dcbx"] &= ~DCBX_HOST
        return 0
    if not mode & DCBX_HOST:
        return 1
    st["dcbx"] = mode
    return 0


def set_pause(st: dict, rx: bool | None, tx: bool | None, autoneg: bool | None) -> int:
    """mlx5e_ethtool_set_pauseparam: pause autonegotiation is not supported (-EINVAL)."""
    if autoneg:
        return errno.EINVAL
    if rx is not None:
        st["pause"]["rx"] = bool(rx)
    if tx is not None:
        st["pause"]["tx"] = bool(tx)
    return 0


# ----------------------------------------------------------------------------------- invented numbers
COUNTERS_FILE = "counters.json"
_COUNTERS_CACHE: dict = {}


def invented_counter(netdev: str, name: str) -> int:
    """THE rule for every counter the simulator invents (ethtool -S, pause statistics, dcb pfc requests and
    indications): 0, as on a port that has just come up after a driver load and carried no traffic, unless
    traffic of the fabric model (simhost.fabric_model, run by the perftest stand-ins) or a fault injected with
    ``python3 -m simhost counters`` (simhost.faults) moved it: those values live in
    ``<root>/.simhost/state/counters.json`` ({netdev: {name: value}}), wiped with the tree like every counter."""
    path = sysfs.state_dir() / COUNTERS_FILE
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return 0
    cached = _COUNTERS_CACHE.get(str(path))
    if not cached or cached[0] != stamp:
        text = sysfs.read(path)
        cached = (stamp, json.loads(text) if text else {})
        _COUNTERS_CACHE[str(path)] = cached
    return int((cached[1].get(netdev) or {}).get(name, 0))
