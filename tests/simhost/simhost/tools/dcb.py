"""Fake ``dcb`` (iproute2 >= 6.2: app, apptrust, buffer, dcbx, ets, maxrate, pfc) over the simulated mlx5 driver.

Follows iproute2 dcb/*.c: every token is printed with a trailing blank and each parameter line ends in a
newline (``pfc-cap 8 macsec-bypass off delay 7 ``), ``-j`` prints one compact JSON object (``-p`` indents it by
4) and a newline, ``-N`` prints DSCP keys as numbers (else rt_dsfield names, read from /etc/iproute2 or
/usr/share/iproute2 like the real tool, standard names when neither exists), ``set`` reads the current
attribute first, keywords may be abbreviated (matches()), errors go to stderr as the real tool prints them
(checked against real iproute2 6.1 runs in tests/fixtures/real/qos-firmware/) with exit status 1, 255 for
an incomplete command line. Kernel answers come from simhost.qos: a netdev that does not exist gives ENODEV,
one without mlx5 dcbnl ops (lo, the OOB veth, IPoIB) EOPNOTSUPP. mlx5 has no apptrust op: ``apptrust show``
finds no attribute ("Attribute not found: Success", errno untouched) and ``apptrust set`` gets EOPNOTSUPP.
"""

from __future__ import annotations

import errno
import getopt
import json
import os
import re
import sys
from pathlib import Path

from .. import kernelfs, qos

VERSION = "6.2.0"
PRIO_MAX = 7


class Fail(Exception):
    """Leave dcb_cmd with ``code`` (1 = EXIT_FAILURE after dcb_fini, 255 = exit(-1) inside NEXT_ARG)."""

    def __init__(self, code=1):
        super().__init__(code)
        self.code = code


def _err(text: str) -> None:
    sys.stderr.write(text)


def matches(arg: str, keyword: str) -> bool:
    """iproute2 matches(): ``arg`` is a non-empty prefix of ``keyword``."""
    return bool(arg) and keyword.startswith(arg)


HELP_MAIN = (
    "Usage: dcb [ OPTIONS ] OBJECT { COMMAND | help }\n"
    "       dcb [ -f | --force ] { -b | --batch } filename [ -n | --netns ] netnsname\n"
    "where  OBJECT := { app | apptrust | buffer | dcbx | ets | maxrate | pfc }\n"
    "       OPTIONS := [ -V | --Version | -i | --iec | -j | --json\n"
    "                  | -N | --Numeric | -p | --pretty\n"
    "                  | -s | --statistics | -v | --verbose]\n")
HELP = {
    "pfc_show": ("Usage: dcb [ -s ] pfc show dev STRING\n"
                 "           [ pfc-cap ] [ prio-pfc ] [ macsec-bypass ]\n"
                 "           [ delay ] [ requests ] [ indications ]\n\n"),
    "pfc_set": ("Usage: dcb pfc set dev STRING\n"
                "           [ prio-pfc PFC-MAP ]\n"
                "           [ macsec-bypass { on | off } ]\n"
                "           [ delay INTEGER ]\n\n"
                " where PFC-MAP := [ PFC-MAP ] PFC-MAPPING\n"
                "       PFC-MAPPING := { all | TC }:PFC\n"
                "       TC := { 0 .. 7 }\n"
                "       PFC := { on | off }\n\n"),
    "ets_show": ("Usage: dcb ets show dev STRING\n"
                 "           [ willing | ets-cap | cbs | tc-tsa | reco-tc-tsa |\n"
                 "             pg-bw | tc-bw | reco-tc-bw | prio-tc |\n"
                 "             reco-prio-tc ]\n\n"),
    "ets_set": ("Usage: dcb ets set dev STRING\n"
                "           [ willing { on | off } ]\n"
                "           [ { tc-tsa | reco-tc-tsa } TSA-MAP ]\n"
                "           [ { pg-bw | tc-bw | reco-tc-bw } BW-MAP ]\n"
                "           [ { prio-tc | reco-prio-tc } PRIO-MAP ]\n\n"
                " where TSA-MAP := [ TSA-MAP ] TSA-MAPPING\n"
                "       TSA-MAPPING := { all | TC }:{ strict | cbs | ets | vendor }\n"
                "       BW-MAP := [ BW-MAP ] BW-MAPPING\n"
                "       BW-MAPPING := { all | TC }:INTEGER\n"
                "       PRIO-MAP := [ PRIO-MAP ] PRIO-MAPPING\n"
                "       PRIO-MAPPING := { all | PRIO }:TC\n"
                "       TC := { 0 .. 7 }\n"
                "       PRIO := { 0 .. 7 }\n\n"),
    "app_add": ("Usage: dcb app { add | del | replace } dev STRING\n"
                "           [ default-prio PRIO ]\n"
                "           [ ethtype-prio ET:PRIO ]\n"
                "           [ stream-port-prio PORT:PRIO ]\n"
                "           [ dgram-port-prio PORT:PRIO ]\n"
                "           [ port-prio PORT:PRIO ]\n"
                "           [ dscp-prio INTEGER:PRIO ]\n"
                "           [ pcp-prio PCP:PRIO ]\n\n"
                " where PRIO := { 0 .. 7 }\n"
                "       ET := { 0x600 .. 0xffff }\n"
                "       PORT := { 1 .. 65535 }\n"
                "       DSCP := { 0 .. 63 }\n"
                "       PCP := { 0(nd/de) .. 7(nd/de) }\n\n"),
    "app_show": ("Usage: dcb app { show | flush } dev STRING\n"
                 "           [ default-prio ]\n"
                 "           [ ethtype-prio ]\n"
                 "           [ stream-port-prio ]\n"
                 "           [ dgram-port-prio ]\n"
                 "           [ port-prio ]\n"
                 "           [ dscp-prio ]\n"
                 "           [ pcp-prio ]\n\n"),
    "apptrust_show": "Usage: dcb apptrust show dev STRING\n       [ order ]\n\n",
    "apptrust_set": ("Usage: dcb apptrust set dev STRING\n"
                     "       [ order [ ethtype | stream-port | dgram-port | port | dscp | pcp ] ]\n\n"),
    "buffer_show": ("Usage: dcb buffer show dev STRING\n"
                    "           [ prio-buffer ] [ buffer-size ] [ total-size ]\n\n"),
    "buffer_set": ("Usage: dcb buffer set dev STRING\n"
                   "           [ prio-buffer PRIO-MAP ]\n"
                   "           [ buffer-size SIZE-MAP ]\n\n"
                   " where PRIO-MAP := [ PRIO-MAP ] PRIO-MAPPING\n"
                   "       PRIO-MAPPING := { all | PRIO }:BUFFER\n"
                   "       SIZE-MAP := [ SIZE-MAP ] SIZE-MAPPING\n"
                   "       SIZE-MAPPING := { all | BUFFER }:INTEGER\n"
                   "       PRIO := { 0 .. 7 }\n"
                   "       BUFFER := { 0 .. 7 }\n\n"),
    "dcbx_show": "Usage: dcb dcbx show dev STRING\n\n",
    "dcbx_set": "Usage: dcb dcbx set dev STRING\n           [ host | lld-managed ]\n           [ cee | ieee ] [ static ]\n\n",
    "maxrate_show": "Usage: dcb [ -i ] maxrate show dev STRING\n           [ tc-maxrate ]\n\n",
    "maxrate_set": ("Usage: dcb [ -i ] maxrate set dev STRING\n"
                    "           [ tc-maxrate RATE-MAP ]\n\n"
                    " where RATE-MAP := [ RATE-MAP ] RATE-MAPPING\n"
                    "       RATE-MAPPING := { all | TC }:RATE\n"
                    "       TC := { 0 .. 7 }\n\n"),
}


