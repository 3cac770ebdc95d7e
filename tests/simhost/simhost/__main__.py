"""Command line: ``python3 -m simhost build --profile NAME|PATH --root DIR [--host-index N]``, ``check``, ``list``,
``names --profile NAME|PATH [--host-index N]`` (the RDMA device names a boot gives, simhost/naming.py),
``watch``, ``cable unplug|plug --device DEV --port N [--root DIR]``, ``counters pfc-storm|ecn|drops|symbol-errors|flap|show
--device DEV [--port N] [--root DIR] [options]`` (counter faults, simhost/faults.py), ``fabric netfile|env ...`` (simhost/fabric.py),
``files < SPEC.json`` (a host's files, links and removals in one call: simhost/kitfiles.py), ``install < SPEC.json``
(a host's whole kit install in one call: simhost/kitinstall.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import faults
from .fabric import main as fabric_main
from .firmware import set_cable
from .kitfiles import main as files_main
from .kitinstall import main as install_main
from .profile import ProfileError, expand, list_profiles, load
from .kernelfs import settle, watch
from .sysfs import DEFAULT_ROOT, persist_dir
from .tree import booted_names, build_tree


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["files"]:  # a host's files in one call (install.yml)
        try:
            return files_main(argv[1:])
        except OSError as exc:
            print(f"simhost: error: {exc}", file=sys.stderr)
            return 2
    if argv[:1] == ["install"]:  # a host's kit install in one call (install.yml)
        return install_main(argv[1:])
    if argv[:1] == ["fabric"]:  # the InfiniBand fabric commands (ibsim netfile, umad2sim env files)
        try:
            return fabric_main(argv[1:])
        except (ProfileError, ValueError, OSError) as exc:
            print(f"simhost: error: {exc}", file=sys.stderr)
            return 2
    parser = argparse.ArgumentParser(prog="python3 -m simhost", description="simulated ConnectX host kit")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="(re)build the sysfs tree of a profile under a root directory")
    b.add_argument("--profile", required=True, help="profile name (profiles/<name>.yml) or path to .yml/.json")
    b.add_argument("--root", required=True, help="directory that stands for /sys (e.g. /run/simhost/sys)")
    b.add_argument("--host-index", type=int, default=None, help="0..255; makes GUIDs/LIDs/IPv4 distinct per host")
    c = sub.add_parser("check", help="validate a profile and print it expanded as JSON")
    c.add_argument("--profile", required=True)
    c.add_argument("--host-index", type=int, default=None)
    sub.add_parser("list", help="list the bundled profiles")
    nm = sub.add_parser("names", help="the RDMA device names a boot gives (pin, else the udev rules on the disk)")
    nm.add_argument("--profile", required=True)
    nm.add_argument("--host-index", type=int, default=None)
    sub.add_parser("fabric", help="InfiniBand fabric: netfile (ibsim topology), env (umad2sim env files)")
    sub.add_parser("files", help="write files, make links, remove paths from a JSON spec on stdin, in one call")
    sub.add_parser("install", help="a host's kit install (files, units, fabric) from a JSON spec on stdin, in one call")
    w = sub.add_parser("watch", help="keep kernel attribute files (configfs rdma_cm, traffic_class, ecn) settled")
    w.add_argument("--root", required=True)
    w.add_argument("--once", action="store_true", help="settle once and exit")
    cab = sub.add_parser("cable", help="unplug or plug the cable of a port (persists across boots, applied at once)")
    cab.add_argument("action", choices=["unplug", "plug"])
    cab.add_argument("--device", required=True, help="RDMA device, e.g. mlx5_1")
    cab.add_argument("--port", type=int, default=1, help="port number (default 1)")
    cab.add_argument("--root", default=DEFAULT_ROOT, help=f"the running tree (default {DEFAULT_ROOT})")
    cnt = sub.add_parser("counters", help="inject counter faults into a port (PFC storm, ECN, drops, symbol errors, "
                         "link flaps) or show its counters; runtime state, reset at boot")
    cnt.add_argument("action", choices=faults.ACTIONS)
    cnt.add_argument("--device", required=True, help="RDMA device, e.g. mlx5_1")
    cnt.add_argument("--port", default="1", help="port number (default 1)")
    cnt.add_argument("--root", default=DEFAULT_ROOT, help=f"the running tree (default {DEFAULT_ROOT})")
    cnt.add_argument("--priority", help="pfc-storm: the priority 0..7 (required)")
    cnt.add_argument("--seconds", help="pfc-storm: how long the storm lasts (default 60)")
    cnt.add_argument("--direction", help="pfc-storm: tx = this host sends pause (its buffer is full; default), "
                     "rx = it receives them")
    cnt.add_argument("--marked", help="ecn: ECN-marked RoCE packets (required)")
    cnt.add_argument("--cnp", help="ecn: CNPs sent for them (default: the model's CNPs per marked packet; 0 = none)")
    cnt.add_argument("--count", help="drops, symbol-errors: how many (required)")
    cnt.add_argument("--counter", help="drops: rx_discards_phy (default) or out_of_buffer")
    cnt.add_argument("--times", help="flap: how many link flaps (default 1)")

    def one_line_error(message):  # the counters command's errors are one line, as its value checks are
        print(f"{cnt.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)
    cnt.error = one_line_error
    args = parser.parse_args(argv)
    try:
        if args.cmd == "counters":
            names = ("priority", "seconds", "direction", "marked", "cnp", "count", "counter", "times")
            given = {name: getattr(args, name) for name in names}
            if args.action == "show":
                faults.check_options("show", given)
                print(json.dumps(faults.show(Path(args.root), args.device, args.port), indent=2))
            else:
                result = faults.inject(Path(args.root), args.action, args.device, args.port, **given)
                for note in result["notes"]:
                    print(f"simhost: note: {note}", file=sys.stderr)
                print(f"simhost: {faults.summary(result)}")
        elif args.cmd == "cable":
            msg = set_cable(Path(args.root), args.device, args.port, args.action == "plug")
            print(f"simhost: {msg} (kept in {persist_dir() / 'cables.json'}; the next boot keeps it)")
        elif args.cmd == "list":
            print("\n".join(list_profiles()))
        elif args.cmd == "watch":
            if args.once:
                settle(Path(args.root))
            else:
                watch(Path(args.root))
        elif args.cmd == "names":
            for dev in booted_names(load(args.profile), args.host_index):
                print(f"{dev['index']}\t{dev['pci']}\t{dev['kernel_name']}\t{dev['name']}\t{','.join(dev['netdevs'])}\t"
                      f"{dev['named_by'] or 'kernel name'}")
        elif args.cmd == "check":
            print(json.dumps(expand(load(args.profile), args.host_index), indent=2, sort_keys=True))
        else:
            exp = build_tree(load(args.profile), Path(args.root), args.host_index)
            print(f"simhost: built {exp['name']} (host {exp['host_index']}, {len(exp['devices'])} RDMA devices) at {args.root}")
    except (ProfileError, ValueError, OSError) as exc:
        print(f"simhost: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
