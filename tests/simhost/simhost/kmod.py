"""Kernel modules as the kernel keeps them, on the simulated tree, and a ``modprobe`` stand-in.

The truth is ``<root>/module/<name>/`` (as /sys/module: ``initstate`` live, ``refcnt``, ``holders/<user>`` links,
``srcversion``, ``version`` for out-of-tree modules: MLNX_OFED/DOCA ones and the NVIDIA driver's). Views of it:

* ``<root>/.simhost/proc/modules`` (or ``$SIMHOST_PROC_MODULES``): the /proc/modules text (newest first,
  ``name size refcnt users, Live 0x0000000000000000``), rewritten **in place** (same inode) after every change, so
  that a bind mount of it over /proc/modules follows (simhost-modules.service does that at boot where the kernel has
  a /proc/modules; see the README, "Kernel modules and the GPU driver");
* ``kernel/config/rdma_cm/`` exists while rdma_cm is loaded (its configfs subsystem).

Which modules a host can load: the profile's ``modules_available`` (default :data:`RDMA_AVAILABLE`), the ones it
boots with, and with the GPU driver marker (profile ``gpu: {driver: nvidia, version}``) the NVIDIA modules, among
them ``nvidia_peermem``. Anything else fails as on a host whose /lib/modules/<release> lacks it.

    python3 -m simhost.kmod modprobe [-r] [-n] [-q] [-v] [-a] [--first-time] NAME [PARAM=VALUE ...]
    python3 -m simhost.kmod boot [--root R] [--no-bind]   (modules-load.d, /proc/modules view, bind mount)

Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from . import statefile, sysfs

# the RDMA set a distribution kernel (or MLNX_OFED/DOCA) ships: what `modprobe` finds without a profile list
RDMA_AVAILABLE = ["ib_core", "ib_uverbs", "ib_umad", "rdma_cm", "rdma_ucm", "ib_ipoib", "ib_cm", "iw_cm",
                  "mlx5_core", "mlx5_ib"]
# the NVIDIA driver's modules (present with the gpu marker); nvidia is loaded at boot (nvidia-persistenced /
# the first CUDA call on a real host), nvidia_peermem only when asked for
NVIDIA_MODULES = ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem"]
NVIDIA_BOOT = ["nvidia"]
# modules.dep of these (what modprobe loads first, in this order)
DEPENDS = {
    "mlx5_ib": ["mlx5_core", "ib_core", "ib_uverbs"],
    "ib_uverbs": ["ib_core"], "ib_umad": ["ib_core"], "ib_cm": ["ib_core"], "iw_cm": ["ib_core"],
    "rdma_cm": ["ib_core", "ib_cm", "iw_cm"], "rdma_ucm": ["ib_core", "ib_uverbs", "rdma_cm"],
    "ib_ipoib": ["ib_core", "ib_cm"],
    "nvidia_uvm": ["nvidia"], "nvidia_modeset": ["nvidia"], "nvidia_drm": ["nvidia", "nvidia_modeset"],
    "nvidia_peermem": ["nvidia", "ib_core", "ib_uverbs"],
}
# sizes: tests/fixtures/real/ib-stack/lsmod-grep-mlx-ofed-01.txt where it has them; others of the same order
SIZES = {"mlx5_ib": 446464, "ib_uverbs": 139264, "ib_core": 425984, "mlx5_core": 2015232, "mlx_compat": 69632,
         "ib_umad": 40960, "rdma_cm": 135168, "rdma_ucm": 32768, "ib_ipoib": 151552, "ib_cm": 139264,
         "iw_cm": 61440, "nvidia": 54661120, "nvidia_uvm": 1658880, "nvidia_modeset": 1314816,
         "nvidia_drm": 90112, "nvidia_peermem": 16384}
# users that are no module: the NVIDIA driver is held open by nvidia-persistenced on a GPU node, so `modprobe -r
# nvidia_peermem` leaves it loaded and `modprobe -r nvidia` is refused ("in use")
BASE_USERS = {"nvidia": 1}
OFED_VERSIONED = {"mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "ib_ipoib", "rdma_cm", "ib_umad", "mlx_compat"}
STATE = "modules.json"
MODULES_LOAD_DIRS = ("/etc/modules-load.d", "/run/modules-load.d", "/usr/local/lib/modules-load.d",
                     "/usr/lib/modules-load.d", "/lib/modules-load.d")


class ModprobeError(Exception):
    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.message, self.code = message, code


# ------------------------------------------------------------------------------------------------ paths
def proc_modules_path(root: Path) -> Path:
    env = os.environ.get("SIMHOST_PROC_MODULES")
    return Path(env) if env else Path(root) / ".simhost/proc/modules"


def release() -> str:
    return os.environ.get("SIMHOST_UNAME_R") or platform.release()


def available(exp: dict) -> list[str]:
    """What ``modprobe`` can load on this host: the profile's list (or the RDMA set), its boot modules, and the
    NVIDIA driver's modules when the GPU driver marker is present."""
    out = list(exp.get("modules_available") or RDMA_AVAILABLE)
    for m in exp.get("kernel_modules", []):
        if m not in out:
            out.append(m)
    if gpu_driver(exp):
        out += [m for m in NVIDIA_MODULES if m not in out]
    return out


