"""RDMA device names: what the kernel calls a device at probe, what udev's rdma_rename makes of it at boot, and a
rename at run time (``rdma dev set DEV name NEW``, the kernel's ib_device_rename).

**At boot** (tree build = a boot; sources below):

1. The kernel registers the devices in probe order (PCI order) as ``mlx5_<N>`` (ib_register_device with
   ``"mlx5_%d"``: alloc_name takes the lowest free N), device index 0, 1, ... in the same order (the ``ifindex`` that
   ``rdma dev`` prints). A profile's device ``name`` is that kernel name; without one it is computed from PCI order.
2. udev runs every rule file's ``PROGRAM="rdma_rename %k NAME_..."`` on the ``add`` event of each device, in rule
   file order; the first rename that succeeds names the device (a later rdma_rename finds no device called ``%k``
   any more and fails). Which files: ``/etc/udev/rules.d`` over ``/run/udev/rules.d`` over the stack's
   ``/lib/udev/rules.d`` (same file name: the higher directory wins; an empty file or a link to /dev/null masks),
   under ``udev_root()`` (``$SIMHOST_UDEV_ROOT``, else ``$SIMHOST_DISK_ROOT``, default ``/``, the container's disk;
   a local host of simhost.localhost has ``<hdir>/disk``). The stack's ``60-rdma-persistent-naming.rules`` is
   modelled from the booted stack, not read: inbox rdma-core ships ``NAME_FALLBACK`` (rdma-core
   kernel-boot/rdma-persistent-naming.rules), MLNX_OFED's and DOCA-OFED's rdma-core (``<ver>mlnx<N>``) ship the same
   file with ``NAME_KERNEL`` (see README "RDMA device names"); provider ``none`` has no rdma-core, so no rule.
3. A profile's ``rdma_naming`` (kernel|fallback|pci|guid|onboard) pins the image's policy: it replaces the stack's
   file (as an image that ships its own ``/lib/udev/rules.d/60-rdma-persistent-naming.rules``, Azure's NAME_KERNEL),
   and a site's file in ``/etc/udev/rules.d`` or ``/run/udev/rules.d`` still overrides it, as on a real host.

**rdma_rename** (rdma-core kernel-boot/rdma_rename.c), policies: NAME_KERNEL (exit 0, no rename), NAME_ONBOARD
(``<prefix>o<index>`` from the PCI function's ``acpi_index``, else ``index``; at most 16383), NAME_PCI
(``<prefix>[P<domain>]p<bus>s<slot>[f<function>]``, decimal; ``f<fn>`` when the function is not 0 or the function's
config space header type has the multi-function bit (0x80): a card with several functions; the ``s<slot number>``
form is never taken: find_sun's ``sscanf(pci, "%s.%s")`` cannot split the address), NAME_GUID
(``<prefix>x<node GUID as 16 hex digits>``), NAME_FIXED (the name given), NAME_FALLBACK = NAME_ONBOARD | NAME_PCI
(str2policy: NOT by-guid, whatever the rules file's comment says). Prefix = the device's protocol on its first port:
``ib`` (InfiniBand), ``roce`` (Ethernet), ``iw``, ``opa``, else ``rdma`` (nldev fill_dev_info). A rename to a name
another device has fails (-EEXIST) and the device keeps its name.

**At run time** ``rename(root, old, new)`` is ib_device_rename (drivers/infiniband/core/device.c) with nldev_set_doit's
checks: the same name is a no-op, an empty name EINVAL, a name another device has EEXIST; 64 characters are cut to
63 (nla_strscpy into char[IB_DEVICE_NAME_MAX]), 65 and more fail the netlink policy (EINVAL). The tree follows:
``class/infiniband/<new>``, the PCI function's ``infiniband/<new>``, ``ibdev`` of its uverbs/umad, the expanded
profile's device name, the per-device state (rdma_cm.json, traffic_class.json). The next boot names the devices
afresh. Not modelled: rdma-ndd updating node_desc after a rename (node_desc is also the ibsim node id).
Stdlib only (runs in the containers); imports nothing of simhost but driver, statefile and sysfs.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import re
from pathlib import Path

from . import driver, statefile, sysfs

RULES_FILE = "60-rdma-persistent-naming.rules"
STACK_RULES_DIR = "/lib/udev/rules.d"          # Debian's rdma-core (and the vendors' .deb) install it there
RULES_DIRS = ("etc/udev/rules.d", "run/udev/rules.d")  # under udev_root(), highest priority first
PINS = {"kernel": "NAME_KERNEL", "fallback": "NAME_FALLBACK", "pci": "NAME_PCI", "guid": "NAME_GUID",
        "onboard": "NAME_ONBOARD"}
# what the stack's 60-rdma-persistent-naming.rules says (module docstring)
STACK_POLICY = {"inbox": "NAME_FALLBACK", "mlnx_ofed": "NAME_KERNEL", "doca": "NAME_KERNEL"}
STACK_ORIGIN = {"inbox": "inbox rdma-core", "mlnx_ofed": "MLNX_OFED rdma-core", "doca": "DOCA-OFED rdma-core"}
IB_DEVICE_NAME_MAX = 64                         # include/rdma/ib_verbs.h, with the NUL
ONBOARD_INDEX_MAX = 16 * 1024 - 1
PROTOCOL_PREFIX = {"InfiniBand": "ib", "Ethernet": "roce"}
KERNEL_FORMAT = "mlx5_%d"

# KEY{attr}OP"value", separated by commas and/or blanks (systemd udev-rules.c: strspn(line, WHITESPACE ","))
_TOKEN = re.compile(r'\s*([A-Za-z_]+)(?:\{([^}]*)\})?\s*(==|!=|\+=|-=|:=|=)\s*"((?:[^"\\]|\\.)*)"(?:[\s,]+|$)')
_PROGRAM = re.compile(r"^(?:\S*/)?rdma_rename((?:\s+\S+)*)\s*$")
# sysfs attributes of an infiniband class device that ATTR{...} can match (tree.py writes them)
ATTRS = ("node_guid", "sys_image_guid", "fw_ver", "hca_type", "hw_rev", "board_id", "node_type", "node_desc")


def udev_root() -> Path:
    """Where the host's udev rules live: ``$SIMHOST_UDEV_ROOT``, else the disk root (``$SIMHOST_DISK_ROOT``, /)."""
    env = os.environ.get("SIMHOST_UDEV_ROOT")
    return Path(env) if env else driver.disk_root()


