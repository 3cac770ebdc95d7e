"""simhost stand-in of iproute2's ``rdma`` tool (iproute2 6.1.0, Debian 12's): ``dev``/``dev show [DEV]``,
``dev set DEV name NEWNAME`` (the kernel's ib_device_rename on the tree: simhost/naming.py), ``dev set DEV
adaptive-moderation on|off``, ``link``/``link show [DEV/PORT]``, ``-j``/``-p``/``-d``, ``help``.

Sources: iproute2 rdma/rdma.c, dev.c, link.c, utils.c and lib/json_writer.c, json_print.c as of 6.1 (the format
strings checked with ``strings`` on Debian 12's /usr/bin/rdma 6.1.0: ``%u: ``, ``%s: ``, ``node_type %s ``, ``fw %s ``,
``node_guid %s ``, ``sys_image_guid %s ``, ``link %s/``, ``subnet_prefix %s ``, ``lid %u ``, ...: every field with
its trailing blank); the kernel side from drivers/infiniband/core/nldev.c (fill_dev_info, fill_port_info,
nldev_set_doit). Real captures: tests/fixtures/real/rdma-outputs/rdma-dev-*.txt, rdma-link-*.txt.

What the kernel would answer comes from the tree: devices in the kernel's index order (the netlink dump), node
type, firmware, GUIDs, ports' state/phys_state/LID/SM LID/LMC/subnet prefix (IB only, as fill_port_info), the
netdev of a RoCE port (an IB port reports none: kernel 6.1), ``adaptive-moderation`` on for mlx5 (use_cq_dim; the
capture rdma-dev-02), device caps (``-d``) = device_cap_flags_ex of the simulated ibv_devinfo, port caps (``-d``, IB
ports) = cap_mask | port_cap_flags2 << 32. Without ib_core loaded there is no NETLINK_RDMA: ``Failed to open
NETLINK_RDMA socket``, exit 1 (also for ``help``, as the real tool opens the socket first).
Not simulated (a message and exit 1): ``resource``, ``system``, ``statistic``, ``link add``/``link delete``,
``dev set DEV netns NS`` for an existing namespace, ``-b`` batch files; ``-r`` and a second ``-d`` are accepted.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .. import naming, statefile, sysfs

VERSION = "6.1.0"
# device_cap_flags_ex of the simulated ibv_devinfo -v (the capture ibv_devinfo-v-02): the kernel's
# attrs.device_cap_flags that RDMA_NLDEV_ATTR_CAP_FLAGS carries
DEVICE_CAP_FLAGS = 0x30000055ED721C36
PORT_CAP_FLAGS2_IB = 0x0032                  # what the simulated ibv_devinfo shows as port_cap_flags2 on IB ports
DIM_DEFAULT = True                           # mlx5_ib sets use_cq_dim (capture rdma-dev-02: adaptive-moderation on)
STATE_FILE = "rdma.json"                     # {"dim": {pci: bool}}: runtime state, reset at boot

DEV_CAPS_LOW = {0: "RESIZE_MAX_WR", 1: "BAD_PKEY_CNTR", 2: "BAD_QKEY_CNTR", 3: "RAW_MULTI", 4: "AUTO_PATH_MIG",
                5: "CHANGE_PHY_PORT", 6: "UD_AV_PORT_ENFORCE_PORT_ENFORCE", 7: "CURR_QP_STATE_MOD",
                8: "SHUTDOWN_PORT", 9: "INIT_TYPE", 10: "PORT_ACTIVE_EVENT", 11: "SYS_IMAGE_GUID",
                12: "RC_RNR_NAK_GEN", 13: "SRQ_RESIZE", 14: "N_NOTIFY_CQ", 15: "LOCAL_DMA_LKEY", 17: "MEM_WINDOW",
                18: "UD_IP_CSUM", 19: "UD_TSO", 20: "XRC", 21: "MEM_MGT_EXTENSIONS", 22: "BLOCK_MULTICAST_LOOPBACK",
                23: "MEM_WINDOW_TYPE_2A", 24: "MEM_WINDOW_TYPE_2B", 25: "RC_IP_CSUM", 26: "RAW_IP_CSUM",
                27: "CROSS_CHANNEL", 29: "MANAGED_FLOW_STEERING", 30: "SIGNATURE_HANDOVER", 31: "ON_DEMAND_PAGING"}
DEV_CAPS_HIGH = ["SG_GAPS_REG", "VIRTUAL_FUNCTION", "RAW_SCATTER_FCS", "RDMA_NETDEV_OPA_VNIC", "PCI_WRITE_END_PADDING"]
PORT_CAPS_LOW = ["RESERVED", "SM", "NOTICE", "TRAP", "OPT_IPD", "AUTO_MIGR", "SL_MAP", "MKEY_NVRAM", "PKEY_NVRAM",
                 "LED_INFO", "SM_DISABLED", "SYS_IMAGE_GUID", "PKEY_SW_EXT_PORT_TRAP", "CABLE_INFO", "EXTENDED_SPEEDS",
                 "CAP_MASK2", "CM", "SNMP_TUNNEL", "REINIT", "DEVICE_MGMT", "VENDOR_CLASS", "DR_NOTICE",
                 "CAP_MASK_NOTICE", "BOOT_MGMT", "LINK_LATENCY", "CLIENT_REG", "OTHER_LOCAL_CHANGES",
                 "LINK_SPPED_WIDTH", "VENDOR_SPECIFIC_MADS", "MULT_PKER_TRAP", "MULT_FDB", "HIERARCHY_INFO"]
PORT_CAPS_HIGH = ["SET_NODE_DESC", "EXT_INFO", "VIRT", "SWITCH_POR_STATE_TABLE", "LINK_WIDTH_2X", "LINK_SPEED_HDR"]
NODE_TYPES = ["unknown", "ca", "switch", "router", "rnic", "usnic", "usnic_udp", "unspecified"]
LINK_STATES = ["NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"]
PHYS_STATES = ["NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP", "LINK_ERROR_RECOVER", "PHY_TEST", "UNKNOWN",
               "OPA_OFFLINE", "UNKNOWN", "OPA_TEST"]
NETNS_RUN_DIR = "/run/netns"


class Fail(Exception):
    """A command's error return (the C functions' negative ret): exit status 1."""


# ---------------------------------------------------------------------------------------- json_writer.c
class JsonWriter:
    """iproute2 lib/json_writer.c: compact by default, ``pretty`` = 4-blank indents, ``"key": value``."""

    def __init__(self, out: list, pretty: bool):
        self.out, self.pretty, self.depth, self.sep = out, pretty, 0, ""

    def _eol(self):
        if self.pretty:
            self.out.append("\n" + "    " * self.depth)

    def _eor(self):
        if self.sep:
            self.out.append(self.sep)
        self.sep = ","

    def _begin(self, c):
        self._eor()
        self.out.append(c)
        self.depth += 1
        self.sep = ""

    def _end(self, c):
        self.depth -= 1
        if self.sep:
            self._eol()
        self.out.append(c)
        self.sep = ","

    @staticmethod
    def _quote(text: str) -> str:
        esc = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "\b": "\\b", "\\": "\\\\", '"': '\\"'}
        return '"' + "".join(esc.get(ch, ch) for ch in text) + '"'

    def name(self, key: str):
        self._eor()
        self._eol()
        self.sep = ""
        self.out.append(self._quote(key) + (": " if self.pretty else ":"))

    def value(self, text: str):
        self._eor()
        self.out.append(text)

    def start_object(self):
        self._begin("{")

    def end_object(self):
        self._end("}")

    def start_array(self):
        self._begin("[")
        if self.pretty:
            self.out.append(" ")

    def end_array(self):
        if self.pretty and self.sep:
            self.out.append(" ")
        self.sep = ""
        self._end("]")

    def destroy(self):
        self.out.append("\n")


# ---------------------------------------------------------------------------------------- json_print.c
class Printer:
    """The print_*() of iproute2's json_print.c over one JsonWriter (new_json_obj .. delete_json_obj)."""

    def __init__(self, json_output: bool, pretty: bool):
        self.json_output, self.pretty = json_output, pretty
        self.out: list = []
        self.jw: JsonWriter | None = None

    def new_json_obj(self):
        if self.json_output:
            self.jw = JsonWriter(self.out, self.pretty)
            self.jw.start_array()

    def delete_json_obj(self):
        if self.jw:
            self.jw.end_array()
            self.jw.destroy()
            self.jw = None

    def fp(self, text: str):
        if self.jw is None:
            self.out.append(text)

    def any(self, key: str | None, fmt: str | None, value, kind: str = "string"):
        if self.jw is not None:
            if key is not None:
                self.jw.name(key)
            if kind == "string":
                self.jw.value(JsonWriter._quote(value))   # pylint: disable=protected-access
            elif kind == "bool":
                self.jw.value("true" if value else "false")
            else:
                self.jw.value(str(value))
        elif fmt:
            shown = ("on" if value else "off") if kind == "bool" else value
            self.out.append(fmt % shown if "%" in fmt else fmt)

    def json_only(self, key: str, value: int):
        if self.jw is not None:
            self.jw.name(key)
            self.jw.value(str(value))

    def open_object(self):
        if self.jw is not None:
            self.jw.start_object()

    def newline(self):
        if self.jw is not None:
            self.jw.end_object()
        else:
            self.out.append("\n")

    def open_array(self, key: str, text: str):
        if self.jw is not None:
            self.jw.name(key)
            self.jw.start_array()
        else:
            self.out.append(text)

    def close_array(self, text: str):
        if self.jw is not None:
            self.jw.end_array()
        else:
            self.out.append(text)