def _help(obj: str) -> None:
    _err("Usage: dcb %s help\n\n" % obj)
    _err(HELP[obj + "_show"])
    _err(HELP[obj + ("_add" if obj == "app" else "_set")])


# ------------------------------------------------------------------------------------------ output
class Out:
    """print_*() of iproute2 json_print: text (each value with its trailing blank) or one JSON object."""

    def __init__(self, json_mode: bool, pretty: bool):
        self.json = json_mode
        self.pretty = pretty
        self.text = ""
        self.obj: dict = {}

    def fp(self, text: str) -> None:
        if not self.json:
            self.text += text

    def nl(self) -> None:
        self.fp("\n")

    def put(self, key: str, value) -> None:
        if self.json:
            self.obj[key] = value

    def dump(self) -> str:
        if self.json:
            return json.dumps(self.obj, indent=4 if self.pretty else None, separators=(",", ": ") if self.pretty else (",", ":"))
        return self.text


def _on_off(val) -> str:
    return "on" if val else "off"


def _named_array(out: Out, json_name: str, fp_name: str, values: list, fmt=str) -> None:
    out.put(json_name, values)
    out.fp(fp_name + " " + "".join("%d:%s " % (i, fmt(v)) for i, v in enumerate(values)))


def sprint_size(size: int) -> str:
    """iproute2 sprint_size(): Mb/Kb when within rounding of a whole number, else bytes."""
    kilo, mega = 1024, 1024 * 1024
    if size >= mega and abs(mega * round(size / mega) - size) < 1024:
        return "%gMb" % round(size / mega)
    if size >= kilo and abs(kilo * round(size / kilo) - size) < 16:
        return "%gKb" % round(size / kilo)
    return "%ub" % size


def sprint_rate(rate_bytes: int, iec: bool) -> str:
    units = ["", "K", "M", "G", "T"]
    kilo = 1024 if iec else 1000
    rate = rate_bytes * 8
    i = 0
    while i < len(units) - 1:
        if rate < kilo or (rate % kilo != 0 and rate < 1000 * kilo):
            break
        rate //= kilo
        i += 1
    return "%.0f%s%sbit" % (rate, units[i], "i" if iec else "")


# ---------------------------------------------------------------------------------------- parsing
def _get_u(text: str, bits: int):
    """get_u8/u16/u32(.., base 0): decimal, 0x hex or 0 octal; None on error or overflow."""
    try:
        val = int(text, 8) if re.match(r"^0[0-7]+$", text) else int(text, 0)
    except ValueError:
        return None
    return val if 0 <= val < (1 << bits) else None


def _one_of(msg: str, val: str, names: list):
    for i, name in enumerate(names):
        if name and matches(val, name):
            return i
    _err("Error: argument of \"%s\" must be one of %snot \"%s\"\n" % (msg, "".join('"%s", ' % n for n in names if n), val))
    return None


def _parse_mapping(args: list, key_cb, value_cb) -> int:
    """parse_mapping_gen(): consume KEY:VALUE tokens; 0, or 1 on the first bad one (left at args[0], cut at
    the colon, as the real tool leaves it for its "Invalid ... mapping %s" message)."""
    while args:
        if ":" not in args[0]:
            break
        key_text, value = args[0].split(":", 1)
        key = key_cb(key_text)
        if key is None or value_cb(key, value):
            args[0] = key_text
            return 1
        args.pop(0)
    return 0


def _num_all(text: str):
    return -1 if text == "all" else _get_u(text, 32)


