"""Firmware non-volatile (NV) configuration of the simulated ConnectX cards, and their cables.

ONE model behind ``mlxconfig`` (NVIDIA MFT) and ``mstconfig`` (mstflint), both views of the same card (as the real
tools are two clients of the same NV registers). What takes effect when:

* **Next Boot** (what ``set`` writes, ``reset`` restores to the factory defaults) is the card's NV store. It lives on
  the container's disk, ``persist_dir()/mlxconfig/<function-0 PCI address>.json`` (``$SIMHOST_PERSIST_DIR``, default
  ``/var/lib/simhost``), so it survives a reboot (a rebuild of the tree). Before anything was written there, the NV
  store holds what the profile says the card shipped with (``firmware: {next_boot: {...}}``) over the defaults. The
  file names the card it belongs to (the node GUID of function 0): a file of another card (another profile or host
  index at that PCI address) is ignored, as a card moved to another slot takes its NV store with it.
* **Current** = the NV values at the last boot: ``build_tree`` reads the NV store, keeps it as Current in
  ``<root>/.simhost/state/firmware.json`` and builds the hardware from it (see ``EFFECTS``).
* **Default** = the factory defaults: the catalogue below, over the profile's ``firmware: {defaults: {...}}``.

A card is the set of PCI functions of one bus:device (0000:0c:00.0 and 0000:0c:00.1 form one dual-port card); each
function shows the whole card's configuration; card port n (the ``_P<n>`` suffix) is the n-th port counted over the
functions in function order (mlx5: one port per function, so port n is function n-1).

The catalogue is declared once, here (``CATALOGUE``), in the order of the mstflint 4.21 database
(/usr/share/mstflint/mlxconfig_dbs/mlxconfig_host.db: TLVs in row order, per-port TLVs once per port), which is the
order the tools print. Types, bit widths, limits and enum numbers are the database's; defaults are the Default column
of tests/fixtures/real/rdma-outputs/mlxconfig-query-01.txt (ESWITCH_HAIRPIN_DESCRIPTORS: mlxconfig-query-03.txt);
show_confs descriptions are those of qos-firmware/mstconfig-show-confs-01.txt where it lists the parameter, else the
4.21 database's text (with its ``\\;`` line breaks).

Cables (a physical fault model for tests of failed reboots): ``persist_dir()/cables.json`` marks a port's cable
unplugged; ``set_cable`` changes it and applies it to the running tree at once; ``build_tree`` applies it at boot.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import statefile, sysfs

# ------------------------------------------------------------------------------ what is modelled (ONE place)
EFFECTS = {
    "LINK_TYPE_P<n>": "boot: the port is InfiniBand (IB) or Ethernet (ETH) with everything mlx5 shows for it: "
                      "link_layer, GID table, rate, netdev name/type/address, LID/SM LID, PCI class (VPI cards only)",
    "SRIOV_EN, NUM_OF_VFS": "boot: sriov_totalvfs (NUM_OF_VFS) and sriov_numvfs (0) in every PCI function of the card "
                            "when SRIOV_EN is True and NUM_OF_VFS > 0; absent otherwise (no SR-IOV capability)",
    "ROCE_CC_PRIO_MASK_P<n>": "boot (MLNX_OFED/DOCA): ecn/roce_{np,rp}/enable/<prio> = bit prio of the mask",
    "CNP_DSCP_P<n>, CNP_802P_PRIO_P<n>, MIN_TIME_BETWEEN_CNPS_P<n>": "boot (MLNX_OFED/DOCA): ecn/roce_np/<name>",
    "CLAMP_TGT_RATE*, RPG_*, RATE_*, DCE_TCP_*, INITIAL_ALPHA_VALUE (_P<n>)":
        "boot (MLNX_OFED/DOCA): ecn/roce_rp/<name>",
}
STORED_ONLY = ("ATS_ENABLED", "ESWITCH_HAIRPIN_DESCRIPTORS", "LLDP_NB_DCBX_P<n>", "DCBX_IEEE_P<n>", "DCBX_CEE_P<n>",
               "DCBX_WILLING_P<n>")
NOT_MODELLED = (
    "every other parameter of NVIDIA's database (a query lists only the catalogue; any other name is 'not supported')",
    "the firmware's cross-parameter rules (e.g. the SR-IOV MSI-X budget); only a parameter's own min/max is checked",
    "mlxfwreset / a firmware reset without reboot; 'Current' changes only at a boot (build_tree)",
    "BlueField beyond its host-side ConnectX functions (a BlueField-3 is a VPI card of type BlueField3), multi-host,"
    " 4th generation (ConnectX-3) cards, /dev/mst device names, set_raw, backup, XML",
)

STATE_FILE = "firmware.json"
CABLES_FILE = "cables.json"
UNKNOWN = 0xFFFFFFFF          # MLXCFG_UNKNOWN: "N/A"

# dm_dev_type2str() names (mstflint tools_dev_types.c) by PCI device id / hca_type
DEVICE_TYPES = {"MT4115": "ConnectX4", "MT4117": "ConnectX4LX", "MT4119": "ConnectX5", "MT4121": "ConnectX5",
                "MT4123": "ConnectX6", "MT4125": "ConnectX6DX", "MT4127": "ConnectX6LX", "MT4129": "ConnectX7",
                "MT4131": "ConnectX8", "MT41692": "BlueField3"}


class FwError(Exception):
    """A firmware/tool error; the message is the tool's text after ``-E- ``."""