# ------------------------------------------------------------------------------------------ the kernel side
def _num(text: str | None) -> int:
    return sysfs.num_value(text)


def devices(root: Path) -> list[dict]:
    """The RDMA netlink dump: [{idx, name, num_ports, pci}] in device index order."""
    exp = sysfs.simhost_profile(root)
    index = {d.get("name"): d.get("index", i) for i, d in enumerate(exp.get("devices", []))}
    out = []
    for name in sysfs.verbs_devices(root):
        ports = sysfs.ports(name, root)
        pci = os.path.basename(str(sysfs.pci_function(name, root)))
        out.append({"idx": index.get(name, len(out)), "name": name, "num_ports": max(ports) if ports else 0,
                    "pci": pci})
    return out


def _dim(root: Path, pci: str) -> bool:
    text = sysfs.read(sysfs.state_dir(root) / STATE_FILE)
    return bool(((json.loads(text) if text else {}).get("dim") or {}).get(pci, DIM_DEFAULT))


def _set_dim(root: Path, pci: str, on: bool) -> None:
    path = sysfs.state_dir(root) / STATE_FILE
    text = sysfs.read(path)
    data = json.loads(text) if text else {}
    data.setdefault("dim", {})[pci] = on
    statefile.write_json(path, data, indent=1, sort_keys=True, mkdir=True)