def _dcb_mapping(what_key, key, max_key, what_value, value, max_value, setter) -> int:
    if key != -1 and key > max_key:
        _err("In %s:%s mapping, %s is expected to be 0..%d\n" % (what_key, what_value, what_key, max_key))
        return -errno.EINVAL
    if value > max_value:
        _err("In %s:%s mapping, %s is expected to be 0..%d\n" % (what_key, what_value, what_value, max_value))
        return -errno.EINVAL
    for k in (range(max_key + 1) if key == -1 else [key]):
        setter(k, value)
    return 0


STANDARD_DSFIELD = {0x0: "default", 0x28: "AF11", 0x30: "AF12", 0x38: "AF13", 0x48: "AF21", 0x50: "AF22",
                    0x58: "AF23", 0x68: "AF31", 0x70: "AF32", 0x78: "AF33", 0x88: "AF41", 0x90: "AF42", 0x98: "AF43",
                    0x20: "CS1", 0x40: "CS2", 0x60: "CS3", 0x80: "CS4", 0xA0: "CS5", 0xC0: "CS6", 0xE0: "CS7",
                    0xB8: "EF"}


def _dsfield_table() -> dict:
    """rt_dsfield as the real tool reads it (dsfield byte -> name); the standard table when no file exists."""
    for path in ("/etc/iproute2/rt_dsfield", "/usr/share/iproute2/rt_dsfield"):
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        names = {}
        for line in text.splitlines():
            parts = line.split("#", 1)[0].split()
            if len(parts) >= 2:
                try:
                    names[int(parts[0], 0)] = parts[1]
                except ValueError:
                    continue
        return names
    return dict(STANDARD_DSFIELD)


# ------------------------------------------------------------------------------------- the "kernel"
class Dev:
    def __init__(self, name: str):
        self.name = name
        self.kind = qos.netdev_kind(name)

    def read(self) -> dict:
        if self.kind != "mlx5":
            _err("Attribute read: %s\n" % os.strerror(errno.ENODEV if self.kind is None else errno.EOPNOTSUPP))
            raise Fail(1)
        return qos.load(self.name)

    def write(self, st: dict, ops) -> None:
        """Apply [(op, args...)] in order as dcbnl_ieee_set does (stop at the first error, keep the rest)."""
        if self.kind != "mlx5":
            _err("Attribute write: %s\n" % os.strerror(errno.ENODEV if self.kind is None else errno.EOPNOTSUPP))
            raise Fail(1)
        for op, *args in ops:
            code = op(st, *args)
            if code:
                qos.save(self.name, st)
                _err("Attribute write: %s\n" % os.strerror(code))
                raise Fail(1)
        qos.save(self.name, st)


def _parse_dev(args: list, help_key: str):
    """dcb_cmd_parse_dev()."""
    if not args or matches(args[0], "help"):
        _err(HELP[help_key])
        return None
    if matches(args[0], "dev"):
        if len(args) < 2:
            _err("Command line is not complete. Try option \"help\"\n")
            raise Fail(255)
        name = args[1]
        if not name or len(name) >= 16 or "/" in name or any(c.isspace() for c in name):
            _err("Error: argument \"%s\" is wrong: not a valid ifname\n" % name)
            raise Fail(255)
        del args[:2]
        return Dev(name)
    _err("Expected `dev DEV', not `%s'" % args[0])
    _err(HELP[help_key])
    raise Fail(1)


# ----------------------------------------------------------------------------------------------- pfc
def _pfc_print(out: Out, st: dict, what: str, stats: bool, netdev: str) -> None:
    pfc = [(st["pfc_en"] >> p) & 1 for p in range(8)]
    if what in ("all", "pfc-cap"):
        out.put("pfc_cap", 8)
        out.fp("pfc-cap 8 ")
    if what in ("all", "macsec-bypass"):
        out.put("macsec_bypass", False)
        out.fp("macsec-bypass off ")
    if what in ("all", "delay"):
        out.put("delay", st["cable_len"])
        out.fp("delay %d " % st["cable_len"])
    if what == "all":
        out.nl()
    if what in ("all", "prio-pfc"):
        out.put("prio_pfc", [bool(v) for v in pfc])
        out.fp("prio-pfc " + "".join("%d:%s " % (i, _on_off(v)) for i, v in enumerate(pfc)))
        out.nl()
    for name, counter in (("requests", "tx_prio%d_pause"), ("indications", "rx_prio%d_pause")):
        if (what == "all" and stats) or what == name:
            values = [qos.invented_counter(netdev, counter % p) for p in range(8)]
            _named_array(out, name, name, values)
            out.nl()
    if what not in ("all", "prio-pfc", "requests", "indications"):
        out.nl()


