"""A host's kit install in one call (install.yml): ``python3 -m simhost install < SPEC.json`` makes the host match the
spec and prints what changed as JSON. install.yml unpacks the kit into /opt/simhost, then gives each host one spec:
one ``docker exec`` and one Python start instead of the sixty Ansible tasks (each a ``docker exec`` and a Python
start, a ``copy`` three) that Molecule's prepare and ``make demo`` used to spend on it.

Spec, every key optional, applied in this order:

``stop``      [unit]: stopped and disabled where its unit file exists (before ``files`` removes it)
``files``     a kitfiles spec (``write``, ``link``, ``absent``; simhost/kitfiles.py)
``create``    {PATH: {content, mode}}: written only where PATH does not exist (stand-ins a test may replace later)
``dirs``      {PATH: mode}: made where missing, with that mode
              (in ``create`` and ``dirs``, ``{uname_r}`` stands for the running kernel's release, ``uname -r``)
``move``      [[SRC, DEST]]: renamed where SRC exists
``check``     PATH of a profile JSON: validated (simhost check), the call fails on a bad profile
``units``     [{name, restart_on: [PATH or "kit"]}] in order: ``systemctl daemon-reload`` first when a file under
              /etc/systemd changed; each unit is enabled, and restarted when one of its ``restart_on`` paths changed
              in this call (``"kit"``: the spec's ``kit_changed`` is true), else started
``fabric_env`` {root, etc}: the umad2sim environment files of the host's IB ports (simhost/fabric.py), after the
              units (simhost.service builds the tree they are made from)
``fabric_units`` as ``units``, after ``fabric_env`` (simhost-ibsync.service reads those files)
``ibsim``     {hosts, title, dir, unit}: the fabric host's one ibsim per rail: every rail's netfile from its hosts'
              booted profiles, ``ibsim-rail<N>.env``, the ``simhost-ibsim@.service`` template, each rail's instance
              enabled and restarted when its netfile, port or the template changed; rails no host has any more are
              stopped, disabled and their files removed
``ibsim_absent`` DIR: on a host that is no fabric host, every rail's ibsim stopped and disabled, its files under
              DIR and the template removed
``read``      [PATH]: their texts, in this order, under ``read`` (the booted profile the fabric host needs)

Output: {"changed", "written", "linked", "removed", "created", "moved", "restarted", "rails", "read"}.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from . import fabric, kitfiles, sysfs
from .profile import ProfileError, expand, load

KEYS = {"stop", "files", "create", "dirs", "move", "check", "units", "kit_changed", "fabric_env", "fabric_units",
        "ibsim", "ibsim_absent", "read"}
IBSIM_UNIT = "/etc/systemd/system/simhost-ibsim@.service"
SYSTEMD_DIR = "/etc/systemd/"
RAIL_ENV_RE = re.compile(r"^ibsim-rail(\d+)\.env$")


class InstallError(Exception):
    pass


def _systemctl(*args):
    run = subprocess.run(["systemctl", *args], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise InstallError(f"systemctl {' '.join(args)} failed (exit {run.returncode}): {(run.stderr or run.stdout).strip()}")


def _stop(units, unit_dir=Path("/etc/systemd/system")):
    stopped = []
    for name in units:
        if (unit_dir / name).exists():
            _systemctl("disable", "--now", "--quiet", name)
            stopped.append(name)
    return stopped


def _release(text):
    return text.replace("{uname_r}", os.uname().release)


def _create(spec):
    created = []
    for path, entry in (spec or {}).items():
        path = _release(path)
        if not os.path.lexists(path):
            kitfiles.apply({"write": {path: dict(entry, content=_release(entry["content"]))}})
            created.append(path)
    return created


def _dirs(spec):
    made = []
    for path, mode in (spec or {}).items():
        p = Path(_release(path))
        if not p.is_dir():
            p.mkdir(parents=True, mode=0o755)
            made.append(str(p))
        if (p.stat().st_mode & 0o7777) != int(mode, 8):
            p.chmod(int(mode, 8))
            made.append(str(p))
    return made


def _move(pairs):
    moved = []
    for src, dest in pairs or []:
        if os.path.lexists(src):
            os.replace(src, dest)
            moved.append(dest)
    return moved


def _units(units, changed, kit_changed):
    restarted = []
    for unit in units or []:
        _systemctl("enable", "--quiet", unit["name"])
        watched = unit.get("restart_on") or []
        if ("kit" in watched and kit_changed) or any(p in changed for p in watched):
            _systemctl("restart", unit["name"])
            restarted.append(unit["name"])
        else:
            _systemctl("start", unit["name"])
    return restarted


def _ibsim(spec):
    """The fabric host's ibsim instances (one per rail); returns (changed paths, restarted units, rails)."""
    out_dir = Path(spec["dir"])
    unit_path = IBSIM_UNIT
    result = fabric.write_netfiles(spec["hosts"], spec.get("title", ""), out_dir)
    files = {unit_path: {"content": spec["unit"], "mode": "0644"}}
    for rail in result["rails"]:
        files[str(out_dir / f"ibsim-rail{rail['rail']}.env")] = {"content": f"SIMHOST_IBSIM_PORT={rail['port']}\n",
                                                                 "mode": "0644"}
    written = kitfiles.apply({"write": files})["written"]
    wanted = {rail["rail"] for rail in result["rails"]}
    stale = sorted(int(m.group(1)) for m in (RAIL_ENV_RE.match(p.name) for p in out_dir.glob("ibsim-rail*.env"))
                   if m and int(m.group(1)) not in wanted)
    for rail in stale:
        _systemctl("disable", "--now", "--quiet", f"simhost-ibsim@{rail}.service")
        (out_dir / f"ibsim-rail{rail}.env").unlink()
    if unit_path in written:
        _systemctl("daemon-reload")
    restarted = []
    for rail in result["rails"]:
        name = f"simhost-ibsim@{rail['rail']}.service"
        _systemctl("enable", "--quiet", name)
        if rail["changed"] or unit_path in written or str(out_dir / f"ibsim-rail{rail['rail']}.env") in written:
            _systemctl("restart", name)
            restarted.append(name)
        else:
            _systemctl("start", name)
    changed = written + [r["netfile"] for r in result["rails"] if r["changed"]] + result["removed"]
    changed += [str(out_dir / f"ibsim-rail{rail}.env") for rail in stale]
    return changed, restarted, [{"rail": r["rail"], "port": r["port"]} for r in result["rails"]]