# ------------------------------------------------------------------------------------------- rule files
def parse_rules(text: str, path: str) -> tuple[list[dict], list[str]]:
    """The rules of a udev rules file that run rdma_rename: ``[{file, line, tokens: [(key, attr, op, value)],
    argv: [..]}]`` and warnings (a line udev would not parse)."""
    rules, warnings = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        start, line = i + 1, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):   # udev joins a line ending in a backslash
            i += 1
            line = line[:-1] + lines[i]
        i += 1
        body = line.strip()
        if not body or body.startswith("#"):
            continue
        tokens, pos = [], 0
        while pos < len(body):
            match = _TOKEN.match(body, pos)
            if not match:
                if "rdma_rename" in body:   # other rules do not name RDMA devices: not ours to judge
                    warnings.append(f"{path}:{start}: invalid rule (not KEY==\"value\" at {body[pos:pos + 20]!r}), "
                                    "ignored")
                tokens = None
                break
            key, attr, op, value = match.group(1), match.group(2), match.group(3), match.group(4)
            tokens.append((key.upper(), attr, op, value.replace('\\"', '"')))
            pos = match.end()
        if not tokens:
            continue
        argv = None
        for key, _attr, _op, value in tokens:
            prog = _PROGRAM.match(value) if key == "PROGRAM" else None
            if prog:
                argv = prog.group(1).split()
        if argv is not None:
            rules.append({"file": path, "line": start, "tokens": tokens, "argv": argv})
    return rules, warnings