def cmd_pfc(args: list, opts: dict, out: Out) -> int:
    if not args or matches(args[0], "help"):
        _help("pfc")
        return 0
    sub = args.pop(0)
    if matches(sub, "show"):
        dev = _parse_dev(args, "pfc_show")
        if dev is None:
            return 0
        st = dev.read()
        if not args:
            _pfc_print(out, st, "all", opts["stats"], dev.name)
            return 0
        while args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["pfc_show"])
                return 0
            for name in ("prio-pfc", "pfc-cap", "macsec-bypass", "delay", "requests", "indications"):
                if matches(word, name):
                    _pfc_print(out, st, name, opts["stats"], dev.name)
                    break
            else:
                _err("What is \"%s\"?\n" % word)
                _err(HELP["pfc_show"])
                return 1
        return 0
    if matches(sub, "set"):
        dev = _parse_dev(args, "pfc_set")
        if dev is None:
            return 0
        if not args:
            _err(HELP["pfc_set"])
            return 0
        st = dev.read()
        bits = [(st["pfc_en"] >> p) & 1 for p in range(8)]
        delay = None
        while args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["pfc_set"])
                return 0
            if matches(word, "prio-pfc"):
                if not args:
                    _err("Command line is not complete. Try option \"help\"\n")
                    raise Fail(255)

                def on_off_cb(key, value):
                    val = _one_of("PFC", value, ["off", "on"])
                    if val is None:
                        return 1
                    return _dcb_mapping("PRIO", key, 7, "PFC", val, 1 << 32, lambda k, v: bits.__setitem__(k, v))
                if _parse_mapping(args, _num_all, on_off_cb):
                    _err("Invalid pfc mapping %s\n" % args[0])
                    return 1
                continue
            if matches(word, "macsec-bypass"):
                if not args:
                    _err("Command line is not complete. Try option \"help\"\n")
                    raise Fail(255)
                if _one_of("macsec-bypass", args.pop(0), ["off", "on"]) is None:
                    return 1
                continue
            if matches(word, "delay"):
                if not args:
                    _err("Command line is not complete. Try option \"help\"\n")
                    raise Fail(255)
                value = args.pop(0)
                delay = _get_u(value, 16)
                if delay is None:
                    _err("Invalid delay `%s', expected an integer 0..65535\n" % value)
                    return 1
                continue
            _err("What is \"%s\"?\n" % word)
            _err(HELP["pfc_set"])
            return 1
        pfc_en = sum(1 << p for p in range(8) if bits[p])
        dev.write(st, [(qos.setpfc, pfc_en, st["cable_len"] if delay is None else delay)])
        return 0
    _err("What is \"%s\"?\n" % sub)
    _help("pfc")
    return 1


# ----------------------------------------------------------------------------------------------- ets
_TSA = ["strict", "cbs", "ets"]


def _tsa_name(code: int) -> str:
    return qos.TSA_NAMES.get(code, "???")


def _ets_view(st: dict) -> dict:
    ets = st["ets"]
    return {"willing": 0, "ets_cap": 8, "cbs": 0, "tc_bw": list(ets["tc_bw"]), "pg_bw": [0] * 8,
            "tc_tsa": list(ets["tc_tsa"]), "prio_tc": list(ets["prio_tc"]), "reco_tc_bw": [0] * 8,
            "reco_tc_tsa": [0] * 8, "reco_prio_tc": [0] * 8}


_ETS_ITEMS = ("willing", "ets-cap", "cbs", "tc-bw", "pg-bw", "tc-tsa", "prio-tc", "reco-tc-bw", "reco-tc-tsa",
              "reco-prio-tc")
_ETS_SHOW_ORDER = ("willing", "ets-cap", "cbs", "tc-tsa", "reco-tc-tsa", "tc-bw", "pg-bw", "reco-tc-bw", "prio-tc",
                   "reco-prio-tc")


def _ets_item(out: Out, view: dict, item: str) -> None:
    key = item.replace("-", "_")
    if item in ("willing", "cbs"):
        out.put(key, bool(view[key]))
        out.fp("%s %s " % (item, _on_off(view[key])))
    elif item == "ets-cap":
        out.put("ets_cap", view["ets_cap"])
        out.fp("ets-cap %d " % view["ets_cap"])
    elif item.endswith("tsa"):
        names = [_tsa_name(v) for v in view[key]]
        out.put(key, names)
        out.fp(item + " " + "".join("%d:%s " % (i, n) for i, n in enumerate(names)))
    else:
        _named_array(out, key, item, view[key])


def _ets_bw_ok(bw: list, tsa: list, what: str) -> bool:
    for tc, val in enumerate(bw):
        if val > 100:
            _err("%d%% for TC %d of %s is not a valid bandwidth percentage, expected 0..100%%\n" % (val, tc, what))
            return False
    total = sum(bw)
    has_ets = qos.TSA_ETS in tsa
    if total == 100 or (not has_ets and total == 0):
        return True
    _err("Bandwidth percentages in %s sum to %d%%, expected %d%%\n" % (what, total, 100 if has_ets else 0))
    return False


def cmd_ets(args: list, opts: dict, out: Out) -> int:
    if not args or matches(args[0], "help"):
        _help("ets")
        return 0
    sub = args.pop(0)
    if matches(sub, "show"):
        dev = _parse_dev(args, "ets_show")
        if dev is None:
            return 0
        view = _ets_view(dev.read())
        if not args:
            for group in (("willing", "ets-cap", "cbs"), ("tc-bw",), ("pg-bw",), ("tc-tsa",), ("prio-tc",),
                          ("reco-tc-bw",), ("reco-tc-tsa",), ("reco-prio-tc",)):
                for item in group:
                    _ets_item(out, view, item)
                out.nl()
            return 0
        while args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["ets_show"])
                return 0
            item = next((i for i in _ETS_SHOW_ORDER if matches(word, i)), None)
            if item is None:
                _err("What is \"%s\"?\n" % word)
                _err(HELP["ets_show"])
                return 1
            _ets_item(out, view, item)
            out.nl()
        return 0
    if matches(sub, "set"):
        dev = _parse_dev(args, "ets_set")
        if dev is None:
            return 0
        if not args:
            _err(HELP["ets_set"])
            return 1
        st = dev.read()
        view = _ets_view(st)
        while args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["ets_set"])
                return 0
            if matches(word, "willing"):
                if not args:
                    _err("Command line is not complete. Try option \"help\"\n")
                    raise Fail(255)
                val = _one_of("willing", args.pop(0), ["off", "on"])
                if val is None:
                    return 1
                view["willing"] = val
                continue
            item = next((i for i in ("tc-tsa", "reco-tc-tsa", "tc-bw", "pg-bw", "reco-tc-bw", "prio-tc", "reco-prio-tc")
                         if matches(word, i)), None)
            if item is None:
                _err("What is \"%s\"?\n" % word)
                _err(HELP["ets_set"])
                return 1
            if not args:
                _err("Command line is not complete. Try option \"help\"\n")
                raise Fail(255)
            key = item.replace("-", "_")
            target = view[key]

            def cb(k, value, item=item, target=target):
                if item.endswith("tsa"):
                    names = ["strict", "cbs", "ets"] + [None] * 252 + ["vendor"]
                    code = _one_of("TSA", value, names)
                    if code is None:
                        return 1
                    return _dcb_mapping("TC", k, 7, "TSA", code, 1 << 32, target.__setitem__)
                num = _get_u(value, 8)
                if num is None:
                    return 1
                if item.endswith("prio-tc"):
                    return _dcb_mapping("PRIO", k, 7, "TC", num, 7, target.__setitem__)
                return _dcb_mapping("TC", k, 7, "BW", num, 100, target.__setitem__)
            if _parse_mapping(args, _num_all, cb):
                _err("Invalid %s mapping %s\n" % (item, args[0]))
                return 1
        if not _ets_bw_ok(view["tc_bw"], view["tc_tsa"], "tc-bw") or \
                not _ets_bw_ok(view["reco_tc_bw"], view["reco_tc_tsa"], "reco-tc-bw"):
            return 1
        dev.write(st, [(qos.setets, view["prio_tc"], view["tc_tsa"], view["tc_bw"])])
        return 0
    _err("What is \"%s\"?\n" % sub)
    _help("ets")
    return 1


