"""Fake ``show_gids`` (MLNX_OFED / mlnx-tools sbin/show_gids) drawn from the simulated sysfs tree."""

from __future__ import annotations

import sys

from .. import sysfs

HEADER = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n"


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    r = sysfs.root()
    out = [HEADER]
    devs = [argv[1]] if len(argv) > 1 and argv[1] else sysfs.ib_devices()
    count = 0
    for dev in devs:
        ports_dir = r / "class/infiniband" / dev / "ports"
        if not ports_dir.is_dir():
            sys.stdout.write("".join(out))
            out = []
            sys.stderr.write(f"ls: cannot access '{ports_dir.as_posix().replace(r.as_posix(), '/sys', 1)}/': No such file or directory\n")
            continue
        for port in sysfs.ls(ports_dir):
            pdir = ports_dir / port
            for g in sysfs.ls(pdir / "gids"):            # ls order: 0 1 10 100 ... 2 ...
                gid = sysfs.read(pdir / "gids" / g) or ""
                if gid in ("0000:0000:0000:0000:0000:0000:0000:0000", "fe80:0000:0000:0000:0000:0000:0000:0000"):
                    continue
                ndev = sysfs.read(pdir / "gid_attrs/ndevs" / g) or ""
                gtype = sysfs.read(pdir / "gid_attrs/types" / g) or ""
                ver = gtype[next((i for i, c in enumerate(gtype) if c in "vV"), len(gtype)):]
                if gid.split(":", 1)[0] == "0000":
                    ipv4 = "%d.%d.%d.%d" % (int(gid[30:32], 16), int(gid[32:34], 16), int(gid[35:37], 16), int(gid[37:39], 16))
                    out.append(f"{dev}\t{port}\t{g}\t{gid}\t{ipv4}  \t{ver}\t{ndev}\n")
                else:
                    out.append(f"{dev}\t{port}\t{g}\t{gid}\t\t\t{ver}\t{ndev}\n")
                count += 1
    out.append(f"n_gids_found={count}\n")
    sys.stdout.write("".join(out))
    return 0