class Param:
    """One catalogue entry (a database parameter). ``kind``: bool | enum | num; arrays have ``array`` elements."""

    __slots__ = ("name", "tlv", "scope", "kind", "bits", "default", "symbols", "lo", "hi", "array", "db_name",
                 "vpi_only", "desc")

    def __init__(self, name, tlv, scope, kind, bits, default, desc, symbols=None, lo=None, hi=None, array=0,
                 db_name="", vpi_only=False):
        self.name, self.tlv, self.scope, self.kind, self.bits = name, tlv, scope, kind, bits
        self.default, self.desc, self.symbols, self.lo, self.hi = default, tuple(desc), symbols, lo, hi
        self.array, self.db_name, self.vpi_only = array, db_name or name.lower(), vpi_only


BOOL = {"False": 0, "True": 1}


def _ecn(name, bits, default, desc, lo=None, hi=None, kind="num"):
    return Param(name, "ROCE CC ECN", "port", kind, bits, default, desc, symbols=BOOL if kind == "bool" else None,
                 lo=lo, hi=hi)


CATALOGUE = [
    Param("ESWITCH_HAIRPIN_DESCRIPTORS", "INTERNAL HAIRPIN CONF", "global", "num", 8, 128, [
        "Log(base 2) of the number of packets descriptors allocated ",
        "internally for hairpin for a given IEEE802.1p priority i.",
        "0 means that no descriptors are allocated for this priority ",
        "and traffic with this priority will be dropped."], array=8, db_name="log_hpin_num_descriptor"),
    # max: the card's max_vfs_per_pf capability (profile firmware.max_vfs); checked when applying, as checkRules does
    Param("NUM_OF_VFS", "GLOBAL PCI CONF", "global", "num", 16, 0, [
        "The total number of Virtual Functions (VFs) that can be sup", "ported, for each PF.",
        "Valid when PF_NUM_OF_VF_VALID is FALSE"], hi="max_vfs", db_name="total_vfs"),
    Param("SRIOV_EN", "GLOBAL PCI CONF", "global", "bool", 1, 0, ["Enable Single-Root I/O Virtualization (SR-IOV)"],
          symbols=BOOL),
    Param("LINK_TYPE", "VPI LINK TYPE", "port", "enum", 2, 1, [
        "Select the link type (Ethernet or Infiniband) for the port", "0x1: IB - Infiniband", "0x2: ETH - Ethernet"],
          symbols={"IB": 1, "ETH": 2}, vpi_only=True, db_name="default_link_type"),
    Param("ROCE_CC_PRIO_MASK", "ROCE CC", "port", "num", 8, 255, [
        "Each bit in this mask indicates if the RoCE should be enabled on the n-th IEEE priority."],
          db_name="roce_cc_enable_pri"),
    _ecn("CLAMP_TGT_RATE_AFTER_TIME_INC", 1, 1, [
        "When receiving a CNP, the target rate should be updated if the transmission rate was increased due to the "
        "timer, and not only due to the byte counter"], kind="bool"),
    _ecn("CLAMP_TGT_RATE", 1, 0, [
        "If set, whenever a CNP is processed, the target rate is updated to be the current rate."], kind="bool"),
    _ecn("RPG_TIME_RESET", 17, 300, [
        "Time between rate increases if no CNPs are received. Given in microseconds."]),
    _ecn("RPG_BYTE_RESET", 15, 32767, [
        "Transmitted data between rate increases if no CNPs are received. Given in Bytes (0=DISABLED)"]),
    _ecn("RPG_THRESHOLD", 5, 1, [
        "The number of times rpByteStage or rpTimeStage can count before the RP rate control state machine advances "
        "states."]),
    _ecn("RPG_MAX_RATE", 32, 0, [
        "The maximum rate, in Mbits per second, at which an RP can transmit. Once this limit is reached, the RP rate "
        "limited is released and the flow is not rate limited any more (0=Full Port Speed)."]),
    _ecn("RPG_AI_RATE", 17, 5, [
        "The rate, in megabits per second, used to increase rpTargetRate in the RPR_ACTIVE_INCREASE."]),
    _ecn("RPG_HAI_RATE", 17, 50, [
        "The rate, in megabits per second, used to increase rpTargetRate in the RPR_HYPER_INCREASE state."]),
    _ecn("RPG_GD", 4, 11, [
        "If a CNP is received, the flow rate is reduced at the beginning of the next rate_reduce_monitor_period "
        "interval to (1-Alpha/Gd)*CurrentRate. rpg_gd is given as log2(Gd), where Gd may only be powers of 2."]),
    _ecn("RPG_MIN_DEC_FAC", 8, 50, [
        "The minimum factor by which the current transmit rate can be changed when processing a CNP. Value is given "
        "as a percentage (1-100)."], lo=1, hi=100),
    _ecn("RPG_MIN_RATE", 17, 1, ["The minimum value, in megabits per second, for rate to limit."]),
    _ecn("RATE_TO_SET_ON_FIRST_CNP", 17, 0, [
        "The rate that is set for the flow when a rate limiter is allocated to it upon first CNP received, in Mbps "
        "(=Full Port Speed)."]),
    _ecn("DCE_TCP_G", 10, 1019, [
        "Used to update the congestion estimator (alpha) once every dce_tcp_rtt microseconds, according to the "
        "equation:", "Alpha = (cnp_received * dceTcpG) + (1 - dceTcpG) * alpha .", "dceTcpG is divided by 2^10.",
        "cnp_received is set to one if a CNP was received for this flow during period since the previous update and "
        "the current update"], lo=1),
    _ecn("DCE_TCP_RTT", 17, 1, ["The time between updates of the alpha value, in microseconds."], lo=1),
    _ecn("RATE_REDUCE_MONITOR_PERIOD", 17, 4, [
        "The minimum time between 2 consecutive rate reductions for a single flow. Rate reduction will occur only if "
        "a CNP is received during the relevant time interval."], lo=1),
    _ecn("INITIAL_ALPHA_VALUE", 10, 1023, [
        "The initial value of alpha to use when receiving the first CNP for a flow. Expressed in a fixed point "
        "fraction of 2^10."]),
    _ecn("MIN_TIME_BETWEEN_CNPS", 17, 4, ["Minimum time between sending CNPs from the port, in microseconds."]),
    _ecn("CNP_802P_PRIO", 3, 6, ["The 802.1p priority value of the generated CNP for this port"]),
    _ecn("CNP_DSCP", 6, 48, ["The DiffServ Code Point of the generated CNP for this port."]),
    Param("LLDP_NB_DCBX", "LLDP NB CONF", "port", "bool", 1, 0, [
        "Enables DCBX (applicable when LLDP_NB_TX_", "MODE and LLDP_NB_RX_MODE are in ALL mode)."], symbols=BOOL),
    Param("DCBX_IEEE", "LLDP NB DCBX", "port", "bool", 1, 1, ["Enable DCBX in IEEE mode"], symbols=BOOL),
    Param("DCBX_CEE", "LLDP NB DCBX", "port", "bool", 1, 1, ["Enable DCBX in CEE mode"], symbols=BOOL),
    Param("DCBX_WILLING", "LLDP NB DCBX", "port", "bool", 1, 1, [
        "Allow the NIC to accept DCBX configuration from the ", "remote peer."], symbols=BOOL),
    Param("ATS_ENABLED", "PCI CONF", "host", "bool", 1, 0, ["When set to TRUE, the device will support ATS."],
          symbols=BOOL),
]
BY_NAME = {p.name: p for p in CATALOGUE}
DEFAULT_MAX_VFS = 127                         # max_vfs_per_pf of the ConnectX-4..7 PFs (profile firmware.max_vfs)