# ----------------------------------------------------------------------------------------------- app
_APP_SELECTORS = {"ethtype-prio": 1, "stream-port-prio": 2, "dgram-port-prio": 3, "port-prio": 4, "dscp-prio": 5,
                  "pcp-prio": 255}


def _app_parse(dev: Dev, args: list) -> list | None:
    """dcb_cmd_app_parse_add_del(): [(selector, priority, protocol)] or None after an error (message printed)."""
    tab: list = []
    if not args:
        _err(HELP["app_add"])
        return []
    dsf = None
    while args:
        word = args.pop(0)
        if matches(word, "help"):
            _err(HELP["app_add"])
            return []
        if matches(word, "ethtype-prio"):
            sel = "ethtype-prio"
        elif matches(word, "default-prio"):
            sel = "default-prio"
        elif matches(word, "dscp-prio"):
            sel = "dscp-prio"
        elif matches(word, "stream-port-prio"):
            sel = "stream-port-prio"
        elif matches(word, "dgram-port-prio"):
            sel = "dgram-port-prio"
        elif matches(word, "port-prio"):
            sel = "port-prio"
        elif word == "pcp-prio":
            sel = "pcp-prio"
        else:
            _err("What is \"%s\"?\n" % word)
            _err(HELP["app_add"])
            return None
        if not args:
            _err("Command line is not complete. Try option \"help\"\n")
            raise Fail(255)
        if sel == "default-prio":
            while args:
                prio = _get_u(args[0], 8)
                if prio is None:
                    break
                tab.append((1, prio, 0))
                args.pop(0)
            if args and ":" not in args[0] and not any(matches(args[0], s) for s in list(_APP_SELECTORS) + ["default-prio"]):
                _err("Invalid default priority %s\n" % args[0])
                return None
            continue
        selector = _APP_SELECTORS[sel]

        def key_cb(text, sel=sel):
            nonlocal dsf
            if sel == "dscp-prio":
                key = _num_all(text)
                if key is not None:
                    return key
                if dsf is None:
                    dsf = dict((v, k) for k, v in _dsfield_table().items())
                if text not in dsf:
                    return None
                if dsf[text] & 0x3:
                    _err("The values `%s' uses non-DSCP bits.\n" % text)
                    return None
                return dsf[text] >> 2
            return _num_all(text)

        def value_cb(key, value, sel=sel, selector=selector):
            prio = _get_u(value, 8)
            if prio is None:
                return 1
            limits = {"dscp-prio": ("DSCP", 63), "ethtype-prio": ("ETHTYPE", 0xFFFF), "pcp-prio": ("PCP", 15)}
            what, top = limits.get(sel, ("PORT", 0xFFFF))
            if sel == "ethtype-prio" and key < 0x600:
                _err("Protocol IDs < 0x600 are reserved for EtherType\n")
                return 1
            return _dcb_mapping(what, key, top, "PRIO", prio, PRIO_MAX, lambda k, v: tab.append((selector, v, k)))
        if _parse_mapping(args, key_cb, value_cb):
            _err("Invalid mapping %s\n" % args[0])
            return None
    return tab


def _app_print(out: Out, apps: list, numeric: bool, only: str | None = None) -> None:
    apps = sorted(apps, key=lambda a: (a[2], a[1]))     # dcb_app_cmp: protocol, then priority
    names = None if numeric else _dsfield_table()

    def group(json_name, fp_name, flt, key_fmt):
        entries = [a for a in apps if flt(a)]
        if not entries:
            return
        out.put(json_name, [[a[2] if json_name != "pcp_prio" else key_fmt(a[2]), a[1]] for a in entries])
        out.fp(fp_name + " " + "".join("%s:%d " % (key_fmt(a[2]), a[1]) for a in entries))
        out.nl()

    def dscp_key(proto):
        return names.get(proto << 2, str(proto)) if names else str(proto)

    order = [
        ("ethtype_prio", "ethtype-prio", lambda a: a[0] == 1 and a[2] != 0, lambda p: "%x" % p),
        ("default_prio", "default-prio", None, None),
        ("dscp_prio", "dscp-prio", lambda a: a[0] == 5, dscp_key),
        ("stream_port_prio", "stream-port-prio", lambda a: a[0] == 2, str),
        ("dgram_port_prio", "dgram-port-prio", lambda a: a[0] == 3, str),
        ("port_prio", "port-prio", lambda a: a[0] == 4, str),
        ("pcp_prio", "pcp-prio", lambda a: a[0] == 255, lambda p: str(p) if numeric or p > 15 else
         ["0nd", "1nd", "2nd", "3nd", "4nd", "5nd", "6nd", "7nd", "0de", "1de", "2de", "3de", "4de", "5de", "6de", "7de"][p]),
    ]
    for json_name, fp_name, flt, key_fmt in order:
        if only is not None and fp_name != only:
            continue
        if json_name == "default_prio":
            prios = [a[1] for a in apps if a[0] == 1 and a[2] == 0]
            if prios:
                out.put("default_prio", prios)
                out.fp("default-prio " + "".join("%d " % p for p in prios))
                out.nl()
            continue
        group(json_name, fp_name, flt, key_fmt)


