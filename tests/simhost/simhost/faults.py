"""Counter faults of a running simulated host: ``python3 -m simhost counters ACTION --device DEV [--port N]
[--root R] [options]`` (a PFC storm, ECN marks, drops, symbol errors, link flaps) and ``show``.

This module checks the input and finds the port; what each fault moves is the model's
(simhost.fabric_model, "Fault injection"), applied with ``fabric_model.apply_counters``, the rule traffic uses
too. Counters are runtime state: the port's ``counters/``/``hw_counters/`` files, the netdev's
``carrier_changes`` and ``.simhost/state/counters.json`` (the values ``ethtool -S`` and ``dcb -s pfc show``
read), all in the tree, so a boot (tree rebuild) resets them as a driver reload does. Nothing is persisted.

Bad input raises ValueError with a one-line message that names the option (``--priority 8: ...``); the command
line turns it into ``simhost: error: ...`` and exit status 2, as ``simhost cable`` does.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from . import fabric_model, qos, sysfs

ACTIONS = ("pfc-storm", "ecn", "drops", "symbol-errors", "flap", "show")
# the options of each action (beyond --device, --port, --root): {option: default}; None = required
OPTIONS = {
    "pfc-storm": {"priority": None, "seconds": 60.0, "direction": "tx"},
    "ecn": {"marked": None, "cnp": "rule"},
    "drops": {"count": None, "counter": "rx_discards_phy"},
    "symbol-errors": {"count": None},
    "flap": {"times": 1},
    "show": {},
}
DIRECTIONS = ("tx", "rx")
DROP_COUNTERS = ("rx_discards_phy", "out_of_buffer")


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def _int(name: str, value, minimum: int = 0, maximum: int | None = None) -> int:
    text = str(value).strip()
    try:
        number = int(text, 10)
    except ValueError:
        raise ValueError(f"{_opt(name)} {value}: not an integer") from None
    if number < minimum or (maximum is not None and number > maximum):
        span = f"{minimum}..{maximum}" if maximum is not None else f"at least {minimum}"
        raise ValueError(f"{_opt(name)} {value}: out of range ({span})")
    return number


def _seconds(value) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ValueError(f"--seconds {value}: not a number") from None
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"--seconds {value}: must be more than 0")
    return number


def _choice(name: str, choices: tuple):
    def check(value) -> str:
        if value not in choices:
            raise ValueError(f"{_opt(name)} {value}: must be one of {', '.join(choices)}")
        return value
    return check


# how each option's text becomes its value (ValueError naming the option)
CONVERT = {
    "priority": lambda v: _int("priority", v, 0, 7),
    "seconds": _seconds,
    "direction": _choice("direction", DIRECTIONS),
    "marked": lambda v: _int("marked", v),
    "cnp": lambda v: None if v == "rule" else _int("cnp", v),
    "count": lambda v: _int("count", v),
    "counter": _choice("counter", DROP_COUNTERS),
    "times": lambda v: _int("times", v, 1),
}


def check_options(action: str, given: dict) -> dict:
    """The action's options with their defaults, converted and checked; ``given`` = {option: value or None}.
    An option the action does not take, a missing required one and a bad value are ValueErrors."""
    if action not in OPTIONS:
        raise ValueError(f"{action!r}: no such action (actions: {', '.join(ACTIONS)})")
    takes = OPTIONS[action]
    for name, value in sorted(given.items()):
        if value is not None and name not in takes:
            raise ValueError(f"{_opt(name)}: not an option of {action} (its options: "
                             f"{', '.join(_opt(n) for n in takes) or 'none'})")
    opts = {}
    for name, default in takes.items():
        value = given.get(name)
        if value is None:
            if default is None:
                raise ValueError(f"{_opt(name)}: required by {action}")
            value = default
        opts[name] = CONVERT[name](value)
    return opts


def port_of(root, device: str, port) -> dict:
    """The model's view of ``device`` port ``port`` in the tree at ``root`` (ValueError naming the option)."""
    root = Path(root)
    if not (root / ".simhost/profile.json").is_file():
        raise ValueError(f"--root {root}: no simulated tree there (build one: python3 -m simhost build)")
    devices = sysfs.ib_devices(root)
    if device not in devices:
        raise ValueError(f"--device {device}: no RDMA device of that name in the tree at {root} "
                         f"(devices: {', '.join(devices) or 'none'})")
    number = _int("port", port, 1)
    ports = sysfs.ports(device, root)
    if number not in ports:
        raise ValueError(f"--port {port}: {device} has no such port (ports: {', '.join(map(str, ports))})")
    return fabric_model.port_view(root, device, number)


def _where(view: dict) -> str:
    return f"--device {view['hca']} --port {view['port']}"