# OFED ecn/ files fed by the port's NV values (lower-case NV names), MLNX_OFED en_sysfs.c
ECN_NP_NAMES = ("min_time_between_cnps", "cnp_dscp", "cnp_802p_prio")
ECN_RP_NAMES = ("clamp_tgt_rate", "clamp_tgt_rate_after_time_inc", "rpg_time_reset", "rpg_byte_reset",
                "rpg_threshold", "rpg_max_rate", "rpg_ai_rate", "rpg_hai_rate", "rpg_gd", "rpg_min_dec_fac",
                "rpg_min_rate", "rate_to_set_on_first_cnp", "dce_tcp_g", "dce_tcp_rtt", "rate_reduce_monitor_period",
                "initial_alpha_value")


# ------------------------------------------------------------------------------------------- parameters
def param_table(nports: int, vpi: bool) -> list:
    """[(full name, Param, card port or None)] of a card, in the order the tools print them."""
    out, seen_tlvs = [], []
    for p in CATALOGUE:
        if p.tlv not in seen_tlvs:
            seen_tlvs.append(p.tlv)
    for tlv in seen_tlvs:
        params = [p for p in CATALOGUE if p.tlv == tlv and (vpi or not p.vpi_only)]
        if not params:
            continue
        if params[0].scope == "port":
            for port in range(1, nports + 1):
                out += [(f"{p.name}_P{port}", p, port) for p in params]
        else:
            out += [(p.name, p, None) for p in params]
    return out