def cmd_app(args: list, opts: dict, out: Out) -> int:  # noqa: C901
    if not args or matches(args[0], "help"):
        _help("app")
        return 0
    sub = args.pop(0)
    if matches(sub, "show"):
        dev = _parse_dev(args, "app_show")
        if dev is None:
            return 0
        apps = dev.read()["apps"]
        if not args:
            _app_print(out, apps, opts["numeric"])
            return 0
        while args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["app_show"])
                return 0
            item = next((s for s in ("ethtype-prio", "dscp-prio", "stream-port-prio", "dgram-port-prio", "port-prio",
                                     "default-prio") if matches(word, s)), "pcp-prio" if word == "pcp-prio" else None)
            if item is None:
                _err("What is \"%s\"?\n" % word)
                _err(HELP["app_show"])
                return 1
            _app_print(out, apps, opts["numeric"], item)
        return 0
    if matches(sub, "flush"):
        dev = _parse_dev(args, "app_show")
        if dev is None:
            return 0
        st = dev.read()
        apps = [tuple(a) for a in st["apps"]]
        flt = None
        while args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["app_show"])
                return 0
            sels = {"ethtype-prio": lambda a: a[0] == 1 and a[2] != 0, "default-prio": lambda a: a[0] == 1 and a[2] == 0,
                    "dscp-prio": lambda a: a[0] == 5}
            item = next((s for s in sels if matches(word, s)), None)
            if item is None and word == "pcp-prio":
                sels["pcp-prio"] = lambda a: a[0] == 255
                item = "pcp-prio"
            if item is None:
                _err("What is \"%s\"?\n" % word)
                _err(HELP["app_show"])
                return 1
            flt = sels[item]
            todo = [a for a in apps if flt(a)]
            if todo:
                dev.write(st, [(qos.delapp, *a) for a in todo])
        if flt is None and apps:
            dev.write(st, [(qos.delapp, *a) for a in apps])
        return 0
    for name, kind in (("add", "add"), ("del", "del"), ("replace", "replace")):
        if matches(sub, name):
            break
    else:
        _err("What is \"%s\"?\n" % sub)
        _help("app")
        return 1
    dev = _parse_dev(args, "app_add")
    if dev is None:
        return 0
    if kind == "replace":
        st = dev.read()
        orig = [tuple(a) for a in st["apps"]]
        tab = _app_parse(dev, args)
        if tab is None:
            return 0
        new = [a for a in tab if a not in orig]
        if new:
            try:
                dev.write(st, [(qos.setapp, *a) for a in new])
            except Fail:
                _err("Could not add new APP entries\n")
                return 0
        stale = [a for a in orig if any(a[0] == b[0] and a[2] == b[2] for b in tab) and a not in tab]
        if stale:
            try:
                dev.write(st, [(qos.delapp, *a) for a in stale])
            except Fail:
                _err("Could not remove replaced APP entries\n")
                return 0
        return 0
    tab = _app_parse(dev, args)
    if tab is None:
        return 1
    if tab:
        st = qos.load(dev.name) if dev.kind == "mlx5" else {}
        dev.write(st, [(qos.setapp if kind == "add" else qos.delapp, *a) for a in tab])
    return 0


# ------------------------------------------------------------------------------------------ apptrust
def cmd_apptrust(args: list, opts: dict, out: Out) -> int:
    if not args or args[0] == "help":
        _err("Usage: dcb apptrust help\n\n" + HELP["apptrust_show"] + HELP["apptrust_set"])
        return 0
    sub = args.pop(0)
    if sub == "show":
        dev = _parse_dev(args, "apptrust_show")
        if dev is None:
            return 0
        dev.read()
        _err("Attribute not found: Success\n")          # mlx5 has no dcbnl_getapptrust: no attribute in the reply
        return 1
    if sub == "set":
        dev = _parse_dev(args, "apptrust_set")
        if dev is None:
            return 0
        if not args:
            _err(HELP["apptrust_set"])
            return 0
        names = ["ethtype", "stream-port", "dgram-port", "port", "dscp", "pcp"]
        seen: list = []
        while args:
            word = args.pop(0)
            if word == "help":
                _err(HELP["apptrust_set"])
                return 0
            if word != "order":
                _err("What is \"%s\"?\n" % word)
                _err(HELP["apptrust_set"])
                return 1
            while args and args[0] in names:
                if args[0] in seen:
                    _err("Duplicate selector: %s\n" % args[0])
                    _err("Invalid list of selectors\n")
                    return 1
                seen.append(args.pop(0))
        if dev.kind is None:
            _err("Attribute write: %s\n" % os.strerror(errno.ENODEV))
            return 1
        _err("Attribute write: %s\n" % os.strerror(errno.EOPNOTSUPP))   # no dcbnl_setapptrust in mlx5
        return 1
    _err("What is \"%s\"?\n" % sub)
    _err("Usage: dcb apptrust help\n\n" + HELP["apptrust_show"] + HELP["apptrust_set"])
    return 1