def gpu_driver(exp: dict) -> dict | None:
    gpu = exp.get("gpu") or None
    return gpu if gpu and gpu.get("driver") == "nvidia" else None


def boot_modules(exp: dict) -> list[str]:
    mods = list(exp.get("kernel_modules", []))
    if gpu_driver(exp):
        mods += [m for m in NVIDIA_BOOT if m not in mods]
    return mods


# ------------------------------------------------------------------------------------------------ state
def loaded(root: Path) -> list[str]:
    """Loaded modules, newest first (the /proc/modules order)."""
    root = Path(root)
    order = (_state(root).get("order") or [])
    present = set(sysfs.ls(root / "module"))
    live = [m for m in order if m in present]
    return live + sorted(present - set(live))


def is_loaded(root: Path, name: str) -> bool:
    return (Path(root) / "module" / name / "initstate").is_file()


def _state(root: Path) -> dict:
    text = sysfs.read(sysfs.state_dir(root) / STATE)
    return json.loads(text) if text else {}


def _save_state(root: Path, order: list[str]) -> None:
    statefile.write_json(sysfs.state_dir(root) / STATE, {"order": order}, indent=1, mkdir=True)


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")


def module_version(name: str, exp: dict) -> str | None:
    """MODULE_VERSION of a module: MLNX_OFED/DOCA builds carry the stack version, the NVIDIA driver its own;
    inbox (in-tree) modules have none (no ``version`` file)."""
    gpu = gpu_driver(exp)
    if gpu and name in NVIDIA_MODULES:
        return str(gpu.get("version") or "")
    stack = exp.get("stack") or {}
    if stack.get("provider") in ("mlnx_ofed", "doca") and name in OFED_VERSIONED:
        # a driver booted from installed modules carries their MODULE_VERSION (simhost/driver.py)
        return stack.get("module_version") or stack.get("version")
    return None


def write_module_dir(root: Path, name: str, exp: dict) -> None:
    mdir = Path(root) / "module" / name
    _w(mdir / "initstate", "live")
    _w(mdir / "refcnt", "0")
    _w(mdir / "srcversion", hashlib.sha256(name.encode()).hexdigest()[:23].upper())
    _w(mdir / "coresize", str(SIZES.get(name, 65536)))
    (mdir / "parameters").mkdir(parents=True, exist_ok=True)
    (mdir / "holders").mkdir(parents=True, exist_ok=True)
    version = module_version(name, exp)
    if version:
        _w(mdir / "version", version)


def _holders_refresh(root: Path) -> None:
    """holders/<user> links and refcnt from the dependencies of what is loaded (refcnt = number of users)."""
    root = Path(root)
    live = set(sysfs.ls(root / "module"))
    for name in live:
        hdir = root / "module" / name / "holders"
        hdir.mkdir(parents=True, exist_ok=True)
        users = sorted(u for u in live if name in DEPENDS.get(u, []))
        for old in sysfs.ls(hdir):
            if old not in users:
                (hdir / old).unlink()
        for u in users:
            if not os.path.lexists(hdir / u):
                (hdir / u).symlink_to(f"../../{u}")
        _w(root / "module" / name / "refcnt", str(len(users) + BASE_USERS.get(name, 0)))


def render_proc_modules(root: Path) -> str:
    root = Path(root)
    lines = []
    for name in loaded(root):
        users = sysfs.ls(root / "module" / name / "holders")
        refcnt = sysfs.read(root / "module" / name / "refcnt") or "0"
        size = sysfs.read(root / "module" / name / "coresize") or str(SIZES.get(name, 65536))
        used = "".join(u + "," for u in users) or "-"
        lines.append(f"{name} {size} {refcnt} {used} Live 0x0000000000000000")
    return "".join(line + "\n" for line in lines)