def stack_rules_text(provider: str) -> str | None:
    """The stack's 60-rdma-persistent-naming.rules as simhost models it: the shipped file's one rule (Debian's rdma-core:
    NAME_FALLBACK, NVIDIA's: NAME_KERNEL; tests/fixtures/real/ib-stack/rdma-persistent-naming-rules-shipped-0*.txt);
    None when the stack has no rdma-core."""
    policy = STACK_POLICY.get(provider)
    if policy is None:
        return None
    return ("# %s: kernel-boot/rdma-persistent-naming.rules (modelled by simhost)\n"
            'ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %%k %s"\n' % (STACK_ORIGIN[provider], policy))


def _masked(path: Path) -> bool:
    try:
        return os.path.realpath(path) == "/dev/null" or path.stat().st_size == 0
    except OSError:
        return True


def boot_rules(pin: str | None, provider: str, root: Path | None = None, disk: bool = True) -> dict:
    """The naming rules of this boot: ``{"pin", "files": [path], "rules": [...], "warnings": [...]}`` (module
    docstring: the pin, else the rule files on the disk at ``root`` (udev_root()) over the stack's; ``disk=False``:
    the stack's file alone)."""
    root = Path(root) if root is not None else udev_root()
    files: dict[str, tuple[str, str | None]] = {}       # file name -> (shown path, text or None when masked)
    stack = stack_rules_text(provider)
    if pin:
        files[RULES_FILE] = (f"{STACK_RULES_DIR}/{RULES_FILE} (profile rdma_naming: {pin}, the image's)",
                             'ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %%k %s"\n' % PINS[pin])
    elif stack is not None:
        files[RULES_FILE] = (f"{STACK_RULES_DIR}/{RULES_FILE} ({STACK_ORIGIN[provider]}, modelled)", stack)
    for rel in reversed(RULES_DIRS) if disk else ():   # lower priority first; a higher directory replaces the file
        directory = root / rel
        try:
            found = sorted(n for n in os.listdir(directory) if n.endswith(".rules"))
        except OSError:
            continue
        for name in found:
            path = directory / name
            shown = "/" + rel + "/" + name
            files[name] = (shown, None if _masked(path) else path.read_text(encoding="utf-8", errors="replace"))
    rules, warnings, shown_files = [], [], []
    for name in sorted(files):
        shown, text = files[name]
        if text is None:
            shown_files.append(shown + " (masked)")
            continue
        found, warns = parse_rules(text, shown.split(" ", 1)[0])
        warnings += warns
        if found:
            shown_files.append(shown)
            rules += found
    return {"pin": pin, "files": shown_files, "rules": rules, "warnings": warnings}


# ------------------------------------------------------------------------------------------- rdma_rename
def pci_name(prefix: str, pci: str, multi_function: bool) -> str:
    """rdma_rename by_pci: ``<prefix>[P<domain>]p<bus>s<slot>[f<function>]`` (decimal numbers)."""
    dom, bus, rest = pci.split(":")
    slot, fn = rest.split(".")
    name = prefix + (f"P{int(dom, 16)}" if int(dom, 16) > 0 else "") + f"p{int(bus, 16)}s{int(slot, 16)}"
    if int(fn, 16) > 0 or multi_function:
        name += f"f{int(fn, 16)}"
    return name


def guid_name(prefix: str, node_guid: str) -> str:
    """rdma_rename by_guid: ``%sx%04x%04x%04x%04x`` of the node GUID (RDMA_NLDEV_ATTR_NODE_GUID, host order)."""
    return f"{prefix}x{int(node_guid.replace(':', ''), 16):016x}"


def onboard_name(prefix: str, index) -> str | None:
    if index is None or not 0 <= int(index) <= ONBOARD_INDEX_MAX:
        return None
    return f"{prefix}o{int(index)}"