# -------------------------------------------------------------------------------------------- buffer
def _get_size(text: str):
    """iproute2 get_size(): bytes with optional k/m/g (1024-based), kbit/mbit/gbit, b suffix."""
    m = re.match(r"^(\d+(?:\.\d+)?)([A-Za-z]*)$", text)
    if not m:
        return None
    mult = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024 ** 2, "mb": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3,
            "kbit": 1024 // 8, "mbit": 1024 ** 2 // 8, "gbit": 1024 ** 3 // 8}.get(m.group(2).lower())
    if mult is None:
        return None
    return int(float(m.group(1)) * mult)


def cmd_buffer(args: list, opts: dict, out: Out) -> int:
    if not args or matches(args[0], "help"):
        _help("buffer")
        return 0
    sub = args.pop(0)
    if matches(sub, "show"):
        dev = _parse_dev(args, "buffer_show")
        if dev is None:
            return 0
        buf = dev.read()["buffer"]
        items = []
        if not args:
            items = ["prio-buffer", "buffer-size", "total-size"]
        while args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["buffer_show"])
                return 0
            item = next((i for i in ("prio-buffer", "buffer-size", "total-size") if matches(word, i)), None)
            if item is None:
                _err("What is \"%s\"?\n" % word)
                _err(HELP["buffer_show"])
                return 1
            items.append(item)
        for item in items:
            if item == "prio-buffer":
                _named_array(out, "prio_buffer", "prio-buffer", buf["prio2buffer"])
            elif item == "buffer-size":
                out.put("buffer_size", buf["buffer_size"])
                out.fp("buffer-size " + "".join("%d:%s " % (i, sprint_size(s)) for i, s in enumerate(buf["buffer_size"])))
            else:
                out.put("total_size", buf["total_size"])
                out.fp("total-size %s " % sprint_size(buf["total_size"]))
            out.nl()
        return 0
    if matches(sub, "set"):
        dev = _parse_dev(args, "buffer_set")
        if dev is None:
            return 0
        if not args:
            _err(HELP["buffer_set"])
            return 0
        st = dev.read()
        prio2buffer = list(st["buffer"]["prio2buffer"])
        sizes = list(st["buffer"]["buffer_size"])
        while args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["buffer_set"])
                return 0
            item = next((i for i in ("prio-buffer", "buffer-size") if matches(word, i)), None)
            if item is None:
                _err("What is \"%s\"?\n" % word)
                _err(HELP["buffer_set"])
                return 1
            if not args:
                _err("Command line is not complete. Try option \"help\"\n")
                raise Fail(255)

            def cb(k, value, item=item):
                if item == "prio-buffer":
                    num = _get_u(value, 8)
                    if num is None:
                        return 1
                    return _dcb_mapping("PRIO", k, 7, "BUFFER", num, 7, prio2buffer.__setitem__)
                size = _get_size(value)
                if size is None:
                    _err("Invalid size `%s'\n" % value)
                    return 1
                return _dcb_mapping("BUFFER", k, 7, "SIZE", size, (1 << 32) - 1, sizes.__setitem__)
            if _parse_mapping(args, _num_all, cb):
                _err("Invalid %s mapping %s\n" % (item, args[0]))
                return 1
        dev.write(st, [(qos.setbuffer, prio2buffer, sizes)])
        return 0
    _err("What is \"%s\"?\n" % sub)
    _help("buffer")
    return 1


# ---------------------------------------------------------------------------------------------- dcbx
_DCBX = [(qos.DCBX_HOST, "host", "host"), (qos.DCBX_LLD_MANAGED, "lld-managed", "lld_managed"),
         (qos.DCBX_CEE, "cee", "cee"), (qos.DCBX_IEEE, "ieee", "ieee"), (qos.DCBX_STATIC, "static", "static")]


def cmd_dcbx(args: list, opts: dict, out: Out) -> int:
    if not args or matches(args[0], "help"):
        _help("dcbx")
        return 0
    sub = args.pop(0)
    if matches(sub, "show"):
        dev = _parse_dev(args, "dcbx_show")
        if dev is None:
            return 0
        mode = dev.read()["dcbx"]
        if args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["dcbx_show"])
                return 0
            _err("What is \"%s\"?\n" % word)
            _err(HELP["dcbx_show"])
            return 1
        for bit, fp_name, json_name in _DCBX:
            if mode & bit:
                out.put(json_name, True)
                out.fp(fp_name + " ")
        out.nl()
        return 0
    if matches(sub, "set"):
        dev = _parse_dev(args, "dcbx_set")
        if dev is None:
            return 0
        if not args:
            _err(HELP["dcbx_set"])
            return 0
        mode = 0
        while args:
            word = args.pop(0)
            if matches(word, "help"):
                _err(HELP["dcbx_set"])
                return 0
            flag = next((bit for bit, fp_name, _j in _DCBX if matches(word, fp_name)), None)
            if flag is None:
                _err("What is \"%s\"?\n" % word)
                _err(HELP["dcbx_set"])
                return 1
            mode |= flag
        st = dev.read() if dev.kind == "mlx5" else {}
        if dev.kind == "mlx5" and qos.setdcbx(st, mode):
            _err("Attribute write: Unknown error -1\n")      # setdcbx answers 1, not an errno
            return 1
        dev.write(st, [])
        return 0
    _err("What is \"%s\"?\n" % sub)
    _help("dcbx")
    return 1


