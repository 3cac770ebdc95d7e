"""Fake ``mlxconfig`` (NVIDIA MFT) and ``mstconfig`` (mstflint) on simhost: one program, named by argv[0].

Both read and write the cards' firmware NV configuration of simhost.firmware (Next Boot in ``persist_dir()``,
Current from the last boot, Default from the catalogue), as the real tools read and write the NV registers. They
follow mstflint's mlxconfig sources step by step (mlxcfg_parser.cpp, mlxcfg_ui.cpp, mlxcfg_generic_commander.cpp,
mlxcfg_param.cpp, mlxcfg_tlv.cpp) and mtcr_ul's device-name parsing; the argument checks, their messages, the help
text and the exit codes are those of the real mstflint 4.21 (Debian 12), captured in tests/fixtures/real/
qos-firmware/mstconfig-{error,help,reset,version}-*.txt. Messages that need a device come from the sources (see
README "Firmware: mlxconfig and mstconfig"). Exit codes (mlxCfgStatus): 0 OK, 2 aborted by the user, 3 error.

Column layouts (everything else is common):
* ``mlxconfig``: MFT >= 4.2x: 20-wide fields, names padded to 44 from column 8, ``Next Boot`` header at column 57
  while its values start at 52 (printConfHeader "%-20s%46s"; -e: "%-20s%44s%20s%18s").
* ``mstconfig``: the profile's ``mstflint_layout``: ``current`` (default): 20-wide fields as above, headers over
  their values (Next Boot / Default at 52, Current at 73, Next Boot at 94 with -e; captures qos-firmware/
  mstconfig-set-01 and rdma-outputs/mlxconfig-query-01); ``legacy16``: mstflint <= 4.21 (the format strings of the
  real /usr/bin/mstconfig 4.21.0): 16-wide fields, names from column 9 padded to 36, values from column 45.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from .. import firmware as fw
from .. import sysfs

MLX_CFG_OK, MLX_CFG_ABORTED, MLX_CFG_ERROR = 0, 2, 3
FOOTER = "The '*' shows parameters with next value different from default/current value.\n"
VERSION = {"mstconfig": "mstconfig, mstflint 4.21.0, Git SHA Hash: N/A\n",
           # not from a capture: the form of MFT's print_version_string()
           "mlxconfig": "mlxconfig, mft 4.30.0-139, built on Oct 30 2024, 14:42:39. Git SHA Hash: N/A\n"}

# mstflint 4.21 printHelp() (qos-firmware/mstconfig-help-01.txt); mlxconfig prints it with its own name
HELP = (
    '    NAME:\n'
    '        {prog}\n'
    '    SYNOPSIS:\n'
    '        {prog} [Options] <Commands> [Parameters]\n'
    '    DESCRIPTION:\n'
    '        Allows the user to change some of the device configurations without having to\n'
    '        create and burn a new firmware.\n'
    '    OPTIONS:\n'
    '        -d|--dev <device>\t\t: Perform operation for a specified MST device.\n'
    '        -b|--db <filename>\t\t: Use a specific database file.\n'
    '        -f|--file <conf_file>\t\t: raw configuration file.\n'
    '        -h|--help       \t\t: Display help message.\n'
    '        -v|--version    \t\t: Display version info.\n'
    '        -e|--enable_verbosity\t\t: Show default and current configurations.\n'
    '        -y|--yes        \t\t: Answer yes in prompt.\n'
    '        -a|--all_attrs  \t\t: Show all attributes in the XML template\n'
    '        -p|--private_key <PKEY>\t\t: pem file for private key\n'
    '        -u|--key_uuid <UUID>\t\t: keypair uuid\n'
    '        -eng|--openssl_engine <ENGINE NAME>\t\t: OpenSSL engine name\n'
    '        -k|--openssl_key_id <IDENTIFIER>\t\t: OpenSSL key identifier\n'
    '        -t|--device_type <switch/hca>\t\t: Specify the device type\n'
    '\n'
    '    COMMANDS SUMMARY\n'
    '        clear_semaphore          : clear the tool semaphore.\n'
    '        i|show_confs             : display information about all configurations.\n'
    '        q|query                  : query supported configurations.\n'
    '        r|reset                  : reset all configurations to their default value.\n'
    '        s|set                    : set configurations to a specific device.\n'
    '        set_raw                  : set raw configuration file(5th Generation and above).\n'
    '        get_raw                  : get raw configuration (5th Generation and above).\n'
    '        backup                   : backup configurations to a file. Use set_raw command to restore file (5th '
    'Generation and above).\n'
    '        gen_tlvs_file            : Generate List of all TLVs. TLVs output file name must be specified. (*)\n'
    '        g <en_xml_template>      : Generate XML template. TLVs input file name and XML output file name must be '
    'specified. (*)\n'
    '        xml2raw                  : Generate Raw file from XML file. XML input file name and raw output file name '
    'must be specified. (*)\n'
    '        raw2xml                  : Generate XML file from Raw file. raw input file name and XML output file name '
    'must be specified. (*)\n'
    '        xml2bin                  : Generate binary configuration dump file from XML file. XML input file name '
    'and bin output file name must be specified. (*)\n'
    '        create_conf              : Generate configuration file from XML file. XML input file name and bin output '
    'file name must be specified. (*)\n'
    '        apply                    : Apply a configuration file, that was created with create_conf command. bin '
    'input file name must be specified. (*)\n'
    '\n'
    '    (*) These commands do not require MST device\n'
    '\n'
    '    To show supported configurations by device type, run show_confs command\n'
    '\n'
    '\n'
    '    Examples:\n'
    '        To query configurations            : {prog} -d 04:00.0 query\n'
    '        To set configuration               : {prog} -d 04:00.0 set SRIOV_EN=1 NUM_OF_VFS=16 WOL_MAGIC_EN_P1=1\n'
    '        To set raw configuration           : {prog} -d 05:00.0 -f conf_file set_raw\n'
    '        To reset configuration             : {prog} -d 04:00.0 reset\n'
    '\n'
    '    Supported devices:\n'
    '        4th Generation devices: ConnectX3, ConnectX3-Pro (FW 2.31.5000 and above).\n'
    '        5th Generation devices: ConnectIB, ConnectX4, ConnectX4-LX, ConnectX5, connectX5-Ex.\n'
    '        6th Generation devices: BlueField, BlueField2, ConnectX6, ConnectX6-DX, ConnectX6-LX\n'
    '        Switches: Switch-IB, Switch-IB2,Spectrum, Spectrum2, Spectrum3, Quantum, Quantum2\n'
    '\n'
    '    Note: query device to view supported configurations by Firmware.\n'
    '\n'
)

COMMANDS = {"set": "set", "s": "set", "query": "query", "q": "query", "reset": "reset", "r": "reset",
            "show_confs": "show_confs", "i": "show_confs", "clear_semaphore": "clear_semaphore", "set_raw": "set_raw",
            "get_raw": "get_raw", "backup": "backup", "gen_tlvs_file": "gen_tlvs_file", "g": "gen_xml_template",
            "gen_xml_template": "gen_xml_template", "xml2raw": "xml2raw", "raw2xml": "raw2xml", "xml2bin": "xml2bin",
            "create_conf": "create_conf", "apply": "apply"}
NEED_DEVICE = ("set", "clear_semaphore", "set_raw", "get_raw", "backup", "show_confs", "apply")
# options with a value: (missing-value message)
VALUE_OPTS = {"-d": "missing device name", "--dev": "missing device name", "-b": "missing database file name",
              "--db": "missing database file name", "-f": "missing file name", "--file": "missing file name",
              "-p": "missing file name", "--private_key": "missing file name", "-u": "missing file name",
              "--key_uuid": "missing file name", "-eng": "missing OpenSSL engine",
              "--openssl_engine": "missing OpenSSL engine", "-k": "missing OpenSSL key identifier",
              "--openssl_key_id": "missing OpenSSL key identifier", "-t": "missing device type",
              "--device_type": "missing device type"}


class Usage(Exception):
    """A command-line error: ``-E- <message>`` then the help text, exit 3 (parseArgs + printUsage)."""


# ------------------------------------------------------------------------------------------------ layouts
class Layout:
    """Column layout of one tool build (see the module docstring)."""

    def __init__(self, field: int, marker: str, name_width: int, space_if, header, opening_width: int):
        self.field, self.marker, self.name_width = field, marker, name_width
        self.space_if, self._header, self.opening_width = space_if, header, opening_width

    def header(self, show_def: bool, show_new: bool, show_cur: bool) -> str:
        return self._header(show_def, show_cur) + ("       New" if show_new else "")

    def opening(self, index: int, dev_type: str, name: str, desc: str, dev: str) -> str:
        w = self.opening_width
        return (f"\nDevice #{index}:\n----------\n\n" + f"{'Device type:':<{w}}{dev_type:<{w}}\n"
                + f"{'Name:':<{w}}{name:<{w}}\n" + f"{'Description:':<{w}}{desc:<{w}}\n"
                + f"{'Device:':<{w}}{dev:<{w}}\n" + "\n")

    def row_start(self, modified: bool, name: str) -> str:
        return ("*" if modified else " ") + self.marker + f"{name:<{self.name_width}}"


def _mft_header(show_def, show_cur):            # mlxcfg_ui.cpp printConfHeader (20-wide source)
    c, nb = "Configurations:", "Next Boot"
    if show_def and show_cur:
        return "%-20s%44s%20s%18s" % (c, "Default", "Current", nb)
    if show_def:
        return "%-20s%44s%18s" % (c, "Default", nb)
    if show_cur:
        return "%-20s%46s%18s" % (c, "Current", nb)
    return "%-20s%46s" % (c, nb)


def _current_header(show_def, show_cur):        # headers over the values: captures mlxconfig-query-01, mstconfig-set-01
    c, nb = "Configurations:", "Next Boot"
    if show_def and show_cur:
        return "%-20s%39s%21s%23s" % (c, "Default", "Current", nb)
    if show_def or show_cur:
        return "%-20s%39s%23s" % (c, "Default" if show_def else "Current", nb)
    return "%-20s%41s" % (c, nb)


def _legacy_header(show_def, show_cur):         # mstflint 4.21 format strings
    c, nb = "Configurations:", "Next Boot"
    if show_def and show_cur:
        return "%-16s%36s%16s%18s" % (c, "Default", "Current", nb)
    if show_def or show_cur:
        return "%-16s%36s%18s" % (c, "Default" if show_def else "Current", nb)
    return "%-16s%38s" % (c, nb)


LAYOUTS = {
    "mft": Layout(20, "       ", 44, lambda w: w >= 20, _mft_header, 20),
    "current": Layout(20, "       ", 44, lambda w: w >= 20, _current_header, 20),
    "legacy16": Layout(16, "        ", 36, lambda w: w > 16, _legacy_header, 16),
}


def value_text(str_val: str, val: int, field: int) -> str:
    """MlxCfg::printValue / printParam: a number, or SYMBOL(n) (Array[..] alone), padded to the field."""
    if val is None:
        return f"{'N/A':<{field}}"
    s = str(val)
    ok, n = fw.c_strtoul(str_val, 10) if str_val else (False, 0)
    if str_val == "" or str_val == s or (ok and n == val):
        return f"{s:<{field}}"
    if "Array" not in str_val:
        str_val += "(" + s + ")"
    return f"{str_val:<{field}}"


# ------------------------------------------------------------------------------------------------ devices
def _scan(fmt: list, text: str) -> list:
    """sscanf() with %x conversions and literal characters: the values converted before the first mismatch."""
    i, vals, hexd = 0, [], "0123456789abcdefABCDEF"
    for part in fmt:
        if part == "%x":
            j = i
            while j < len(text) and text[j].isspace():
                j += 1
            neg = j < len(text) and text[j] == "-"
            if j < len(text) and text[j] in "+-":
                j += 1
            if text[j:j + 2].lower() == "0x" and j + 2 < len(text) and text[j + 2] in hexd:
                j += 2
            k = j
            while k < len(text) and text[k] in hexd:
                k += 1
            if k == j:
                break
            vals.append(-int(text[j:k], 16) if neg else int(text[j:k], 16))
            i = k
        elif text[i:i + len(part)] == part:
            i += len(part)
        else:
            break
    return vals


def _rdma_name_pci(name: str, root: Path) -> list | None:
    """MFT's mtcr_ul (commit 6119e8487e, issue 4870166; mstflint PR #1930 ports it): the last form it tries, any
    RDMA device name resolved through /sys/class/infiniband/<name>/device (a persistent name such as ``ibp24s0`` or
    one set with ``rdma dev set``). None when there is no such device."""
    try:
        target = os.readlink(root / "class/infiniband" / name / "device")
    except OSError:
        return None
    vals = _scan(["%x", ":", "%x", ":", "%x", ".", "%x"], os.path.basename(target))
    return vals if len(vals) == 4 else None


def open_device(name: str, root: Path, any_rdma_name: bool = False):
    """mopen() of mtcr_ul: (card, PCI function) or None; writes mtcr's own stderr lines as the real one does.
    mstflint (mstconfig) knows RDMA devices only by the prefixes ``mthca``, ``mlx4_``, ``mlx5_`` (any other name:
    ``Unable to parse device name``); ``any_rdma_name`` (MFT's mlxconfig) also takes any other RDMA device name."""
    if any_rdma_name and not (_scan(["mthca", "%x"], name) or _scan(["mlx4_", "%x"], name)
                              or _scan(["mlx5_", "%x"], name)):
        vals = _scan(["%x", ":", "%x", ".", "%x"], name)
        if len(vals) != 3 and len(_scan(["%x", ":", "%x", ":", "%x", ".", "%x"], name)) != 4:
            found = _rdma_name_pci(name, root)
            if found is not None:
                return _open_pci(found, root)
    if _scan(["mthca", "%x"], name) or _scan(["mlx4_", "%x"], name) or _scan(["mlx5_", "%x"], name):
        try:
            target = os.readlink(root / "class/infiniband" / name / "device")
        except OSError as exc:
            sys.stderr.write(f"read link: {os.strerror(exc.errno)}\n")
            sys.stderr.write(f"Unable to read link /sys/class/infiniband/{name}/device\n")
            return None
        vals = _scan(["%x", ":", "%x", ":", "%x", ".", "%x"], os.path.basename(target))
        if len(vals) != 4:
            sys.stderr.write(f"Unable to parse device name {name}\n")
            return None
    else:
        vals = _scan(["%x", ":", "%x", ".", "%x"], name)
        if len(vals) == 3:
            vals = [0] + vals
        else:
            vals = _scan(["%x", ":", "%x", ":", "%x", ".", "%x"], name)
            if len(vals) != 4:
                sys.stderr.write(f"Unable to parse device name {name}\n")
                return None
    return _open_pci(vals, root)


def _open_pci(vals: list, root: Path):
    if any(v < 0 for v in vals):
        return None
    pci = "%04x:%02x:%02x.%x" % tuple(vals)
    if sysfs.read(root / "bus/pci/devices" / pci / "vendor") != "0x15b3":
        return None
    card = fw.card_of(sysfs.simhost_profile(root), pci)
    return (card, pci) if card else None


def all_functions(root: Path) -> list:
    """mdevices_info(): the Mellanox PCI functions of the host, in bus order."""
    return [pci for pci in sysfs.ls(root / "bus/pci/devices")
            if sysfs.read(root / "bus/pci/devices" / pci / "vendor") == "0x15b3"]


# ------------------------------------------------------------------------------------------------ the tool
class Tool:
    def __init__(self, prog: str, root: Path):
        self.prog, self.root = prog, root
        exp = sysfs.simhost_profile(root)
        layout = "mft" if prog == "mlxconfig" else (exp.get("mstflint_layout") or "current")
        self.lay = LAYOUTS[layout]
        self.device, self.cmd, self.args = "", None, []
        self.yes = self.verbose = False
        self.raw_file = None

    # ----------------------------------------------------------------------------------------- output
    @staticmethod
    def out(text: str) -> None:
        sys.stdout.write(text)

    def err(self, message: str) -> int:
        self.out(f"-E- {message}\n")
        return MLX_CFG_ERROR

    def ask(self, question: str) -> bool:
        """MlxCfg::askUser: the prompt; -y answers y; else one line from stdin, y/yes (any case) to go on."""
        self.out(f"\n {question} (y/n) [n] : ")
        if self.yes:
            self.out("y\n")
            return True
        sys.stdout.flush()
        try:
            answer = sys.stdin.readline() if sys.stdin else ""
        except (OSError, ValueError):
            answer = ""
        answer = answer[:-1] if answer.endswith("\n") else answer
        return answer.lower() in ("y", "yes")

    # ------------------------------------------------------------------------------------ command line
    def parse(self, argv: list) -> str | None:
        """parseArgs(); returns "help"/"version" for those, raises Usage."""
        i = 0
        while i < len(argv):
            arg = argv[i]
            if arg in ("-v", "--version"):
                return "version"
            if arg in ("-h", "--help"):
                return "help"
            if arg in VALUE_OPTS:
                i += 1
                if i == len(argv):
                    raise Usage(VALUE_OPTS[arg])
                if arg in ("-d", "--dev"):
                    self.device = argv[i]
                elif arg in ("-f", "--file"):
                    self.raw_file = argv[i]
                elif arg in ("-t", "--device_type") and argv[i].lower() not in ("switch", "hca"):
                    raise Usage('Unsupported device name given, please specify "switch" or "hca"device type')
            elif arg in ("-y", "--yes"):
                self.yes = True
            elif arg in ("-e", "--enable_verbosity"):
                self.verbose = True
            elif arg in ("-a", "--all_attrs", "--force"):
                pass
            elif arg in COMMANDS:
                self.cmd = COMMANDS[arg]
                self.args = argv[i + 1:]
                break
            else:
                raise Usage(f"invalid argument: {arg}")
            i += 1
        if self.cmd is None:
            raise Usage("No command found. For more information please read the help message:")
        if self.cmd == "set" and not self.args:
            raise Usage(f"missing configuration arguments. For more information please run {self.prog} -h|--help.")
        if self.cmd in NEED_DEVICE and not self.device:
            raise Usage(f"{self.cmd} command expects device to be specified.")
        if self.cmd in ("set_raw", "get_raw") and not self.raw_file:
            raise Usage(f"{self.cmd} command expects raw TLV file to be specified.")
        if self.cmd == "backup" and not self.raw_file:
            raise Usage("backup command expects file to be specified.")
        if self.cmd not in ("set_raw", "get_raw", "backup") and self.raw_file:
            raise Usage("raw TLV file can only be specified with set_raw, get_raw and backup commands.")
        if self.cmd == "reset" and self.args:
            raise Usage(f"reset command expects no argument but {len(self.args)} argument received")
        if self.cmd == "query":
            self.args = self._query_args(self.args)
        elif self.cmd in ("set", "show_confs"):      # 4.21 parses show_confs arguments like set's
            self.args = self._set_args(self.args)
        return None

    @staticmethod
    def _indexes(name: str):
        """NAME[3] -> ("NAME", [3]); NAME[0..7] -> ("NAME", [0..7]); else None (isIndexedMlxconfigName)."""
        match = re.fullmatch(r"([^\[\]]+)\[(\d+)(?:\.\.(\d+))?\]", name)
        if not match:
            return None
        lo = int(match.group(2))
        hi = int(match.group(3)) if match.group(3) is not None else lo
        return match.group(1), list(range(lo, hi + 1))

    def _query_args(self, args: list) -> list:
        out = []
        for name in args:
            idx = self._indexes(name)
            if idx and len(idx[1]) > 1:
                out += [f"{idx[0]}[{i}]" for i in idx[1]]
            else:
                out.append(name)
        return out

    @staticmethod
    def _strtok(arg: str):
        """Up to three strtok(arg, "=") tokens, and argv[i] as printed afterwards (cut at the first '=' written)."""
        tokens, cut, i = [], None, 0
        while len(tokens) < 3:
            while i < len(arg) and arg[i] == "=":
                i += 1
            if i >= len(arg):
                break
            j = arg.find("=", i)
            j = len(arg) if j == -1 else j
            tokens.append(arg[i:j])
            if j < len(arg) and cut is None:
                cut = j
            i = j + 1
        return tokens, (arg if cut is None else arg[:cut])

    def _set_args(self, args: list) -> list:
        """extractSetCfgArgs: NAME=VALUE as strtok splits it; [(name, value)]."""
        out = []
        for arg in args:
            tokens, shown = self._strtok(arg)
            if len(tokens) != 2:
                raise Usage(f"Invalid Configuration argument {shown}")
            name, value = tokens[0], tokens[1]
            if any(n == name for n, _v in out):
                raise Usage(f"Duplicate parameter, {name}.")
            idx = self._indexes(name)
            if idx and len(idx[1]) > 1:
                out += [(f"{idx[0]}[{i}]", value) for i in idx[1]]
            else:
                out.append((name, value))
        return out

    # ------------------------------------------------------------------------------------------ values
    def _resolve(self, card: dict, name: str):
        """(Param, full name, index or None) of a queried name; FwError as queryParamViews raises it."""
        idx = self._indexes(name)
        base, index = (idx[0], idx[1][0]) if idx else (name, None)
        hit = fw.lookup(card, base)
        if hit is None:
            raise fw.FwError(f"The Device doesn't support {name} parameter")
        param = hit[0]
        if index is not None and index >= param.array:
            raise fw.FwError(f"Index {index} of the parameter {base} is out of range. Maximal index is {param.array - 1}")
        return param, base, index

    @staticmethod
    def _cell(param, values: dict, base: str, index):
        """(strVal, val) of one column of a row."""
        value = values[base]
        if param.array and index is None:
            return fw.show_value(param, value), 0
        if param.array:
            value = value[index]
        return fw.show_value(param, value), value

    def _columns(self, card: dict):
        values = {"next": fw.read_nv(card)}
        if self.verbose:
            values["default"] = fw.defaults(card)
            values["current"] = fw.current(card, self.root)
        return values

    def _row(self, name: str, cells: list, modified: bool) -> str:
        text, width = self.lay.row_start(modified, name), 0
        for i, (str_val, val) in enumerate(cells):
            if i and self.lay.space_if(width):
                text += " "
            piece = value_text(str_val, val, self.lay.field)
            width = len(piece)
            text += piece
        return text + "\n"

    # ---------------------------------------------------------------------------------------- commands
    def _opening(self, card: dict, pci: str, dev_arg: str, index: int) -> str:
        fn = next(d for d in card["functions"] if d["pci"] == pci)
        name = f"{fn['part_number']}_Ax" if fn.get("part_number") else "N/A"
        return self.lay.opening(index, card["type"], name, fn.get("description") or "N/A", dev_arg)

    def query(self, card: dict, pci: str, dev_arg: str, index: int) -> int:
        self.out(self._opening(card, pci, dev_arg, index))
        self.out(self.lay.header(self.verbose, False, self.verbose) + "\n")
        values = self._columns(card)
        try:
            if self.args:
                items = [(name,) + self._resolve(card, name) for name in self.args]
            else:
                items = [(full, param, full, None) for full, param, _port in fw.table(card)]
        except fw.FwError as exc:
            return self.err(str(exc))
        differ = False
        for name, param, base, index in items:
            cols = [self._cell(param, values[k], base, index) for k in ("default", "current") if k in values]
            nxt = self._cell(param, values["next"], base, index)
            modified = any(c[1] != nxt[1] for c in cols)
            differ |= modified
            self.out(self._row(name, cols + [nxt], modified))
        if differ:
            self.out(FOOTER)
        return MLX_CFG_OK

    def set(self, card: dict, pci: str) -> int:
        self.out(self._opening(card, pci, self.device, 1))
        self.out(self.lay.header(self.verbose, True, self.verbose) + "\n")
        values = self._columns(card)
        parsed = []
        try:
            for name, text in self.args:                 # updateParamViewValue: parse every value first
                idx = self._indexes(name)
                hit = fw.lookup(card, idx[0] if idx else name)
                parsed.append(fw.parse_value(hit[0], text) if hit else None)
            items = [(name,) + self._resolve(card, name) for name, _t in self.args]    # then queryParamViews
        except fw.FwError as exc:
            return self.err(str(exc))
        for (name, param, base, index), new in zip(items, parsed):
            cols = [self._cell(param, values[k], base, index) for k in ("default", "current") if k in values]
            nxt = self._cell(param, values["next"], base, index)
            modified = any(c[1] != nxt[1] for c in cols)
            self.out(self._row(name, cols + [nxt, (new[1], new[0])], modified))
        if not self.ask("Apply new Configuration?"):
            self.out("-E- Aborted by user.\n")
            return MLX_CFG_ABORTED
        self.out("Applying... ")
        nv = values["next"]
        try:
            for (name, param, base, index), new in zip(items, parsed):
                if param.array and index is None:        # ArrayParamValue::setVal(string)
                    raise fw.FwError(f"Cannot set the value {new[1]} for the parameter "
                                     f"{param.db_name}({param.name}): Operation is not supported")
                if param.array:
                    nv[base] = list(nv[base])
                    nv[base][index] = new[0]
                else:
                    nv[base] = new[0]
            self._check_rules(card, nv, {base for _n, _p, base, _i in items})
        except fw.FwError as exc:
            self.out("Failed!\n")
            return self.err(str(exc))
        fw.write_nv(card, nv)
        self.out("Done!\n-I- Please reboot machine to load new configurations.\n")
        return MLX_CFG_OK

    @staticmethod
    def _check_rules(card: dict, nv: dict, touched: set) -> None:
        """TLVConf::checkRules for the parameters' own max_val/min_val (the TLVs that are written)."""
        tlvs = {fw.lookup(card, base)[0].tlv for base in touched}
        for full, param, _port in fw.table(card):
            if param.tlv not in tlvs:
                continue
            hi, lo = fw.limit(card, param, "hi"), fw.limit(card, param, "lo")
            if hi is not None and nv[full] > hi:
                raise fw.FwError(f"Parameter {full}' value is larger than maximum allowed {hi}")
            if lo is not None and nv[full] < lo:
                raise fw.FwError(f"Parameter {full}' value is smaller than minimum allowed {lo}")

    def reset(self) -> int:
        if self.device:
            if not self.ask(f"Reset configuration for device {self.device}?"):
                self.out("-E- Aborted by user.\n")
                return MLX_CFG_ABORTED
            self.out("Applying... ")
            opened = open_device(self.device, self.root, any_rdma_name=self.prog == "mlxconfig")
            if opened is None:
                self.out("Failed!\n")
                return self.err("Failed to open the device")
            cards = [opened[0]]
        else:
            pcis = all_functions(self.root)
            if not pcis:
                return self.err("Failed to get devices.")
            if not self.ask("Reset configuration for all devices?"):
                self.out("-E- Aborted by user.\n")
                return MLX_CFG_ABORTED
            self.out("Applying... ")
            exp = sysfs.simhost_profile(self.root)
            cards = {c["pci"]: c for c in (fw.card_of(exp, pci) for pci in pcis) if c}.values()
        for card in cards:                                # NVIA: invalidate the NV store -> factory defaults
            fw.write_nv(card, fw.defaults(card))
        self.out("Done!\n-I- Please reboot machine to load new configurations.\n")
        return MLX_CFG_OK

    def show_confs(self, card: dict) -> int:
        """showDevConfs + GenericCommander::printLongDesc for the catalogue (every TLV of the database the tool
        knows, whatever the device supports: "may support"), ports as many as the card has."""
        self.out(f"\nList of configurations the device {self.device} may support:\n")
        rows: dict = {}
        for full, param, _port in fw.param_table(len(card["ports"]), True):
            rows.setdefault(param.tlv, []).append((full, param))
        for tlv, params in rows.items():
            self.out(f"\t\t{tlv}:\n")
            for full, param in sorted(params, key=lambda fp: fp[0]):
                if param.kind == "num":
                    spec = "NUM"
                else:
                    spec = "|".join(sorted(param.symbols))
                text = f"{' ' * 20}{full + '=<' + spec + '>':<40}"
                if re.search(r"_P[2-8]$", full) and "_P1" not in full:
                    self.out(text + "\n")                 # no description for the ports after the first
                    continue
                self.out(text + param.desc[0] + "\n")
                for line in param.desc[1:]:
                    self.out(" " * 60 + line + "\n")
        return MLX_CFG_OK

    def run(self) -> int:
        if self.cmd == "query" and not self.device:
            pcis = all_functions(self.root)
            if not pcis:
                return self.err("Failed to get devices.")
            rc = MLX_CFG_OK
            exp = sysfs.simhost_profile(self.root)
            for i, pci in enumerate(pcis, 1):
                card = fw.card_of(exp, pci)
                if card is None or self.query(card, pci, pci, i):
                    rc = MLX_CFG_ERROR
            return rc
        if self.cmd == "reset":
            return self.reset()
        if self.cmd not in ("query", "set", "show_confs"):
            return self.err(f"{self.cmd}: not simulated by simhost (see tests/simhost/README.md)")
        opened = open_device(self.device, self.root, any_rdma_name=self.prog == "mlxconfig")
        if opened is None:
            return self.err("Failed to open the device")
        card, pci = opened[0], opened[1]
        if self.cmd == "query":
            return self.query(card, pci, self.device, 1)
        if self.cmd == "set":
            return self.set(card, pci)
        return self.show_confs(card)


def main(argv) -> int:
    prog = "mlxconfig" if os.path.basename(argv[0] if argv else "") == "mlxconfig" else "mstconfig"
    tool = Tool(prog, sysfs.root())
    try:
        what = tool.parse(list(argv[1:]))
    except Usage as exc:
        tool.out(f"-E- {exc}\n" + HELP.format(prog=prog))
        return MLX_CFG_ERROR
    if what == "version":
        tool.out(VERSION[prog])
        return MLX_CFG_OK
    if what == "help":
        tool.out(HELP.format(prog=prog))
        return MLX_CFG_OK
    try:
        return tool.run()
    finally:
        sys.stdout.flush()
