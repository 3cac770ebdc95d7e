# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ConnectX firmware configuration (non-volatile, "NV") through ``mlxconfig`` (NVIDIA MFT) or ``mstconfig``
(mstflint): parsers of their output and the plan that turns a desired set of parameters into one ``set`` call.

The parsers are pure functions over text. They read the tools' grammar, not their column widths, which differ
between MFT and mstflint releases (fixed 16/20-wide fields, a name column sized to the longest name, values that
overrun their field and are then separated by a single blank): a table row is an indented line, optionally marked
``*``, holding a parameter name and one value per column; values never contain blanks. The columns come from the
``Configurations:`` header (``Default Current Next Boot`` with ``-e``, ``Next Boot`` without, ``Next Boot New`` in
the set dialog) or, for an excerpt without header, from the number of values.
"""

from __future__ import absolute_import, division, print_function

import os
import re

__metaclass__ = type

COLUMN_KEYS = {"default": "default", "current": "current", "next boot": "next_boot", "new": "new"}
HEADER_KEYS = {"device type": "type", "name": "name", "description": "description", "device": "device"}
# the mlxconfig parameter grammar: upper-case words, an optional array index (NAME[3]) or range (NAME[0..7])
NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*(\[\d+(\.\.\d+)?\])?$")
_ROW_RE = re.compile(r"^(\*)?\s+([A-Z][A-Z0-9_]*(?:\[\d+(?:\.\.\d+)?\])?)\s+(\S.*?)\s*$")
_HEADER_RE = re.compile(r"^(Device type|Name|Description|Device):\s*(.*?)\s*$")
_SYMBOL_RE = re.compile(r"^(.*)\((-?\d+)\)$")
_INT_RE = re.compile(r"^-?\d+$")
_PCI_RE = re.compile(r"^(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
TOOLS = ("mlxconfig", "mstconfig")


class MlxconfigError(Exception):
    """An input or tool error, with a message that names the device and parameter. ``changed``: something was
    written before it (a reset before a refused set)."""

    def __init__(self, message, changed=False):
        super(MlxconfigError, self).__init__(message)
        self.changed = changed


MAX_VALUE = 0xFFFFFFFF  # mlxconfig parameters are at most 32 bits wide


# ---------------------------------------------------------------------------------------------------- parsers

def normalize(raw):
    """A printed value as data: ``NAME(n)`` -> n, a bare number -> int, anything else (``Array[0..7]``) the string."""
    if raw is None:
        return None
    text = raw.strip()
    match = _SYMBOL_RE.match(text)
    if match:
        return int(match.group(2))
    if _INT_RE.match(text):
        return int(text)
    return text


def split_value(raw):
    """``(symbol, number)`` of a printed value: ``IB(1)`` -> ("IB", 1), ``8`` -> (None, 8), ``Array[0..7]`` ->
    ("Array[0..7]", None)."""
    text = (raw or "").strip()
    match = _SYMBOL_RE.match(text)
    if match:
        return match.group(1), int(match.group(2))
    if _INT_RE.match(text):
        return None, int(text)
    return text, None


def _columns(header):
    names = [part.strip().lower() for part in re.split(r"\s{2,}", header.strip()) if part.strip()]
    return [COLUMN_KEYS[name] for name in names if name in COLUMN_KEYS] or None


def _table(text, default_columns):
    """Device header fields, the column keys and the rows ``{NAME: {column: raw, "modified": bool}}``."""
    device, columns, rows = {}, None, {}
    for line in text.splitlines():
        if not line.strip():
            continue
        header = _HEADER_RE.match(line)
        if header and not line[0].isspace():
            device[HEADER_KEYS[header.group(1).lower()]] = header.group(2)
            continue
        if line.startswith("Configurations:"):
            columns = _columns(line[len("Configurations:"):])
            continue
        row = _ROW_RE.match(line)
        if not row or not (line[0].isspace() or line[0] == "*"):
            continue
        values = row.group(3).split()
        cols = columns or default_columns.get(len(values)) or default_columns[1]
        if len(values) != len(cols):
            if len(cols) != 1:
                continue
            values = [" ".join(values)]
        entry = dict(zip(cols, values))
        entry["modified"] = row.group(1) == "*"
        rows[row.group(2)] = entry
    return device, columns, rows


def parse_query(text):
    """``<tool> -d DEV [-e] q [NAMES]``: ``{"device": {type, name, description, device}, "columns": [...],
    "params": {NAME: {"default", "current", "next_boot", "modified"}}}``. Values stay as printed (strings); a column
    the output does not have (plain ``q`` has only Next Boot) is None. ``columns`` is None for an excerpt
    without a header."""
    device, columns, rows = _table(text, {1: ["next_boot"], 3: ["default", "current", "next_boot"]})
    params = {}
    for name, entry in rows.items():
        params[name] = {"default": entry.get("default"), "current": entry.get("current"),
                        "next_boot": entry.get("next_boot"), "modified": entry["modified"]}
    return {"device": device, "columns": columns, "params": params}


def parse_set(text):
    """The set dialog: ``{"device": {...}, "params": {NAME: {"next_boot", "new"}}, "applied": bool,
    "reboot_required": bool}`` (applied: ``Applying... Done!``; reboot: ``-I- Please reboot machine ...``)."""
    device, _columns_, rows = _table(text, {2: ["next_boot", "new"], 1: ["new"]})
    params = dict((name, {"next_boot": entry.get("next_boot"), "new": entry.get("new")}) for name, entry in rows.items())
    return {"device": device, "params": params, "applied": "Applying... Done!" in text,
            "reboot_required": "-I- Please reboot machine" in text}


def parse_errors(text):
    """The tool's own error lines (``-E- ...``), without the prefix, in order."""
    return [line.strip()[4:].strip() for line in (text or "").splitlines() if line.strip().startswith("-E-")]