def write_proc_modules(root: Path) -> Path:
    """Rewrite the /proc/modules view in place (a bind mount of it keeps showing the same inode)."""
    path = proc_modules_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render_proc_modules(root)
    with open(path, "a+", encoding="utf-8") as fh:
        fh.seek(0)
        if fh.read() != text:
            fh.seek(0)
            fh.truncate()
            fh.write(text)
    return path


def _after_change(root: Path, order: list[str]) -> None:
    _holders_refresh(root)
    _save_state(root, order)
    cm = Path(root) / "kernel/config/rdma_cm"
    if is_loaded(root, "rdma_cm"):
        cm.mkdir(parents=True, exist_ok=True)
    elif cm.is_dir():
        shutil.rmtree(cm, ignore_errors=True)
    write_proc_modules(root)


# ------------------------------------------------------------------------------------------------ load/unload
def _norm(name: str) -> str:
    return name.replace("-", "_")


def load(root: Path, name: str, exp: dict | None = None, dry_run: bool = False, first_time: bool = False) -> list[str]:
    """``modprobe NAME``: load it and what it depends on; returns the modules inserted (in order)."""
    root = Path(root)
    exp = exp if exp is not None else sysfs.simhost_profile(Path(root))
    name = _norm(name)
    if name not in available(exp):
        raise ModprobeError(f"modprobe: FATAL: Module {name} not found in directory /lib/modules/{release()}")
    if is_loaded(root, name):
        if first_time:
            raise ModprobeError(f"modprobe: ERROR: could not insert '{name}': Module already in kernel")
        return []
    todo: list[str] = []

    def visit(m: str) -> None:
        for dep in DEPENDS.get(m, []):
            if dep not in todo and not is_loaded(root, dep):
                visit(dep)
        if m not in todo and not is_loaded(root, m):
            todo.append(m)
    visit(name)
    if dry_run:
        return todo
    order = loaded(root)
    for m in todo:
        write_module_dir(root, m, exp)
        order.insert(0, m)
    _after_change(root, order)
    return todo


def unload(root: Path, name: str, exp: dict | None = None, dry_run: bool = False, first_time: bool = False) -> list[str]:
    """``modprobe -r NAME``: remove it, then the dependencies nothing else uses; returns the modules removed."""
    root = Path(root)
    exp = exp if exp is not None else sysfs.simhost_profile(Path(root))
    name = _norm(name)
    if not is_loaded(root, name):
        if name not in available(exp):
            raise ModprobeError(f"modprobe: FATAL: Module {name} not found.")
        if first_time:
            raise ModprobeError(f"modprobe: FATAL: Module {name} is not in kernel.")
        return []
    if sysfs.ls(root / "module" / name / "holders") or (sysfs.read(root / "module" / name / "refcnt") or "0") != "0":
        raise ModprobeError(f"modprobe: FATAL: Module {name} is in use.")
    removed = [name]
    live = set(loaded(root)) - {name}
    for dep in DEPENDS.get(name, [])[::-1]:   # then its dependencies that no one else holds (ignore-loaded pass)
        if dep in live and not BASE_USERS.get(dep) and not any(dep in DEPENDS.get(u, []) for u in live - {dep}):
            removed.append(dep)
            live.discard(dep)
    if dry_run:
        return removed
    for m in removed:
        shutil.rmtree(root / "module" / m, ignore_errors=True)
    _after_change(root, [m for m in loaded(root) if m in live])
    return removed


def boot(root: Path, exp: dict | None = None) -> list[str]:
    """At build time: load the profile's modules (and the GPU driver), in order, each with its dependencies."""
    root = Path(root)
    exp = exp if exp is not None else sysfs.simhost_profile(Path(root))
    done = []
    for m in boot_modules(exp):
        done += load(root, m, exp)
    if not boot_modules(exp):
        _after_change(root, [])
    return done


def modules_load_d(dirs=None) -> list[str]:
    """Module names from modules-load.d(5) files, as systemd-modules-load reads them: ``*.conf`` by file name over
    all directories (an earlier directory's file masks a later one of the same name), ``#``/``;`` comments."""
    files = {}
    dirs = MODULES_LOAD_DIRS if dirs is None else dirs
    for d in dirs:
        for name in sysfs.ls(Path(d)):
            if name.endswith(".conf") and name not in files:
                files[name] = Path(d) / name
    out = []
    for name in sorted(files):
        try:
            text = files[name].read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            line = line.strip()
            if line and line[0] not in "#;" and line not in out:
                out.append(line)
    return out


