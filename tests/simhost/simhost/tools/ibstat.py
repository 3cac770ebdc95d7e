"""Fake ``ibstat`` (rdma-core infiniband-diags/ibstat.c over libibumad) drawn from the simulated sysfs tree."""

from __future__ import annotations

import getopt
import os
import sys

from .. import sysfs
from ._common import getopt_message as _getopt_message

PORT_STATE = ["???", "Down", "Initializing", "Armed", "Active"]
PHYS_STATE = ["No state change", "Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp",
              "LinkErrorRecovery", "PhyTest"]

USAGE = """
Usage: {prog} [options] <ca_name> [portnum]

Options:
  --list_of_cas, -l       list all IB devices
  --short, -s             short output
  --port_list, -p         show port list
  --config, -z <config>   use config file, default: /etc/infiniband-diags/ibdiag.conf
  --verbose, -v           increase verbosity level
  --debug, -d             raise debug level
  --help, -h              help message
  --version, -V           show version

Examples:
  {prog} -l       # list all IB devices
  {prog} mthca0 2 # stat port 2 of 'mthca0'

"""


def _panic(msg: str) -> int:
    sys.stderr.write(f"ibpanic: [{os.getpid()}] main: {msg}\n")
    return 255


def _port_guid(dev: str, port: int) -> str:
    gid0 = sysfs.read(sysfs.port_dir(dev, port) / "gids/0") or "0000:0000:0000:0000:0000:0000:0000:0000"
    return "0x" + gid0.replace(":", "")[16:]


def _port_lines(dev: str, port: int, alone: bool) -> list:
    pre, hdr = ("", "") if alone else ("\t\t", "\t")
    p = sysfs.port_dir(dev, port)
    state = sysfs.num_value(sysfs.read(p / "state"))
    phys = sysfs.num_value(sysfs.read(p / "phys_state"))
    rate_text = sysfs.read(p / "rate") or "0"
    rate = rate_text.split()[0]
    if "FDR10" in rate_text:
        rate_line = f"{pre}Rate: {int(float(rate))} (FDR10)"
    elif rate == "2.5":
        rate_line = f"{pre}Rate: 2.5"
    else:
        rate_line = f"{pre}Rate: {int(float(rate))}"
    return [
        f"{hdr}Port {port}:",
        f"{pre}State: {PORT_STATE[state] if state <= 4 else '???'}",
        f"{pre}Physical state: {PHYS_STATE[phys] if phys <= 7 else '???'}",
        rate_line,
        f"{pre}Base lid: {sysfs.num_value(sysfs.read(p / 'lid'))}",
        f"{pre}LMC: {int(sysfs.read(p / 'lid_mask_count') or '0')}",
        f"{pre}SM lid: {sysfs.num_value(sysfs.read(p / 'sm_lid'))}",
        f"{pre}Capability mask: 0x{int(sysfs.read(p / 'cap_mask') or '0', 16):08x}",
        f"{pre}Port GUID: {_port_guid(dev, port)}",
        f"{pre}Link layer: {sysfs.read(p / 'link_layer') or 'InfiniBand'}",
    ]


def _ca_lines(dev: str) -> list:
    d = sysfs.ib_dir(dev)
    ntype = sysfs.read(d / "node_type") or "1: CA"
    kind = ntype.split(": ", 1)[-1]
    return [
        f"{kind} '{dev}'",
        f"\t{kind} type: {sysfs.read(d / 'hca_type') or ''}",
        f"\tNumber of ports: {len(sysfs.ports(dev))}",
        f"\tFirmware version: {sysfs.read(d / 'fw_ver') or ''}",
        f"\tHardware version: {sysfs.read(d / 'hw_rev') or ''}",
        f"\tNode GUID: 0x{(sysfs.read(d / 'node_guid') or '').replace(':', '')}",
        f"\tSystem image GUID: 0x{(sysfs.read(d / 'sys_image_guid') or '').replace(':', '')}",
    ]


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0])
    try:
        longopts = ["list_of_cas", "short", "port_list", "config=", "verbose", "debug", "help", "version"]
        opts, args = getopt.gnu_getopt(argv[1:], "lspz:vdhV", longopts)
    except getopt.GetoptError as exc:
        sys.stderr.write(_getopt_message(prog, exc) + USAGE.format(prog=prog))
        return 2
    list_only = short = list_ports = False
    for opt, _val in opts:
        if opt in ("-h", "--help"):
            sys.stderr.write(USAGE.format(prog=prog))
            return 2
        if opt in ("-V", "--version"):
            sys.stderr.write(f"{prog} BUILD VERSION: 44.0\n")
            return 0
        list_only |= opt in ("-l", "--list_of_cas")
        short |= opt in ("-s", "--short")
        list_ports |= opt in ("-p", "--port_list")
    r = sysfs.root()
    if not (r / "class/infiniband").is_dir():
        return _panic("can't list IB device names: No such file or directory")
    devs = sysfs.ib_devices()
    port_arg = None
    if len(args) > 1:
        try:
            port_arg = int(args[1], 0)
        except ValueError:
            port_arg = 0
    if args:
        match = [d for d in devs if args[0].startswith(d)]
        if not match:
            return _panic(f"'{args[0]}' IB device can't be found")
        devs = [max(match, key=len)] if args[0] in match else [match[0]]
    out: list = []
    if list_ports:
        for dev in devs:
            for port in sysfs.ports(dev):
                guid = _port_guid(dev, port)
                if int(guid, 16):
                    out.append(guid)
    else:
        for dev in devs:
            if list_only:
                out.append(dev)
            elif port_arg is not None and not short:
                ports = sysfs.ports(dev)
                if port_arg not in ports:
                    sys.stdout.write("\n".join(out) + ("\n" if out else ""))
                    sys.stderr.write(f"ibwarn: [{os.getpid()}] ca_stat: CA: '{dev}' has no port number {port_arg}"
                                     f" - max ({len(ports)})\n")
                    return _panic(f"stat of IB device '{dev}' failed: No such file or directory")
                out.append(f"CA: '{dev}'")
                out.extend(_port_lines(dev, port_arg, alone=True))
            else:
                out.extend(_ca_lines(dev))
                if not short:
                    for port in sysfs.ports(dev):
                        out.extend(_port_lines(dev, port, alone=False))
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0