def c_strtoul(text: str, base: int = 0):
    """C strtoul() + the tool's strToNum() check (whole string used, no ERANGE): (ok, value as u_int32_t)."""
    i, n = 0, len(text)
    while i < n and text[i] in " \t\n\v\f\r":
        i += 1
    neg = False
    if i < n and text[i] in "+-":
        neg = text[i] == "-"
        i += 1
    if base in (0, 16) and text[i:i + 2].lower() == "0x" and i + 2 < n and text[i + 2] in "0123456789abcdefABCDEF":
        base, i = 16, i + 2
    elif base == 0:
        base = 8 if text[i:i + 1] == "0" else 10
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"[:base]
    start = i
    while i < n and text[i].lower() in digits:
        i += 1
    if i == start:                         # no conversion: endp = the start of the string
        return text == "", 0
    if i != n:
        return False, 0
    value = int(text[start:i], base)
    if value > 0xFFFFFFFFFFFFFFFF:
        return False, 0                    # ERANGE
    if neg:
        value = (-value) & 0xFFFFFFFFFFFFFFFF
    return True, value & 0xFFFFFFFF


def parse_value(param: Param, text) -> tuple:
    """The tool's parseValue(): (number, string as the tool keeps it) or FwError with its message
    (mlxcfg_param.cpp: EnumParamValue / BoolParamValue / UnsignedParamValue::parseValueAux)."""
    if isinstance(text, bool):
        text = "True" if text else "False"
    text = str(text)
    if param.kind in ("bool", "enum"):
        ok, value = c_strtoul(text)
        if ok:
            for sym, num in param.symbols.items():
                if num == value:
                    return value, sym
        else:
            for sym, num in sorted(param.symbols.items()):
                if sym.lower() == text.lower():
                    return num, sym
        raise FwError(f"Unknown value {text}")
    ok, value = c_strtoul(text)
    if not ok:
        raise FwError("Cannot parse the value")
    if param.bits == 32 and value == UNKNOWN:
        raise FwError(f"The value {text} is reserved and cannot be used")
    if param.bits != 32 and value > (1 << param.bits) - 1:
        raise FwError(f"The value {text} is not valid,  as its size is {param.bits} bits")
    return value, text