# ------------------------------------------------------------------------------------------- maxrate
def _get_rate(text: str):
    """iproute2 get_rate64(): bits per second with bit/kbit/mbit/gbit/tbit, bps/kbps/... or kibit ... -> bytes/s."""
    m = re.match(r"^(\d+(?:\.\d+)?)([A-Za-z]*)$", text)
    if not m:
        return None
    units = {"": 1, "bit": 1, "kbit": 1000, "mbit": 1000 ** 2, "gbit": 1000 ** 3, "tbit": 1000 ** 4,
             "kibit": 1024, "mibit": 1024 ** 2, "gibit": 1024 ** 3, "tibit": 1024 ** 4,
             "bps": 8, "kbps": 8000, "mbps": 8 * 1000 ** 2, "gbps": 8 * 1000 ** 3, "tbps": 8 * 1000 ** 4}
    mult = units.get(m.group(2).lower())
    if mult is None:
        return None
    return int(float(m.group(1)) * mult) // 8


def cmd_maxrate(args: list, opts: dict, out: Out) -> int:
    if not args or matches(args[0], "help"):
        _help("maxrate")
        return 0
    sub = args.pop(0)
    if matches(sub, "show"):
        dev = _parse_dev(args, "maxrate_show")
        if dev is None:
            return 0
        rates = [kbps * 1000 // 8 for kbps in dev.read()["maxrate_kbps"]]     # kernel kbps -> bytes/s
        if args:
            word = args.pop(0)
            if not matches(word, "tc-maxrate"):
                _err("What is \"%s\"?\n" % word)
                _err(HELP["maxrate_show"])
                return 1
        out.put("tc_maxrate", rates)
        out.fp("tc-maxrate " + "".join("%d:%s " % (i, sprint_rate(r, opts["iec"])) for i, r in enumerate(rates)))
        out.nl()
        return 0
    if matches(sub, "set"):
        dev = _parse_dev(args, "maxrate_set")
        if dev is None:
            return 0
        if not args:
            _err(HELP["maxrate_set"])
            return 0
        st = dev.read()
        rates = [kbps * 1000 // 8 for kbps in st["maxrate_kbps"]]
        while args:
            word = args.pop(0)
            if not matches(word, "tc-maxrate"):
                _err("What is \"%s\"?\n" % word)
                _err(HELP["maxrate_set"])
                return 1
            if not args:
                _err("Command line is not complete. Try option \"help\"\n")
                raise Fail(255)

            def cb(k, value):
                rate = _get_rate(value)
                if rate is None:
                    return 1
                return _dcb_mapping("TC", k, 7, "RATE", rate, 1 << 63, rates.__setitem__)
            if _parse_mapping(args, _num_all, cb):
                _err("Invalid tc-maxrate mapping %s\n" % args[0])
                return 1
        dev.write(st, [(qos.setmaxrate, [r * 8 // 1000 for r in rates])])
        return 0
    _err("What is \"%s\"?\n" % sub)
    _help("maxrate")
    return 1


# ---------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    kernelfs.settle()
    opts = {"json": False, "pretty": False, "numeric": False, "stats": False, "iec": False}
    long_opts = ["Version", "force", "batch=", "iec", "json", "Numeric", "pretty", "statistics", "netns=", "help",
                 "verbose"]
    try:
        parsed, rest = getopt.getopt(argv[1:], "b:fhijn:psvNV", long_opts)
    except getopt.GetoptError as exc:
        opt = exc.opt or ""
        if len(opt) == 1:
            _err("dcb: invalid option -- '%s'\n" % opt)
        else:
            _err("dcb: unrecognized option '--%s'\n" % opt)
        _err("Unknown option.\n" + HELP_MAIN)
        return 1
    for opt, _val in parsed:
        if opt in ("-V", "--Version"):
            sys.stdout.write("dcb utility, iproute2-%s\n" % VERSION)
            return 0
        if opt in ("-h", "--help"):
            _err(HELP_MAIN)
            return 0
        if opt in ("-j", "--json"):
            opts["json"] = True
        elif opt in ("-p", "--pretty"):
            opts["pretty"] = True
        elif opt in ("-N", "--Numeric"):
            opts["numeric"] = True
        elif opt in ("-s", "--statistics"):
            opts["stats"] = True
        elif opt in ("-i", "--iec"):
            opts["iec"] = True
        elif opt in ("-b", "--batch", "-n", "--netns"):
            _err("simhost dcb: %s is not simulated\n" % opt)
            return 1
    out = Out(opts["json"], opts["pretty"])
    is_show = _is_show(rest)
    code = 0
    try:
        code = _dispatch(rest, opts, out)
    except Fail as failed:
        code = failed.code
    if code == 255:
        sys.stdout.write(out.dump() if not opts["json"] else "")
        return 255
    if opts["json"]:
        has_object = bool(out.obj) or (code == 0 and is_show)
        sys.stdout.write((out.dump() if has_object else "") + "\n")
    else:
        sys.stdout.write(out.dump())
    return code


def _is_show(args: list) -> bool:
    return len(args) > 1 and matches(args[1], "show")


def _dispatch(args: list, opts: dict, out: Out) -> int:
    if not args or matches(args[0], "help"):
        _err(HELP_MAIN)
        return 0
    obj = args.pop(0)
    if matches(obj, "app"):
        return cmd_app(args, opts, out)
    if obj == "apptrust":
        return cmd_apptrust(args, opts, out)
    for name, func in (("buffer", cmd_buffer), ("dcbx", cmd_dcbx), ("ets", cmd_ets), ("maxrate", cmd_maxrate),
                       ("pfc", cmd_pfc)):
        if matches(obj, name):
            return func(args, opts, out)
    _err("Object \"%s\" is unknown\n" % obj)
    return 1