def parse_show_confs(text):
    """``<tool> -d DEV i`` (show_confs): ``{NAME: {"type": "num"|"bool"|"enum", "symbols": {SYMBOL: number|None}}}``.
    Enum numbers come from the ``0xN: SYMBOL`` lines below a parameter; a cut listing leaves them None."""
    out, last = {}, None
    for line in (text or "").splitlines():
        match = re.match(r"^\s+([A-Z][A-Z0-9_]*)=<([^>]*)>", line)
        if match:
            name, spec = match.group(1), match.group(2)
            if spec == "NUM":
                out[name] = {"type": "num", "symbols": {}}
            else:
                symbols = dict((sym, None) for sym in spec.split("|"))
                kind = "bool" if set(symbols) == {"False", "True"} else "enum"
                if kind == "bool":
                    symbols = {"False": 0, "True": 1}
                out[name] = {"type": kind, "symbols": symbols}
            last = name
            continue
        value = re.match(r"^\s+0x([0-9a-fA-F]+):\s*([A-Za-z0-9_]+)", line)
        if value and last and value.group(2) in out[last]["symbols"]:
            out[last]["symbols"][value.group(2)] = int(value.group(1), 16)
    return out


# ------------------------------------------------------------------------------------------------- the plan

def config_of(query):
    """The module's ``config``: each parameter as ``{default, current, next_boot}`` with normalized values."""
    return dict((name, {"default": normalize(p["default"]), "current": normalize(p["current"]),
                        "next_boot": normalize(p["next_boot"])}) for name, p in query["params"].items())


def pending_of(query):
    """The parameters whose next-boot value differs from the current one (they take effect at the next boot), as
    ``{current, next_boot}`` normalized and ``printed`` as the tool prints them."""
    out = {}
    for name, row in sorted(query["params"].items()):
        current, next_boot = normalize(row["current"]), normalize(row["next_boot"])
        if row["current"] is not None and row["next_boot"] is not None and current != next_boot:
            out[name] = {"current": current, "next_boot": next_boot,
                         "printed": {"current": row["current"], "next_boot": row["next_boot"]}}
    return out


def matches(raw, want):
    """True when a printed value (``IB(1)``, ``8``, ``True(1)``) already is ``want`` (a symbol, a number or a bool)."""
    symbol, number = split_value(raw)
    if isinstance(want, bool):
        want = int(want)
    if isinstance(want, int):
        return number == want
    text = str(want).strip()
    if _INT_RE.match(text):
        return number == int(text)
    if re.match(r"^0x[0-9a-fA-F]+$", text):
        return number == int(text, 16)
    return symbol is not None and symbol.lower() == text.lower()


