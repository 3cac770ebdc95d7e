"""Fake mlnx-tools ``cma_roce_mode`` and ``cma_roce_tos`` (bash scripts, sbin/ of mlnx-tools) on the simulated tree.

Same steps, messages and exit codes as the scripts: bash getopts (``-d dev`` default mlx5_0, ``-p port`` default 1,
``-m 1|2`` / ``-t tos``, ``-h``; a bad option is reported by getopts and otherwise ignored), the root check, the
rdma_cm configfs check, ``mkdir rdma_cm/<dev>`` when absent (removed again at the end only in that case, as the
current scripts do), the port check, the write (a value the kernel refuses makes bash report
``echo: write error: Invalid argument`` and the script goes on), then ``cat`` of the attribute and exit 0.
Bash's own messages name the script as invoked ($0) and the line of the failing command in the current scripts.
configfs semantics (mkdir makes the attribute files appear, values kept across rmdir) are simhost.kernelfs's.
"""

from __future__ import annotations

import errno
import os
import sys

from .. import kernelfs, sysfs

USAGE = {
    "mode": ("Set/Show RoCE default mode of RDMA_CM applications\n\nUsage:\n\tcma_roce_mode OPTIONS\nOptions:\n"
             "\t-h              show this help\n\t-d <dev>        use IB device <dev> (default mlx5_0)\n"
             "\t-p <port>       use port <port> of IB device (default 1)\n"
             "\t-m <roce_mode>  set RoCE mode of RDMA_CM applications (1 or 2)\n"),
    "tos": ("Set/Show RoCE default ToS of RDMA_CM applications\n\nUsage:\n\tcma_roce_tos OPTIONS\nOptions:\n"
            "\t-h              show this help\n\t-d <dev>        use IB device <dev> (default mlx5_0)\n"
            "\t-p <port>       use port <port> of IB device (default 1)\n"
            "\t-t <tos>        set ToS of RoCE RDMA_CM applications (0)\n"),
}
# line numbers of the tested commands in mlnx-tools sbin/cma_roce_mode (641718b) and sbin/cma_roce_tos (1af0469)
LINES = {"mode": {"test1": 108, "test2": 110, "write1": 109, "write2": 111}, "tos": {"test": 109, "write": 110}}


def _getopts(prog: str, args: list, letter: str):
    """bash getopts "d:<letter>:hp:" in its default (verbose) error mode."""
    opts = {"d": "mlx5_0", "p": "1", letter: None, "h": False}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            break
        j = 1
        while j < len(arg):
            ch = arg[j]
            if ch in ("d", "p", letter):
                value = arg[j + 1:]
                if not value:
                    i += 1
                    if i >= len(args):
                        sys.stderr.write("%s: option requires an argument -- %s\n" % (prog, ch))
                        return opts
                    value = args[i]
                opts[ch] = value
                break
            if ch == "h":
                opts["h"] = True
                return opts
            sys.stderr.write("%s: illegal option -- %s\n" % (prog, ch))
            j += 1
        i += 1
    return opts


def _int_test(prog: str, line: int, value: str, op: str, rhs: int) -> bool:
    """bash ``[ $VALUE -op N ]`` with its error for a value that is no integer."""
    text = value.strip()
    try:
        num = int(text, 10)
    except ValueError:
        sys.stderr.write("%s: line %d: [: %s: integer expression expected\n" % (prog, line, text if text else value))
        return False
    return num == rhs if op == "eq" else num >= rhs


def _quote(name: str) -> str:
    utf8 = "UTF-8" in (os.environ.get("LC_ALL") or os.environ.get("LC_MESSAGES") or os.environ.get("LANG") or "").upper()
    return "\u2018%s\u2019" % name if utf8 else "'%s'" % name


def _run(kind: str, argv: list) -> int:
    prog = argv[0] if argv else "cma_roce_" + kind
    letter = "m" if kind == "mode" else "t"
    opts = _getopts(prog, argv[1:], letter)
    if opts["h"]:
        sys.stdout.write(USAGE[kind])
        return 0
    if os.geteuid() != 0:
        sys.stdout.write("You must be root to run this\n")
        return 1
    root = sysfs.root()
    kernelfs.settle(root)
    cm = root / "kernel/config/rdma_cm"
    if not cm.is_dir():
        sys.stdout.write("Module rdma_cm is not loaded or does not support configfs\n")
        return 1
    dev, port = opts["d"], opts["p"]
    need_clean = False
    if not (cm / dev).is_dir():
        code = kernelfs.mkdir_cm_device(root, dev)
        if code:
            sys.stderr.write("mkdir: cannot create directory %s: %s\n" % (_quote(dev), os.strerror(code)))
            sys.stdout.write("Failed to create configuration for %s\n" % dev)
            return 1
        need_clean = True
    pdir = cm / dev / "ports" / port
    if not pdir.is_dir():
        sys.stdout.write("Device %s port %s does not exist\n" % (dev, port))
        return 1
    value = opts[letter]
    if kind == "mode":
        mode = value if value is not None else "0"
        wanted, line = None, 0
        if _int_test(prog, LINES["mode"]["test1"], mode, "eq", 1):
            wanted, line = kernelfs.ROCE_V1, LINES["mode"]["write1"]
        elif _int_test(prog, LINES["mode"]["test2"], mode, "eq", 2):
            wanted, line = kernelfs.ROCE_V2, LINES["mode"]["write2"]
        if wanted is not None:
            if wanted in kernelfs.roce_mode_allowed(root, dev, int(port)):
                (pdir / "default_roce_mode").write_text(wanted + "\n", encoding="utf-8")
                kernelfs.settle(root)
            else:
                sys.stderr.write("%s: line %d: echo: write error: %s\n" % (prog, line, os.strerror(errno.EINVAL)))
        sys.stdout.write(sysfs.read(pdir / "default_roce_mode") + "\n")
        attr = "default_roce_mode"
    else:
        tos = value if value is not None else "-1"
        if _int_test(prog, LINES["tos"]["test"], tos, "ge", 0):
            text = tos.strip()
            if kernelfs.kstrtou8(text + "\n") is not None:
                (pdir / "default_roce_tos").write_text(text + "\n", encoding="utf-8")
                kernelfs.settle(root)
            else:
                line = LINES["tos"]["write"]
                sys.stderr.write("%s: line %d: echo: write error: %s\n" % (prog, line, os.strerror(errno.EINVAL)))
        attr = "default_roce_tos"
    if kind == "tos":
        sys.stdout.write(sysfs.read(pdir / attr) + "\n")
    if need_clean:
        kernelfs.rmdir_cm_device(root, dev)
    return 0


def main_mode(argv=None) -> int:
    return _run("mode", list(sys.argv if argv is None else argv))


def main_tos(argv=None) -> int:
    return _run("tos", list(sys.argv if argv is None else argv))