def _caps(pr: Printer, caps: int, names) -> None:
    pr.open_array("caps", "\n    caps: <")
    idx = 0
    while caps:
        if caps & 1:
            pr.any(None, "%s, " if caps >> 1 else "%s", names(idx))
        caps >>= 1
        idx += 1
    pr.close_array(">")


def _dev_cap_name(idx: int) -> str:
    if idx < 32:
        return DEV_CAPS_LOW.get(idx, "UNKNOWN")
    return DEV_CAPS_HIGH[idx - 32] if idx - 32 < len(DEV_CAPS_HIGH) else "UNKNOWN"


def _port_cap_name(idx: int) -> str:
    if idx < 32:
        return PORT_CAPS_LOW[idx]
    return PORT_CAPS_HIGH[idx - 32] if idx - 32 < len(PORT_CAPS_HIGH) else "UNKNOWN"


# --------------------------------------------------------------------------------------------- the tool
class Rdma:
    def __init__(self, root: Path, argv: list[str], prog: str, json_output: bool, pretty: bool, details: bool):
        self.root, self.args, self.prog, self.details = root, list(argv), prog, details
        self.pr = Printer(json_output, pretty)
        self.err: list = []
        self.devs = devices(root)
        self.dev: dict = {}
        self.port = 0

    # utils.c
    def arg(self) -> str | None:
        return self.args[0] if self.args else None

    def inc(self):
        if self.args:
            self.args.pop(0)

    def pr_err(self, text: str):
        self.err.append(text)

    def exec_cmd(self, cmds: list, what: str):
        """rd_exec_cmd: no argument -> the first entry; else the first command the argument is a prefix of."""
        if not self.args:
            return cmds[0][1]()
        word = self.args[0]
        for name, func in cmds[1:]:
            if len(word) <= len(name) and name.startswith(word):
                self.inc()
                return func()
        self.pr_err(f"Unknown {what} '{word}'.\n")
        return 0

    def lookup(self, allow_port: bool) -> dict | None:
        name = self.args[0]
        if allow_port and "/" in name:
            name = name[:name.rindex("/")]
        return next((d for d in self.devs if d["name"] == name), None)

    def exec_dev(self, cb):
        self.pr.new_json_obj()
        try:
            if not self.args:
                for dev in self.devs:
                    self.dev = dev
                    cb()
            else:
                dev = self.lookup(False)
                if dev is None:
                    self.pr_err(f"Wrong device name - {self.arg()}\n")
                    raise Fail()
                self.inc()
                self.dev = dev
                cb()
        finally:
            self.pr.delete_json_obj()

    def exec_link(self, cb):
        """rd_exec_link(rd, cb, strict_port=true): DEV/PORT with a port number; a bare DEV is refused."""
        self.pr.new_json_obj()
        try:
            if not self.args:
                for dev in self.devs:
                    self.dev = dev
                    for port in range(1, dev["num_ports"] + 1):
                        self.port = port
                        cb()
            else:
                dev = self.lookup(True)
                port, bad = self._port_of(self.arg())
                if dev is None or port > dev["num_ports"] or (not port and bad):
                    self.pr_err("Wrong device name\n")
                    raise Fail()
                self.inc()
                self.dev, self.port = dev, port
                cb()
        finally:
            self.pr.delete_json_obj()

    @staticmethod
    def _port_of(text: str) -> tuple[int, bool]:
        """get_port_from_argv in strict port mode: (port, error)."""
        if "/" not in text:
            return 0, True
        rest = text[text.index("/") + 1:]
        if rest.startswith("-"):
            return 0, True
        digits = ""
        for ch in rest:
            if not ch.isdigit():
                break
            digits += ch
        port = int(digits) if digits else 0
        return port, not port

    # rdma.c
    def help(self):
        self.pr.out.append(usage(self.prog))
        return 0

    def run(self) -> int:
        cmds = [(None, self.help), ("help", self.help), ("dev", self.cmd_dev), ("link", self.cmd_link),
                ("resource", lambda: self.not_simulated("resource")), ("system", lambda: self.not_simulated("system")),
                ("statistic", lambda: self.not_simulated("statistic"))]
        try:
            self.exec_cmd(cmds, "object")
            return 0
        except Fail:
            return 1

    def not_simulated(self, what: str):
        self.pr_err(f"simhost: {self.prog} {what}: not simulated\n")
        raise Fail()

    # dev.c
    def dev_help(self):
        p = self.prog
        self.pr.out.append(f"Usage: {p} dev show [DEV]\n       {p} dev set [DEV] name DEVNAME\n"
                           f"       {p} dev set [DEV] netns NSNAME\n       {p} dev set [DEV] adaptive-moderation [on|off]\n")
        return 0

    def cmd_dev(self):
        return self.exec_cmd([(None, self.dev_show), ("show", self.dev_show), ("list", self.dev_show),
                              ("set", self.dev_set), ("help", self.dev_help)], "dev command")

    def dev_show(self):
        return self.exec_dev(lambda: self.exec_cmd([(None, self.dev_print)], "parameter"))

    def dev_print(self):
        dev, pr, ibd = self.dev, self.pr, sysfs.ib_dir(self.dev["name"], self.root)
        pr.open_object()
        pr.any("ifindex", "%u: ", dev["idx"], "uint")
        pr.any("ifname", "%s: ", dev["name"])
        node_type = _num(sysfs.read(ibd / "node_type"))
        pr.any("node_type", "node_type %s ", NODE_TYPES[node_type] if node_type < len(NODE_TYPES) else "unknown")
        fw_ver = sysfs.read(ibd / "fw_ver")
        if fw_ver:
            pr.any("fw", "fw %s ", fw_ver)
        pr.any("node_guid", "node_guid %s ", sysfs.read(ibd / "node_guid") or "0000:0000:0000:0000")
        pr.any("sys_image_guid", "sys_image_guid %s ", sysfs.read(ibd / "sys_image_guid") or "0000:0000:0000:0000")
        if self.details:
            pr.any("adaptive-moderation", "adaptive-moderation %s ", _dim(self.root, dev["pci"]), "bool")
            _caps(pr, DEVICE_CAP_FLAGS, _dev_cap_name)
        pr.newline()
        return 0

    def dev_set(self):
        if not self.args:
            self.pr_err("Please provide device name.\n")
            raise Fail()
        return self.exec_dev(lambda: self.exec_cmd(
            [(None, self.dev_help), ("name", self.dev_set_name), ("netns", self.dev_set_netns),
             ("adaptive-moderation", self.dev_set_dim)], "parameter"))

    def kernel_error(self, err: int, extack: str | None = None):
        """rd_recv_msg on an error ack: the extack message (nl_dump_ext_ack), then perror("error")."""
        if extack:
            self.pr_err(f"Error: {extack}{'' if extack.endswith('.') else '.'}\n")
        self.pr_err(f"error: {os.strerror(err)}\n")
        raise Fail()

    def dev_set_name(self):
        if not self.args:
            self.pr_err("Please provide device new name.\n")
            raise Fail()
        new = self.arg()
        err, name = naming.rename(self.root, self.dev["name"], new)
        if err:
            policy = len(new) > naming.IB_DEVICE_NAME_MAX
            self.kernel_error(err, "Attribute failed policy validation" if policy else None)
        self.dev["name"] = name
        return 0

    def dev_set_netns(self):
        if not self.args:
            self.pr_err("Please provide device name.\n")
            raise Fail()
        path = Path(os.environ.get("SIMHOST_NETNS_RUN_DIR", NETNS_RUN_DIR)) / self.arg()
        try:
            os.close(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except OSError as exc:
            self.pr_err(f'Cannot open network namespace "{self.arg()}": {os.strerror(exc.errno)}\n')
            raise Fail() from None
        return self.not_simulated("dev set netns")

    def dev_set_dim(self):
        def setter(on):
            def run():
                _set_dim(self.root, self.dev["pci"], on)
                return 0
            return run
        return self.exec_cmd([(None, self.dev_help), ("on", setter(True)), ("off", setter(False))], "parameter")

    # link.c
    def link_help(self):
        p = self.prog
        self.pr.out.append(f"Usage: {p} link show [DEV/PORT_INDEX]\nUsage: {p} link add NAME type TYPE netdev NETDEV\n"
                           f"Usage: {p} link delete NAME\n")
        return 0

    def cmd_link(self):
        return self.exec_cmd([(None, self.link_show), ("add", lambda: self.not_simulated("link add")),
                              ("delete", lambda: self.not_simulated("link delete")), ("show", self.link_show),
                              ("list", self.link_show), ("help", self.link_help)], "link command")

    def link_show(self):
        return self.exec_link(lambda: self.exec_cmd([(None, self.link_print)], "parameter"))

    def link_print(self):
        dev, port, pr = self.dev, self.port, self.pr
        pdir = sysfs.port_dir(dev["name"], port, self.root)
        pr.open_object()
        pr.json_only("ifindex", dev["idx"])
        pr.any("ifname", "link %s/", dev["name"])
        pr.any("port", "%u ", port, "uint")
        is_ib = sysfs.read(pdir / "link_layer") == "InfiniBand"
        if is_ib:   # fill_port_info: the IB attributes only on IB ports
            gid0 = sysfs.read(pdir / "gids/0") or "fe80:0000:0000:0000:0000:0000:0000:0000"
            pr.any("subnet_prefix", "subnet_prefix %s ", ":".join(gid0.split(":")[:4]))
            pr.any("lid", "lid %u ", _num(sysfs.read(pdir / "lid")), "uint")
            pr.any("sm_lid", "sm_lid %u ", _num(sysfs.read(pdir / "sm_lid")), "uint")
            pr.any("lmc", "lmc %u ", _num(sysfs.read(pdir / "lid_mask_count")), "uint")
        state = _num(sysfs.read(pdir / "state"))
        pr.any("state", "state %s ", LINK_STATES[state] if state < len(LINK_STATES) else "UNKNOWN")
        phys = _num(sysfs.read(pdir / "phys_state"))
        pr.any("physical_state", "physical_state %s ", PHYS_STATES[phys] if phys < len(PHYS_STATES) else "UNKNOWN")
        netdev = None if is_ib else sysfs.port_netdev(dev["name"], port, self.root)
        if netdev and sysfs.netdev_dir(netdev, self.root).exists():
            pr.any("netdev", "netdev %s ", netdev)
            ifindex = _num(sysfs.read(sysfs.netdev_dir(netdev, self.root) / "ifindex"))
            pr.any("netdev_index", "netdev_index %u " if self.details else "", ifindex, "uint")
        if self.details and is_ib:
            _caps(pr, _num(sysfs.read(pdir / "cap_mask")) | (PORT_CAP_FLAGS2_IB << 32), _port_cap_name)
        pr.newline()
        return 0


def usage(prog: str) -> str:
    return (f"Usage: {prog} [ OPTIONS ] OBJECT {{ COMMAND | help }}\n"
            f"       {prog} [ -f[orce] ] -b[atch] filename\n"
            "where  OBJECT := { dev | link | resource | system | statistic | help }\n"
            "       OPTIONS := { -V[ersion] | -d[etails] | -j[son] | -p[retty] -r[aw]}\n")


LONG = {"version": "V", "help": "h", "json": "j", "pretty": "p", "details": "d", "raw": "r", "force": "f",
        "batch": "b"}


def parse(argv: list[str]):
    """getopt_long(":Vhdrpjfb:") with GNU permutation: (options in order, operands); an option is (letter, arg)
    or ("?", text) / (":", letter) for an unknown one or a missing argument."""
    opts, operands, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            operands += argv[i:]
            break
        if arg.startswith("--"):
            name, _eq, value = arg[2:].partition("=")
            hits = [k for k in LONG if k.startswith(name)] if name else []
            exact = [k for k in hits if k == name]
            key = exact[0] if exact else (hits[0] if len(hits) == 1 else None)
            if key is None:
                opts.append(("?", arg))
            elif LONG[key] == "b":
                if _eq:
                    opts.append(("b", value))
                elif i < len(argv):
                    opts.append(("b", argv[i]))
                    i += 1
                else:
                    opts.append((":", "b"))
            else:
                opts.append((LONG[key], None))
        elif arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                ch = arg[j]
                j += 1
                if ch == "b":
                    if j < len(arg):
                        opts.append(("b", arg[j:]))
                    elif i < len(argv):
                        opts.append(("b", argv[i]))
                        i += 1
                    else:
                        opts.append((":", "b"))
                    break
                opts.append((ch, None) if ch in "Vhdrpjf" else ("?", ch))
        else:
            operands.append(arg)
    return opts, operands


def main(argv=None) -> int:
    argv = sys.argv if argv is None else argv
    prog = os.path.basename(argv[0]) if argv else "rdma"
    opts, operands = parse(list(argv[1:]))
    json_output = pretty = details = False
    batch = None
    for letter, value in opts:
        if letter == "V":
            sys.stdout.write(f"{prog} utility, iproute2-{VERSION}\n")
            return 0
        if letter == "h":
            sys.stdout.write(usage(prog))
            return 0
        if letter == ":":
            sys.stderr.write(f"-{value} option requires an argument\n")
            return 1
        if letter == "?":
            sys.stderr.write("Unknown option.\n")
            sys.stdout.write(usage(prog))
            return 1
        json_output |= letter == "j"
        pretty |= letter == "p"
        details |= letter == "d"
        if letter == "b":
            batch = value
    root = sysfs.root()
    if sysfs.read(root / "module/ib_core/initstate") != "live":   # rd_init: no RDMA netlink without ib_core
        sys.stderr.write("Failed to open NETLINK_RDMA socket\n")
        return 1
    if batch is not None:
        sys.stderr.write(f"simhost: {prog} -b {batch}: batch files are not simulated\n")
        return 1
    tool = Rdma(root, operands, prog, json_output, pretty, details)
    rc = tool.run()
    sys.stdout.write("".join(tool.pr.out))
    sys.stderr.write("".join(tool.err))
    return rc


if __name__ == "__main__":
    sys.exit(main())