def show_value(param: Param, value) -> str:
    """EnumParamValue::getVal() and friends: the symbol, or the number (an enum value without symbol prints bare)."""
    if param.array and isinstance(value, list):
        return f"Array[0..{param.array - 1}]"
    if param.symbols:
        for sym, num in param.symbols.items():
            if num == value:
                return sym
    return str(value)


def limit(card: dict, param: Param, which: str):
    bound = param.lo if which == "lo" else param.hi
    if bound == "max_vfs":
        return card["firmware"].get("max_vfs", DEFAULT_MAX_VFS)
    return bound


# ------------------------------------------------------------------------------------------------- cards
def slot_of(pci: str) -> str:
    return pci.rsplit(".", 1)[0]


def cards(exp: dict) -> list:
    """The cards of an expanded profile, in PCI order: ``{pci (function 0), slot, functions [device dicts],
    ports [(device, port dict)], vpi, identity, firmware, type}``."""
    by_slot: dict = {}
    for dev in exp.get("devices", []):
        by_slot.setdefault(slot_of(dev["pci"]), []).append(dev)
    out = []
    for slot in sorted(by_slot):
        fns = sorted(by_slot[slot], key=lambda d: int(d["pci"].rsplit(".", 1)[1]))
        fw = fns[0].get("firmware") or {}
        out.append({"pci": slot + ".0", "slot": slot, "functions": fns,
                    "ports": [(d, p) for d in fns for p in d["ports"]], "vpi": bool(fns[0].get("vpi")),
                    "identity": fns[0]["node_guid"], "firmware": fw,
                    "type": DEVICE_TYPES.get(fns[0]["hca_type"], "")})
    return out


def card_of(exp: dict, pci: str) -> dict | None:
    for card in cards(exp):
        if any(d["pci"] == pci for d in card["functions"]):
            return card
    return None


def table(card: dict) -> list:
    return param_table(len(card["ports"]), card["vpi"])


def lookup(card: dict, full: str):
    """(Param, card port) of a full name (LINK_TYPE_P2) on this card, None when the card does not have it."""
    for name, param, port in table(card):
        if name == full:
            return param, port
    return None


def card_port(card: dict, dev_name: str, port_num: int) -> int:
    for i, (dev, port) in enumerate(card["ports"], 1):
        if dev["name"] == dev_name and port["port"] == port_num:
            return i
    raise KeyError((dev_name, port_num))


def _fill(param: Param, value):
    return [value] * param.array if param.array and not isinstance(value, list) else value


def defaults(card: dict) -> dict:
    over = card["firmware"].get("defaults") or {}
    return {name: _fill(p, over.get(name, p.default)) for name, p, _port in table(card)}


def initial(card: dict) -> dict:
    """The NV store as the card shipped: the defaults with the profile's firmware.next_boot over them."""
    out = defaults(card)
    for name, value in (card["firmware"].get("next_boot") or {}).items():
        if name in out:
            out[name] = _fill(lookup(card, name)[0], value)
    return out


# ---------------------------------------------------------------------------------------------- NV store
def nv_path(card: dict) -> Path:
    return sysfs.persist_dir() / "mlxconfig" / f"{card['pci']}.json"