_POLICY_BITS = {"NAME_KERNEL": {"kernel"}, "NAME_PCI": {"pci"}, "NAME_GUID": {"guid"}, "NAME_ONBOARD": {"onboard"},
                "NAME_FIXED": {"fixed"}, "NAME_FALLBACK": {"onboard", "pci"}}


def rdma_rename(argv: list[str], dev: dict, current: dict) -> tuple[int, str | None]:
    """One ``rdma_rename`` run: (exit status, the device's new name or None). ``argv`` after the program name with
    %k substituted; ``dev`` {kernel_name, pci, protocol, node_guid, multi_function, acpi_index}; ``current``
    {name: index} of the devices now (the rename happens there)."""
    args = [a for a in argv if a != "-v"]
    if len(args) < 2:
        return 1, None
    curr, policy = args[0], _POLICY_BITS.get(args[1])
    if policy is None or ("fixed" in policy and len(args) < 3):
        return 1, None
    if "kernel" in policy:
        return 0, None
    if curr not in current:                            # "Failed to get current device name and index"
        return 1, None
    prefix = PROTOCOL_PREFIX.get(dev.get("protocol"), "rdma")
    name = None
    if "onboard" in policy:
        name = onboard_name(prefix, dev.get("acpi_index"))
    if name is None and "pci" in policy and dev.get("pci"):
        name = pci_name(prefix, dev["pci"], dev.get("multi_function", False))
    if name is None and "guid" in policy and dev.get("node_guid"):
        name = guid_name(prefix, dev["node_guid"])
    if name is None and "fixed" in policy:
        name = args[2]
    if name is None:
        return 1, None
    err, name = kernel_rename_check(curr, name, current)
    if err:
        return 1, None
    index = current.pop(curr)
    current[name] = index
    return 0, name


def kernel_rename_check(old: str, new: str, current) -> tuple[int, str]:
    """nldev_set_doit + ib_device_rename: (errno or 0, the name the device gets)."""
    if len(new) > IB_DEVICE_NAME_MAX:
        return errno.EINVAL, new                       # the netlink policy (.len = IB_DEVICE_NAME_MAX)
    new = new[:IB_DEVICE_NAME_MAX - 1]                 # nla_strscpy into char[IB_DEVICE_NAME_MAX]
    if not new:
        return errno.EINVAL, new
    if new == old:
        return 0, new
    if new in current:
        return errno.EEXIST, new
    if "/" in new or new in (".", ".."):
        return errno.EINVAL, new                       # a file tree cannot hold it (kernfs would): model limit
    return 0, new


def _glob(pattern: str, value: str | None) -> bool:
    if value is None:
        return False
    return any(fnmatch.fnmatchcase(value, alt) for alt in pattern.split("|"))


def _rule_runs(rule: dict, dev: dict, kernel_name: str, current: dict, warnings: list) -> str | None:
    """Evaluate a rule in token order for the add event of ``kernel_name``; the new name when its rdma_rename
    renamed the device."""
    for key, attr, op, value in rule["tokens"]:
        if op not in ("==", "!="):
            if key != "PROGRAM":
                continue                               # an assignment (TAG+=, ENV{X}=, ...): no effect on the name
            op = "=="                                  # udev: "PROGRAM key takes '==' or '!=' operator"
        if key == "PROGRAM":
            prog = _PROGRAM.match(value)
            if prog is None:
                warnings.append(f"{rule['file']}:{rule['line']}: PROGRAM {value!r} is not simulated; rule skipped")
                return None
            argv = [kernel_name if a == "%k" else a for a in prog.group(1).split()]
            status, name = rdma_rename(argv, dev, current)
            if (status == 0) != (op == "=="):
                return None
            if name is not None:
                return name
            continue
        if key == "ACTION":
            actual = "add"
        elif key == "SUBSYSTEM":
            actual = "infiniband"
        elif key == "KERNEL":
            actual = kernel_name
        elif key == "ATTR" and attr in ATTRS:
            actual = dev.get("attrs", {}).get(attr)
        else:
            warnings.append(f"{rule['file']}:{rule['line']}: match key {key}{'{' + attr + '}' if attr else ''} is not "
                            "simulated; rule skipped")
            return None
        if _glob(value, actual) != (op == "=="):
            return None
    return None