def tool_value(want):
    """How a desired value is written on the tool's command line (``True``, ``IB``, ``8``)."""
    if isinstance(want, bool):
        return "True" if want else "False"
    return str(want).strip()


def check_params(params):
    """Input errors of ``params`` (names and value types), each naming the parameter."""
    errors = []
    if not isinstance(params, dict):
        return ["params must be a map of mlxconfig parameter names to values, got %s" % type(params).__name__]
    for name, value in sorted(params.items(), key=lambda item: str(item[0])):
        if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name:
            errors.append("params: %r is not an mlxconfig parameter name; write it as the tool prints it, in upper "
                          "case (LINK_TYPE_P1, SRIOV_EN, NUM_OF_VFS, ATS_ENABLED, CNP_DSCP_P1, NAME[3] for an array "
                          "entry)" % (name,))
            continue
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and 0 <= value <= MAX_VALUE:
            continue
        if isinstance(value, int) and value > MAX_VALUE:
            errors.append("params: %s=%d is larger than any mlxconfig parameter (32 bits, at most %d)" % (
                name, value, MAX_VALUE))
            continue
        if isinstance(value, str) and re.match(r"^(-?\d+|0x[0-9a-fA-F]+|[A-Za-z_][A-Za-z0-9_]*)$", value.strip()):
            text = value.strip()
            if text.startswith("-"):
                errors.append("params: %s=%s is negative; mlxconfig values are 0 or more" % (name, value))
            elif re.match(r"^0\d", text):
                errors.append("params: %s=%s has a leading zero, which the tool would read as octal; write %s or 0x%x"
                              % (name, value, int(text, 10), int(text, 10)))
            elif _number(text) is not None and _number(text) > MAX_VALUE:
                errors.append("params: %s=%s is larger than any mlxconfig parameter (32 bits, at most %d)" % (
                    name, value, MAX_VALUE))
            continue
        errors.append("params: %s=%r must be a symbol as the tool prints it (IB, ETH, True, False, ...), a number 0 "
                      "or more, or a boolean" % (name, value))
    return errors


def _number(text):
    """A decimal or 0x hex string as an int, else None."""
    if _INT_RE.match(text):
        return int(text, 10)
    if re.match(r"^0x[0-9a-fA-F]+$", text):
        return int(text, 16)
    return None


def check_values(query, confs, params):
    """Errors for desired values the device cannot take, from its show_confs listing (parameters it lists)."""
    errors = []
    for name, want in sorted(params.items()):
        base = re.sub(r"\[\d+\]$", "", name)
        conf = confs.get(base)
        if conf is None or matches(query["params"].get(name, {}).get("next_boot"), want):
            continue
        text = tool_value(want)
        is_number = isinstance(want, int) or _INT_RE.match(text) or re.match(r"^0x[0-9a-fA-F]+$", text)
        if conf["type"] == "num" and not is_number:
            errors.append("%s takes a number, got %s" % (name, text))
        elif conf["type"] in ("bool", "enum") and not is_number:
            if text.lower() not in [sym.lower() for sym in conf["symbols"]]:
                errors.append("%s=%s is not a value the device accepts; allowed: %s" % (
                    name, text, ", ".join(conf["symbols"])))
        elif conf["type"] in ("bool", "enum") and is_number:
            number = want if isinstance(want, int) else _number(text)
            known = [num for num in conf["symbols"].values() if num is not None]
            if known and len(known) == len(conf["symbols"]) and number not in known:
                errors.append("%s=%s is not a value the device accepts; allowed: %s" % (name, text, ", ".join(
                    "%s (%d)" % (sym, num) for sym, num in conf["symbols"].items())))
    return errors


def plan(query, params, reset=False):
    """What to run so that the next-boot configuration is ``params`` (and the defaults elsewhere with ``reset``).

    Returns ``{"reset": bool, "set": {NAME: tool value}, "changes": {NAME: {"before": raw next boot, "after":
    value}}}``. Only values that differ from Next Boot are set; with ``reset`` the baseline is the Default column.
    Raises MlxconfigError for a parameter the query does not show."""
    rows = query["params"]
    missing = sorted(name for name in params if name not in rows)
    if missing:
        raise MlxconfigError("the device does not have the parameter%s %s" % (
            "s" if len(missing) > 1 else "", ", ".join(missing)))
    changes = {}
    if reset:
        for name, p in sorted(rows.items()):
            if name not in params and p["default"] is not None and p["next_boot"] != p["default"]:
                changes[name] = {"before": normalize(p["next_boot"]), "after": normalize(p["default"])}
    for name, want in sorted(params.items()):
        if not matches(rows[name]["next_boot"], want):
            changes[name] = {"before": normalize(rows[name]["next_boot"]), "after": _as_data(want)}
    do_reset = any(name not in params for name in changes)
    # after a reset every parameter is at its default, so the set call carries what differs from the default
    baseline = "default" if do_reset else "next_boot"
    to_set = dict((name, tool_value(want)) for name, want in sorted(params.items())
                  if not matches(rows[name][baseline], want))
    return {"reset": do_reset, "set": to_set, "changes": changes}