def _ibsim_absent(out_dir):
    """Every rail's ibsim stopped and disabled, its env and netfile and the template removed; the removed paths."""
    out_dir = Path(out_dir)
    removed = []
    for path in sorted(out_dir.glob("ibsim-rail*.env")):
        m = RAIL_ENV_RE.match(path.name)
        if m:
            _systemctl("disable", "--now", "--quiet", f"simhost-ibsim@{m.group(1)}.service")
    for path in sorted(out_dir.glob("ibsim-rail*.env")) + sorted(out_dir.glob("fabric-rail*.net")) + [Path(IBSIM_UNIT)]:
        if path.exists():
            path.unlink()
            removed.append(str(path))
    return removed


def apply(spec: dict) -> dict:
    """Make the host match ``spec`` (see the module doc); return what changed."""
    unknown = set(spec) - KEYS
    if unknown:
        raise InstallError(f"unknown spec keys {sorted(unknown)}; allowed: {', '.join(sorted(KEYS))}")
    stopped = _stop(spec.get("stop") or [])
    files = kitfiles.apply(spec.get("files") or {})
    created = _create(spec.get("create"))
    made = _dirs(spec.get("dirs"))
    moved = _move(spec.get("move"))
    if spec.get("check"):
        expand(load(spec["check"]))
    changed = files["written"] + files["linked"] + files["removed"] + created + made + moved
    if spec.get("ibsim_absent"):
        changed += _ibsim_absent(spec["ibsim_absent"])
    if any(p.startswith(SYSTEMD_DIR) for p in changed):
        _systemctl("daemon-reload")
    kit_changed = bool(spec.get("kit_changed"))
    restarted = _units(spec.get("units"), changed, kit_changed)
    if spec.get("fabric_env"):
        env = spec["fabric_env"]
        changed += fabric.write_env_files(sysfs.simhost_profile(Path(env["root"])), Path(env["etc"]))
    restarted += _units(spec.get("fabric_units"), changed, kit_changed)
    rails = []
    if spec.get("ibsim"):
        ibsim_changed, ibsim_restarted, rails = _ibsim(spec["ibsim"])
        changed += ibsim_changed
        restarted += ibsim_restarted
    read = [Path(path).read_text(encoding="utf-8") for path in spec.get("read") or []]
    return {"changed": bool(changed or stopped or restarted), "written": files["written"], "linked": files["linked"],
            "removed": files["removed"], "created": created, "moved": moved, "stopped": stopped,
            "restarted": restarted, "paths": changed, "rails": rails, "read": read}


def main(argv=None) -> int:
    spec = kitfiles.read_spec(argv, "install")
    if spec is None:
        return 2
    try:
        print(json.dumps(apply(spec), sort_keys=True))
    except (InstallError, ProfileError, ValueError, OSError) as exc:
        print(f"simhost: error: {exc}", file=sys.stderr)
        return 2
    return 0
