"""Put the kit's tools on a host's PATH in one call (install.yml): symlinks DEST/NAME -> SRC/NAME, and the removal of
links and files the host must not have. One command instead of one Ansible module call per file keeps Molecule's
prepare short (each call is a ``docker exec`` and a Python start in the container)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def apply(src: Path, dest: Path, link: list[str], unlink: list[str], absent: list[str]) -> dict:
    """Make each DEST/NAME of ``link`` a symlink to SRC/NAME, remove DEST/NAME of ``unlink`` and each path of
    ``absent``; return what changed. A link that already points where it should is left alone."""
    linked, removed = [], []
    dest.mkdir(parents=True, exist_ok=True)
    for name in link:
        target, path = str(src / name), dest / name
        if path.is_symlink() and os.readlink(path) == target:
            continue
        if path.is_symlink() or path.exists():
            path.unlink()
        path.symlink_to(target)
        linked.append(str(path))
    for path in [dest / name for name in unlink] + [Path(p) for p in absent]:
        if path.is_symlink() or path.exists():
            path.unlink()
            removed.append(str(path))
    return {"changed": bool(linked or removed), "linked": linked, "removed": removed}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m simhost links", description=__doc__.splitlines()[0])
    parser.add_argument("--src", required=True, type=Path, help="directory the links point into (/opt/simhost/bin)")
    parser.add_argument("--dest", required=True, type=Path, help="directory of the links (/usr/local/bin)")
    parser.add_argument("--link", nargs="*", default=[], metavar="NAME", help="tools to link")
    parser.add_argument("--unlink", nargs="*", default=[], metavar="NAME", help="DEST/NAME to remove")
    parser.add_argument("--absent", nargs="*", default=[], metavar="PATH", help="other files to remove")
    args = parser.parse_args(argv)
    missing = [name for name in args.link if not (args.src / name).exists()]
    if missing:
        print(f"simhost: error: not in {args.src}: {', '.join(missing)}", file=sys.stderr)
        return 2
    print(json.dumps(apply(args.src, args.dest, args.link, args.unlink, args.absent)))
    return 0