def symbol_number(row, conf, value):
    """The number of a symbolic value (``IB`` -> 1) from the values the row prints or the show_confs listing; the
    value itself when neither knows it."""
    if not isinstance(value, str):
        return value
    for raw in (row.get("default"), row.get("current"), row.get("next_boot")):
        symbol, number = split_value(raw)
        if symbol is not None and number is not None and symbol.lower() == value.lower():
            return number
    for symbol, number in ((conf or {}).get("symbols") or {}).items():
        if symbol.lower() == value.lower() and number is not None:
            return number
    return value


def printed(row, conf, value):
    """How the tool would print ``value`` (a number, or a symbol it does not know the number of) in ``row``:
    ``SYMBOL(n)`` when the row's values or the show_confs listing name n, else the bare value."""
    if not isinstance(value, int):
        return str(value)
    for raw in (row.get("default"), row.get("current"), row.get("next_boot")):
        symbol, number = split_value(raw)
        if number == value and symbol is not None:
            return "%s(%d)" % (symbol, value)
    for symbol, number in ((conf or {}).get("symbols") or {}).items():
        if number == value:
            return "%s(%d)" % (symbol, value)
    return str(value)


def _as_data(want):
    if isinstance(want, bool):
        return int(want)
    return normalize(str(want)) if isinstance(want, str) else want


# ------------------------------------------------------------------------------------------------ the device

def pci_address(device, sysfs_root):
    """A PCI address (``0000:0c:00.0``, domain added) for ``device``: a PCI address, or an RDMA device name resolved
    through ``<sysfs_root>/class/infiniband/<dev>/device``."""
    match = _PCI_RE.match(device.strip())
    if match:
        return "%s:%s:%s.%s" % ((match.group(1) or "0000").lower(), match.group(2).lower(), match.group(3).lower(),
                                match.group(4))
    link = os.path.join(sysfs_root, "class", "infiniband", device, "device")
    if "/" not in device and os.path.exists(link):
        target = os.path.basename(os.path.realpath(link))
        if _PCI_RE.match(target):
            return target
    try:
        present = sorted(os.listdir(os.path.join(sysfs_root, "class", "infiniband")))
    except OSError:
        present = []
    raise MlxconfigError("device %r is neither a PCI address (0000:0c:00.0) nor an RDMA device under %s/class/"
                         "infiniband (present: %s)" % (device, sysfs_root, ", ".join(present) or "none"))


