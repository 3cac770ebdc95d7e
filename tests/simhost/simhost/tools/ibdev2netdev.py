"""Fake ``ibdev2netdev`` (MLNX_OFED / mlnx-tools ofed_scripts/ibdev2netdev) drawn from the simulated sysfs tree."""

from __future__ import annotations

import os
import sys

from .. import sysfs

USAGE = "{prog} <options>\n-h, --help                print help message\n-v, --verbose             print more info\n"


def _vpd_strings(data: bytes) -> tuple[str, str]:
    """(ID string, PN) from a PCI VPD image; ('', 'NA') when absent or unreadable."""
    try:
        if not data or data[0] != 0x82:
            return "", "NA"
        n = data[1] | (data[2] << 8)
        ident = data[3:3 + n].decode("ascii", "replace")
        pos = 3 + n
        part = "NA"
        if data[pos] == 0x90:
            ln = data[pos + 1] | (data[pos + 2] << 8)
            body, i = data[pos + 3:pos + 3 + ln], 0
            while i + 3 <= len(body):
                kw, flen = body[i:i + 2], body[i + 2]
                if kw == b"PN":
                    part = body[i + 3:i + 3 + flen].decode("ascii", "replace")
                i += 3 + flen
        return ident, part
    except (IndexError, ValueError):
        return "", "NA"


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0])
    args = argv[1:]
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE.format(prog=prog))
        return 0
    if len(args) > 1 or (len(args) == 1 and args[0] != "-v"):
        sys.stdout.write(USAGE.format(prog=prog))
        return 255
    verbose = bool(args)
    r = sysfs.root()
    if not (r / "class/infiniband").is_dir():
        return 255  # driver is stopped
    mlx_netdevs = [n for n in sysfs.ls(r / "class/net") if (sysfs.read(r / "class/net" / n / "device/vendor") or "") == "0x15b3"]
    if not mlx_netdevs:
        return 0
    out = []
    for dev in sysfs.ib_devices():
        for port in sysfs.ports(dev):
            eth = sysfs.port_netdev(dev, port)
            if not eth:
                continue
            ndir = r / "class/net" / eth
            if not (ndir / "dev_id").exists():
                link = ""
            elif (ndir / "carrier").exists() or (ndir / "operstate").exists():
                # a real netdev always has the file; reading it while the link is down fails (EINVAL, absent
                # in the simulated tree), which the script's `cat 2>/dev/null` turns into "Down"
                link = "Up" if (sysfs.read(ndir / "carrier") or "0").strip() == "1" else "Down"
            else:
                link = "NA"
            if not verbose:
                out.append(f"{dev} port {port} ==> {eth} ({link})")
                continue
            d = sysfs.ib_dir(dev)
            state = (sysfs.read(sysfs.port_dir(dev, port) / "state") or "").split()
            ibstate = f"{state[1]:<6}" if len(state) > 1 else "NA"
            fn = sysfs.pci_function(dev)
            devid = f"MT{int(sysfs.read(fn / 'device') or '0', 16)}" if (fn / "device").exists() else "NA"
            fw = sysfs.read(d / "fw_ver") or "NA"
            try:
                desc, part = _vpd_strings((fn / "vpd").read_bytes())
                desc, part = f"{desc:<15}", f"{part:<11}"
            except OSError:
                desc, part = "", "NA"
            out.append(f"{fn.name} {dev} ({devid} - {part}) {desc} fw {fw} port {port} ({ibstate}) ==> {eth} ({link})")
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0