def read_nv(card: dict) -> dict:
    """Next-boot values of every parameter of the card (the NV file when it is this card's, else as shipped)."""
    values = initial(card)
    text = sysfs.read(nv_path(card))
    if text:
        try:
            data = json.loads(text)
        except ValueError:
            data = {}
        if data.get("card") == card["identity"]:
            for name, value in (data.get("next_boot") or {}).items():
                if name in values:
                    values[name] = value
    return values


def write_nv(card: dict, values: dict) -> None:
    statefile.write_json(nv_path(card), {"card": card["identity"], "pci": card["pci"], "next_boot": values},
                         indent=1, sort_keys=True, mkdir=True)


# -------------------------------------------------------------------------------------------------- boot
def boot_overrides(exp: dict) -> dict:
    """What the NV store and the cables make of the hardware at this boot: ``{"link_layers": {(pci, port):
    "InfiniBand"|"Ethernet"}, "unplugged": [(pci, port)]}`` for profile.expand."""
    link_layers = {}
    for card in cards(exp):
        if not card["vpi"]:
            continue
        nv = read_nv(card)
        for n, (dev, port) in enumerate(card["ports"], 1):
            link_layers[(dev["pci"], port["port"])] = "Ethernet" if nv[f"LINK_TYPE_P{n}"] == 2 else "InfiniBand"
    unplugged = []
    table_ = read_cables()
    for dev in exp.get("devices", []):
        for port in dev["ports"]:
            if (table_.get(dev["pci"]) or {}).get(str(port["port"])) == "unplugged":
                unplugged.append((dev["pci"], port["port"]))
    return {"link_layers": link_layers, "unplugged": unplugged}


def save_boot_state(root: Path, exp: dict) -> dict:
    """Called by build_tree: Current = the NV store now; kept in the tree (reset with it). Returns {pci: values}."""
    state = {}
    for card in cards(exp):
        state[card["pci"]] = {"card": card["identity"], "current": read_nv(card)}
    statefile.write_json(sysfs.state_dir(root) / STATE_FILE, state, indent=1, sort_keys=True, mkdir=True)
    return {pci: entry["current"] for pci, entry in state.items()}


def current(card: dict, r: Path | None = None) -> dict:
    """Current (boot-time) values of the card; the NV store when the tree has no boot record of it."""
    text = sysfs.read(sysfs.state_dir(r) / STATE_FILE)
    entry = (json.loads(text) if text else {}).get(card["pci"]) or {}
    if entry.get("card") == card["identity"] and entry.get("current"):
        values = defaults(card)
        values.update({k: v for k, v in entry["current"].items() if k in values})
        return values
    return read_nv(card)


def port_values(card: dict, values: dict, n: int) -> dict:
    """{NAME (no suffix): value} of card port n."""
    suffix = f"_P{n}"
    return {name[:-len(suffix)]: values[name] for name, _p, port in table(card) if port == n}


def ecn_boot_values(root: Path, exp: dict | None = None) -> dict:
    """{netdev: {"roce_np/enable/<prio>" | "roce_np/<name>" | "roce_rp/...": value}} of every Ethernet port, from
    the card's Current: what the MLNX_OFED driver reads from the firmware when it loads."""
    exp = exp if exp is not None else sysfs.simhost_profile(root)
    out = {}
    for card in cards(exp):
        values = current(card, root)
        for n, (_dev, port) in enumerate(card["ports"], 1):
            if port.get("link_layer") != "Ethernet":
                continue
            pv = port_values(card, values, n)
            files = {}
            for prio in range(8):
                bit = (pv["ROCE_CC_PRIO_MASK"] >> prio) & 1
                files[f"roce_np/enable/{prio}"] = bit
                files[f"roce_rp/enable/{prio}"] = bit
            for name in ECN_NP_NAMES:
                files[f"roce_np/{name}"] = pv[name.upper()]
            for name in ECN_RP_NAMES:
                files[f"roce_rp/{name}"] = pv[name.upper()]
            out[port["netdev"]] = files
    return out