class Device:
    """One ConnectX device as its configuration tool sees it. ``runner`` has ``which(name)`` and ``run(argv)`` ->
    (rc, stdout, stderr)."""

    def __init__(self, runner, pci, tool="auto"):
        self.runner, self.pci = runner, pci
        self.tool_name, self.tool = self._tool(tool)

    def _tool(self, tool):
        names = TOOLS if tool == "auto" else (tool,)
        for name in names:
            path = self.runner.which(name)
            if path:
                return name, path
        if tool == "auto":
            raise MlxconfigError("neither mlxconfig (NVIDIA MFT) nor mstconfig (mstflint) is installed; install the "
                                 "mstflint package (Debian, Ubuntu, EL) or NVIDIA MFT")
        raise MlxconfigError("%s is not installed (%s)" % (
            tool, "NVIDIA MFT" if tool == "mlxconfig" else "package mstflint"))

    def _run(self, args, what, changes=False):
        self.applied = getattr(self, "applied", [])
        argv = [self.tool, "-d", self.pci] + args
        rc, out, err = self.runner.run(argv, changes=changes)
        errors = parse_errors(out + "\n" + err)
        if rc != 0 or errors:
            detail = "; ".join(errors) if errors else ((err or out).strip().splitlines() or ["no output"])[-1]
            raise MlxconfigError("%s -d %s %s failed (exit %d): %s" % (self.tool_name, self.pci, what, rc, detail))
        return out

    def query(self, names=()):
        return parse_query(self._run(["-e", "q"] + list(names), "query"))

    def query_all(self, names=()):
        """The full query, plus the named parameters it does not list (array entries are shown only when asked)."""
        query = self.query()
        extra = [name for name in names if name not in query["params"]]
        if extra:
            query["params"].update(self.query(extra)["params"])
        return query

    def show_confs(self):
        try:
            return parse_show_confs(self._run(["i"], "show_confs"))
        except MlxconfigError:
            return {}

    def apply(self, steps):
        """Run the plan: ``reset`` first, then one ``set`` with every parameter."""
        self.applied = []
        if steps["reset"]:
            self._run(["-y", "reset"], "reset", changes=True)
            self.applied.append("reset")
        if steps["set"]:
            pairs = ["%s=%s" % item for item in sorted(steps["set"].items())]
            out = self._run(["-y", "set"] + pairs, "set " + " ".join(pairs), changes=True)
            result = parse_set(out)
            if not result["applied"]:
                raise MlxconfigError("%s -d %s set did not report 'Applying... Done!'" % (self.tool_name, self.pci))

    def command(self, steps):
        """The argv lists the plan runs (for the report and check mode)."""
        out = []
        if steps["reset"]:
            out.append([self.tool_name, "-y", "-d", self.pci, "reset"])
        if steps["set"]:
            out.append([self.tool_name, "-y", "-d", self.pci, "set"] + [
                "%s=%s" % item for item in sorted(steps["set"].items())])
        return out


# ---------------------------------------------------------------------------------------------- the module's run

def configure(make_device, device, params, reset, sysfs_root, check_mode):
    """Read, plan, check, then (outside check mode) apply and read back: the mlxconfig module's result."""
    errors = check_params(params)
    if errors:
        raise MlxconfigError("; ".join(errors))
    pci = pci_address(device, sysfs_root)
    dev = make_device(pci)
    query = dev.query_all(sorted(params))
    steps = plan(query, params, reset)
    confs = {}
    if any(name in params for name in steps["changes"]):
        # values the device cannot take fail here, before anything is written
        confs = dev.show_confs()
        errors = check_values(query, confs, dict((n, params[n]) for n in steps["changes"] if n in params))
        if errors:
            raise MlxconfigError("; ".join(errors))
    for name, change in steps["changes"].items():
        # a symbol becomes its number (IB -> 1), as config shows values
        change["after"] = symbol_number(query["params"][name], confs.get(re.sub(r"\[\d+\]$", "", name)), change["after"])
    before = config_of(query)
    commands = dev.command(steps)
    if commands and not check_mode:
        try:
            dev.apply(steps)
        except MlxconfigError as exc:
            applied = getattr(dev, "applied", [])
            raise MlxconfigError("%s%s" % (exc, "; the reset before it WAS applied: the other parameters are back at "
                                           "their defaults for the next boot" if applied else ""), changed=bool(applied))
        query = dev.query_all(sorted(params))
        missed = sorted(name for name, want in params.items() if not matches(query["params"][name]["next_boot"], want))
        if missed:
            raise MlxconfigError("after %s the next-boot value of %s is %s" % (
                " ".join(commands[-1]), ", ".join(missed), ", ".join(query["params"][n]["next_boot"] for n in missed)),
                changed=True)
    else:
        # check mode (or nothing to do): the query as it would read after the plan
        for name, change in steps["changes"].items():
            row = query["params"][name]
            row["next_boot"] = printed(row, confs.get(re.sub(r"\[\d+\]$", "", name)), change["after"])
    after = config_of(query)
    pending = pending_of(query)
    changed_names = sorted(steps["changes"])
    return dict(
        changed=bool(commands), device=pci, tool=dev.tool_name, device_info=query["device"], config=after,
        pending=pending, reboot_required=bool(pending), changes=steps["changes"], commands=commands,
        diff=dict(before=dict((n, before[n]["next_boot"]) for n in changed_names),
                  after=dict((n, after[n]["next_boot"]) for n in changed_names)))
