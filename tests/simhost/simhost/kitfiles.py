"""Lay out a host's files in one call (install.yml): ``python3 -m simhost files`` reads a JSON spec on stdin and
writes files, makes symlinks and removes paths, each only where the host differs, and prints what changed as JSON.
One command instead of one Ansible module call per file keeps Molecule's prepare short: each module call is a
``docker exec`` and a Python start in the container, and a ``copy`` is three.

Spec: ``{"write": {PATH: {"content": TEXT, "mode": "0644"}}, "link": {PATH: TARGET}, "absent": [PATH, ...]}``, every
key optional. Parent directories are made (0755); files are written whole (temp file, then rename)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from . import statefile


def _write(path: Path, content: str, mode: int) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    return statefile.write_if_changed(path, content, mode=mode)


def _link(path: Path, target: str) -> bool:
    if path.is_symlink() and os.readlink(path) == target:
        return False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.symlink_to(target)
    return True


def apply(spec: dict) -> dict:
    """Make the host match ``spec``; return {"changed", "written", "linked", "removed"} (paths, in spec order)."""
    written = [p for p, f in (spec.get("write") or {}).items() if _write(Path(p), f["content"], int(f.get("mode", "0644"), 8))]
    linked = [p for p, target in (spec.get("link") or {}).items() if _link(Path(p), target)]
    removed = []
    for p in spec.get("absent") or []:
        path = Path(p)
        if path.is_symlink() or path.is_file():
            path.unlink()
            removed.append(p)
    return {"changed": bool(written or linked or removed), "written": written, "linked": linked, "removed": removed}


def read_spec(argv, command):
    """The JSON spec on stdin of ``python3 -m simhost COMMAND``, or None after printing why (usage, not JSON)."""
    if argv:
        print(f"usage: python3 -m simhost {command} < SPEC.json (see simhost/kit{command}.py)", file=sys.stderr)
        return None
    try:
        return json.load(sys.stdin)
    except ValueError as exc:
        print(f"simhost: error: the spec on stdin is not JSON: {exc}", file=sys.stderr)
        return None


def main(argv=None) -> int:
    spec = read_spec(argv, "files")
    if spec is None:
        return 2
    unknown = set(spec) - {"write", "link", "absent"}
    if unknown:
        print(f"simhost: error: unknown spec keys {sorted(unknown)}; allowed: write, link, absent", file=sys.stderr)
        return 2
    print(json.dumps(apply(spec)))
    return 0