def fault_deltas(view: dict, action: str, opts: dict) -> dict:
    """What ``action`` moves on the port of ``view`` (the model's rules), after the port checks."""
    ethernet = view.get("link_layer") == "Ethernet"
    if view.get("phys_state") != "LinkUp":
        raise ValueError(f"{_where(view)}: no link (phys_state {view.get('phys_state') or 'unknown'}, state "
                         f"{view.get('state')}): a port without link has nothing to count")
    if action == "pfc-storm":
        if not ethernet:
            raise ValueError(f"{_where(view)}: an InfiniBand port has no PFC (credit-based link): pfc-storm needs "
                             "a RoCE (Ethernet) port")
        return fabric_model.pfc_storm_deltas(view["rate_gbps"], opts["priority"], opts["seconds"], opts["direction"])
    if action == "ecn":
        if not ethernet:
            raise ValueError(f"{_where(view)}: an InfiniBand port has no RoCE ECN counters "
                             "(hw_counters/np_ecn_marked_roce_packets): ecn needs a RoCE (Ethernet) port")
        return fabric_model.ecn_deltas(opts["marked"], opts["cnp"])
    if action == "drops":
        if opts["counter"] == "rx_discards_phy" and not ethernet:
            raise ValueError(f"--counter rx_discards_phy: {view['hca']} port {view['port']} is InfiniBand, without "
                             "ethtool PHY counters (use --counter out_of_buffer)")
        return fabric_model.drop_deltas(opts["count"], opts["counter"])
    if action == "symbol-errors":
        return fabric_model.symbol_error_deltas(view["link_layer"], opts["count"])
    if action == "flap":
        return fabric_model.flap_deltas(view["link_layer"], opts["times"])
    raise ValueError(f"{action!r}: no such action (actions: {', '.join(ACTIONS)})")


def inject(root, action: str, device: str, port=1, **given) -> dict:
    """Apply one fault to the running tree at ``root``. Returns {device, port, netdev, link_layer, action,
    options, deltas (what was added), values (the counters' new values), notes [str]}."""
    opts = check_options(action, given)
    if action == "show":
        raise ValueError("show injects nothing: use show()")
    view = port_of(root, device, port)
    deltas = fault_deltas(view, action, opts)
    notes = []
    if action == "pfc-storm" and opts["priority"] not in view.get("pfc_enabled", []):
        notes.append(f"PFC is off on priority {opts['priority']} of {view['netdev']}: ethtool -S lists "
                     f"{opts['direction']}_prio{opts['priority']}_pause* only while PFC is on there (the values are kept "
                     f"and shown once it is; dcb -s pfc show counts them now)")
    values = fabric_model.apply_counters(root, view, deltas)
    return {"device": device, "port": view["port"], "netdev": view.get("netdev"), "link_layer": view["link_layer"],
            "action": action, "options": opts, "deltas": deltas, "values": values, "notes": notes}


def _files(directory: Path) -> dict:
    out = {}
    for name in sysfs.ls(directory):
        text = sysfs.read(directory / name)
        if text is not None and text.strip().lstrip("-").isdigit():
            out[name] = int(text.strip())
    return out


def show(root, device: str, port=1) -> dict:
    """The port's counters as the tools show them: ``counters/`` and ``hw_counters/`` (sysfs, ``rdma``), the
    netdev's ``carrier_changes``, and for a RoCE port every ``ethtool -S`` counter in ethtool's order (the list
    follows PFC and global pause, as mlx5's does) plus ``ethtool_hidden``: values kept for counters ethtool does
    not list now (a PFC counter of a priority with PFC off)."""
    from .tools.ethtool import counter_names  # pylint: disable=import-outside-toplevel

    root = Path(root)
    view = port_of(root, device, port)
    pdir = sysfs.port_dir(device, view["port"], root)
    netdev = view.get("netdev")
    out = {"device": device, "port": view["port"], "link_layer": view["link_layer"], "state": view["state"],
           "phys_state": view["phys_state"], "netdev": netdev, "counters": _files(pdir / "counters"),
           "hw_counters": _files(pdir / "hw_counters")}
    if netdev:
        text = sysfs.read(sysfs.netdev_dir(netdev, root) / "carrier_changes")
        out["carrier_changes"] = int(text) if text and text.strip().isdigit() else 0
    if view["link_layer"] == "Ethernet" and netdev:
        text = sysfs.read(sysfs.state_dir(root) / fabric_model.COUNTERS_FILE)
        kept = (json.loads(text) if text else {}).get(netdev) or {}
        names = counter_names(qos.load(netdev, root))
        out["ethtool"] = {name: int(kept.get(name, 0)) for name in names}
        listed = set(names)
        out["ethtool_hidden"] = {name: int(v) for name, v in sorted(kept.items()) if name not in listed}
    return out


def summary(result: dict) -> str:
    """One line for the command line: what moved and the new values."""
    moved = []
    for kind in ("sysfs", "netdev", "ethtool"):
        for name, n in sorted(result["deltas"].get(kind, {}).items()):
            value = result["values"].get(kind, {}).get(name)
            where = {"sysfs": "", "netdev": f"{result['netdev']}/", "ethtool": "ethtool "}[kind]
            moved.append(f"{where}{name} +{n}" + (f" (now {value})" if value is not None else " (no such file)"))
    return f"{result['device']} port {result['port']} {result['action']}: " + (", ".join(moved) or "nothing moved")
