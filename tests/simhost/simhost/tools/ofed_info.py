"""Fake ``ofed_info`` (MLNX_OFED / DOCA-OFED) for hosts whose profile stack is mlnx_ofed or doca."""

from __future__ import annotations

import os
import sys

from .. import sysfs

USAGE = """Usage: {prog} [-s|-n|-l|-h]
 -s  Show package name and version number.
 -n  Show numerical version number only.
 -h  Show this help.
"""


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0])
    stack = sysfs.simhost_profile().get("stack") or {}
    if stack.get("provider") not in ("mlnx_ofed", "doca"):
        sys.stderr.write(f"{prog}: no MLNX_OFED / DOCA-OFED installation found\n")
        return 127
    line = stack["ofed_info_s"]
    args = argv[1:]
    if args == ["-s"]:
        sys.stdout.write(line + "\n")
    elif args == ["-n"]:
        sys.stdout.write(stack["version"] + "\n")
    elif args in ([], ["-l"]):
        name = line.rstrip(":")
        sys.stdout.write(f"{name}:\n\n")
    elif args in (["-h"], ["--help"]):
        sys.stdout.write(USAGE.format(prog=prog))
    else:
        sys.stderr.write(USAGE.format(prog=prog))
        return 1
    return 0