def assign(devices: list[dict], naming: dict) -> list[str]:
    """Name ``devices`` (dicts with kernel_name, index and the rdma_rename inputs) in index order by the rules of
    ``naming`` (boot_rules); sets ``name`` and ``named_by`` of each. Returns warnings."""
    warnings = list(naming.get("warnings") or [])
    current = {d["kernel_name"]: d["index"] for d in devices}
    for dev in sorted(devices, key=lambda d: d["index"]):
        dev["name"], dev["named_by"] = dev["kernel_name"], None
        for rule in naming.get("rules") or []:
            new = _rule_runs(rule, dev, dev["kernel_name"], current, warnings)
            if new is not None:
                dev["name"] = new
                dev["named_by"] = f"{rule['file']}:{rule['line']}" if rule["line"] else rule["file"]
                break
    return warnings


def kernel_names(pcis: list[str], explicit: list[str | None]) -> list[str]:
    """Kernel names in probe (PCI) order: a device's explicit name, else the lowest free ``mlx5_<N>``."""
    taken = {n for n in explicit if n}
    out: list = [None] * len(pcis)
    for i in sorted(range(len(pcis)), key=lambda k: pcis[k]):
        if explicit[i]:
            out[i] = explicit[i]
            continue
        n = 0
        while KERNEL_FORMAT % n in taken:
            n += 1
        out[i] = KERNEL_FORMAT % n
        taken.add(out[i])
    return out


# ------------------------------------------------------------------------------------------ run time rename
def _link(link: Path, target_abs: Path) -> None:
    """A relative symlink as the kernel's class links (tree._link)."""
    link.symlink_to(os.path.join(os.path.relpath(target_abs.parent, link.parent), target_abs.name))


def rename(root, old: str, new: str) -> tuple[int, str]:
    """``rdma dev set OLD name NEW`` on the running tree: (errno or 0, the name the device has now)."""
    root = Path(root)
    devices = sysfs.ib_devices(root)
    if old not in devices:
        return errno.ENODEV, old
    err, new = kernel_rename_check(old, new, set(devices))
    if err or new == old:
        return err, old if err else new
    link = root / "class/infiniband" / old
    target = link.resolve()
    moved = target.parent / new
    os.rename(target, moved)
    link.unlink()
    _link(root / "class/infiniband" / new, moved)
    for sub in ("infiniband_verbs", "infiniband_mad"):
        for entry in sysfs.ls(root / "class" / sub):
            ibdev = root / "class" / sub / entry / "ibdev"
            if sysfs.read(ibdev) == old:
                statefile.write_text(ibdev, new + "\n")
    path = root / ".simhost/profile.json"
    exp = sysfs.simhost_profile(root)
    for dev in exp.get("devices", []):
        if dev.get("name") == old:
            dev["name"] = new
    if exp:
        statefile.write_json(path, exp, indent=2, sort_keys=True)
    for state in ("rdma_cm.json", "traffic_class.json"):   # the device's own state goes with it
        spath = sysfs.state_dir(root) / state
        text = sysfs.read(spath)
        if text:
            data = json.loads(text)
            if old in data:
                data[new] = data.pop(old)
                statefile.write_json(spath, data, indent=1, sort_keys=True)
    return 0, new


def names(root=None) -> list[dict]:
    """The RDMA devices of a running tree in index order: ``[{index, name, kernel_name, pci}]``."""
    exp = sysfs.simhost_profile(Path(root) if root is not None else None)
    out = []
    for dev in sorted(exp.get("devices", []), key=lambda d: d.get("index", 0)):
        out.append({"index": dev.get("index"), "name": dev["name"], "kernel_name": dev.get("kernel_name", dev["name"]),
                    "pci": dev["pci"]})
    return out