# ------------------------------------------------------------------------------------------------ CLI
USAGE = ("Usage:\n\tmodprobe [options] [-i] [-b] modulename\n\tmodprobe [options] -a [-i] [-b] modulename [modulename...]\n"
         "\tmodprobe [options] -r [-i] modulename\n\tmodprobe [options] -r -a [-i] modulename [modulename...]\n")


def modprobe_main(argv: list[str]) -> int:
    root = sysfs.root()
    remove = dry = quiet = verbose = all_ = first = False
    names: list[str] = []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--":
            names += args
            break
        if a.startswith("--"):
            opt = {"--remove": "r", "--dry-run": "n", "--show": "n", "--quiet": "q", "--verbose": "v", "--all": "a",
                   "--first-time": "F", "--use-blacklist": "b", "--ignore-install": "i", "--ignore-remove": "i",
                   "--help": "h"}.get(a)
            flags = [opt] if opt else None
            if flags is None:
                print(f"modprobe: unrecognized option '{a}'", file=sys.stderr)
                print(USAGE, file=sys.stderr, end="")
                return 1
        elif a.startswith("-") and len(a) > 1 and not names:
            flags = list(a[1:])
        else:
            names.append(a)
            continue
        for f in flags:
            if f == "r":
                remove = True
            elif f == "n":
                dry = True
            elif f == "q":
                quiet = True
            elif f == "v":
                verbose = True
            elif f == "a":
                all_ = True
            elif f == "F":
                first = True
            elif f in "bis":
                pass
            elif f == "h":
                print(USAGE, end="")
                return 0
            else:
                print(f"modprobe: invalid option -- '{f}'", file=sys.stderr)
                print(USAGE, file=sys.stderr, end="")
                return 1
    if not names:
        print("modprobe: ERROR: missing parameters. See -h.", file=sys.stderr)
        return 1
    targets = names if (remove or all_) else names[:1]   # the rest are module parameters
    try:
        for n in targets:
            if remove:
                done = unload(root, n, dry_run=dry, first_time=first)
                for m in done if verbose else []:
                    print(f"rmmod {m}")
            else:
                done = load(root, n, dry_run=dry, first_time=first)
                for m in done if verbose else []:
                    print(f"insmod /lib/modules/{release()}/kernel/{m}.ko")
    except ModprobeError as exc:
        if not (quiet and "not found" in exc.message):
            print(exc.message, file=sys.stderr)
        return exc.code
    return 0


def boot_main(root: Path, bind: bool = True) -> int:
    """simhost-modules.service: what systemd-modules-load would do, then the /proc/modules view."""
    root = Path(root)
    exp = sysfs.simhost_profile(Path(root))
    rc = 0
    for name in modules_load_d():
        try:
            done = load(root, name, exp)
            if done:
                print(f"simhost-modules: Inserted module '{name}'", flush=True)
        except ModprobeError:
            # systemd-modules-load's message for a module modprobe cannot find
            print(f"simhost-modules: Failed to find module '{name}'", flush=True)
            rc = 1
    path = write_proc_modules(root)
    builtin = Path("/lib/modules") / release() / "modules.builtin"
    if bind and not builtin.exists():   # community.general.modprobe reads it for modules not in /proc/modules
        builtin.parent.mkdir(parents=True, exist_ok=True)
        builtin.write_text("", encoding="utf-8")
    if bind:
        if not os.path.exists("/proc/modules"):
            print("simhost-modules: this kernel has no /proc/modules (built without module support): no mount "
                  "point to bind the simulated one onto; tools must read " + str(root / "module"), flush=True)
        else:
            subprocess.run(["umount", "/proc/modules"], capture_output=True, check=False)
            res = subprocess.run(["mount", "--bind", str(path), "/proc/modules"], capture_output=True, text=True,
                                 check=False)
            print("simhost-modules: " + (f"bound {path} over /proc/modules" if res.returncode == 0 else
                                         f"bind mount over /proc/modules failed: {res.stderr.strip()}"), flush=True)
    return rc


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "modprobe":
        return modprobe_main(argv[1:])
    if argv and argv[0] == "boot":
        import argparse  # pylint: disable=import-outside-toplevel
        p = argparse.ArgumentParser(prog="python3 -m simhost.kmod boot")
        p.add_argument("--root", default=str(sysfs.root()))
        p.add_argument("--no-bind", action="store_true")
        a = p.parse_args(argv[1:])
        return boot_main(Path(a.root), bind=not a.no_bind)
    print("usage: python3 -m simhost.kmod modprobe ARGS... | boot [--root R] [--no-bind]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