def sriov(values: dict) -> int | None:
    """sriov_totalvfs of the card's functions at boot, None when they have no SR-IOV capability."""
    if values.get("SRIOV_EN") == 1 and values.get("NUM_OF_VFS", 0) > 0:
        return values["NUM_OF_VFS"]
    return None


# ------------------------------------------------------------------------------------------------ cables
def read_cables() -> dict:
    text = sysfs.read(sysfs.persist_dir() / CABLES_FILE)
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return {}


def unplugged_ports(exp: dict) -> set:
    """``{(device name, port number)}`` of the expanded profile's ports whose cable is out now (``set_cable``).
    The syncs that mirror a link into the tree ask this, not the boot profile: a cable pulled at run time keeps
    its port DOWN whatever the link under it does."""
    cables = read_cables()
    return {(dev["name"], int(port["port"])) for dev in exp.get("devices", []) for port in dev["ports"]
            if (cables.get(dev["pci"]) or {}).get(str(port["port"])) == "unplugged"}


def set_cable(root: Path, device: str, port: int, plugged: bool) -> str:
    """Plug or unplug the cable of ``device`` port ``port``: persisted, and applied to the running tree at once
    (as the driver sees a link loss: ``1: DOWN`` / ``2: Polling``, netdev without carrier). Raises ValueError."""
    root = Path(root)
    exp = sysfs.simhost_profile(root)
    dev = next((d for d in exp.get("devices", []) if d["name"] == device), None)
    if dev is None:
        raise ValueError(f"no RDMA device {device!r} in the tree at {root} (devices: "
                         f"{', '.join(d['name'] for d in exp.get('devices', [])) or 'none'})")
    pdesc = next((p for p in dev["ports"] if p["port"] == port), None)
    if pdesc is None:
        raise ValueError(f"{device} has no port {port} (ports: {', '.join(str(p['port']) for p in dev['ports'])})")
    table_ = read_cables()
    entry = table_.setdefault(dev["pci"], {})
    if plugged:
        entry.pop(str(port), None)
        if not entry:
            table_.pop(dev["pci"])
    else:
        entry[str(port)] = "unplugged"
    statefile.write_json(sysfs.persist_dir() / CABLES_FILE, table_, indent=1, sort_keys=True, mkdir=True)
    _apply_cable(root, device, pdesc, plugged)
    return f"{device} port {port} cable {'plugged' if plugged else 'unplugged'}"


def _write(path: Path, text: str) -> None:
    if path.parent.is_dir():
        statefile.write_text(path, text + "\n")


def _apply_cable(root: Path, device: str, pdesc: dict, plugged: bool) -> None:
    pdir = sysfs.port_dir(device, pdesc["port"], root)
    want = dict(pdesc.get("plugged") or {}, **{k: pdesc[k] for k in ("netdev", "link_layer")})
    for key in ("state", "phys_state", "rate", "lid", "sm_lid"):
        want.setdefault(key, pdesc[key])
    if plugged:
        state, phys = want["state"], want["phys_state"]
        _write(pdir / "rate", want["rate"])
        if want["link_layer"] == "InfiniBand" and want["lid"]:
            _write(pdir / "lid", f"0x{want['lid']:x}")
            _write(pdir / "sm_lid", f"0x{want['sm_lid']:x}")
    else:
        state, phys = "DOWN", "Polling"
    _write(pdir / "state", f"{sysfs.PORT_STATES[state]}: {state}")
    _write(pdir / "phys_state", f"{sysfs.PHYS_STATES[phys]}: {phys}")
    ndir = sysfs.netdev_dir(want["netdev"], root)
    if not ndir.is_dir():
        return
    up = state == "ACTIVE"
    changes = sysfs.num_value(sysfs.read(ndir / "carrier_changes")) + 1
    speed = sysfs.speed_mbps(want["rate"])
    _write(ndir / "carrier", "1" if up else "0")
    _write(ndir / "operstate", "up" if up else "down")
    _write(ndir / "speed", str(speed) if up else "-1")
    _write(ndir / "duplex", "full" if up else "unknown")
    _write(ndir / "carrier_changes", str(changes))
