"""Helpers shared by the fake tools."""

from __future__ import annotations

import getopt


def getopt_message(prog: str, exc: getopt.GetoptError) -> str:
    """The message glibc getopt_long() prints for a bad option."""
    opt = exc.opt or ""
    if len(opt) == 1:
        if "requires argument" in exc.msg:
            return f"{prog}: option requires an argument -- '{opt}'\n"
        return f"{prog}: invalid option -- '{opt}'\n"
    if "requires argument" in exc.msg:
        return f"{prog}: option '--{opt}' requires an argument\n"
    return f"{prog}: unrecognized option '--{opt}'\n"
