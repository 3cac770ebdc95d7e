"""An InfiniBand fabric for simulated hosts: one ibsim process (Debian's ibsim-utils) per named fabric, and the
glue that lets the REAL opensm and infiniband-diags run against it through libumad2sim.so (LD_PRELOAD).

- ``netfile(hosts)``: the ibsim topology of the hosts whose profiles point to this fabric: one switch per IB rail
  (rail = the device's position among the host's IB devices: mlx5_0 of every host on ``sw-rail0``, mlx5_1 on
  ``sw-rail1``; separate rails are separate subnets, i.e. separate connected components of the one ibsim), one CA
  per IB device named ``"<hostname> <dev>"`` (its NodeDescription), ``caguid`` = port GUID - 1 so that ibsim's
  port GUID (node GUID + port number) is the profile's port GUID.
- ``env_files(exp)``: ``/etc/simhost/ibsim.env`` (LD_PRELOAD, IBSIM_SERVER_NAME/PORT) and one
  ``/etc/simhost/opensm/<port guid>.env`` (SIM_HOST) per IB port, read by the opensm@.service drop-in.
- ``exec_tool(name, argv)``: the ``sminfo``/``smpquery``/``saquery``/``ibnetdiscover`` launchers: exec the real
  /usr/sbin tool with the umad2sim environment; ``-C mlx5_N`` / ``-P n`` pick SIM_HOST (umad2sim has one CA,
  ``ibsim0``, attached at the node SIM_HOST names).
Stdlib only (runs in the containers). See README.md, "InfiniBand fabric and subnet manager".
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
from pathlib import Path

UMAD2SIM_GLOB = "/usr/lib/*/umad2sim/libumad2sim.so"
UMAD2SIM_DEFAULT = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
DEFAULT_PORT = 7070
# include/ibsim.h of ibsim 0.10: at most 10 clients (umad processes: each opensm, each smpquery/sminfo run) at a time
IBSIM_MAX_CLIENTS = 10
REAL_TOOLS_DIR = "/usr/sbin"
TOOLS = ("sminfo", "smpquery", "saquery", "ibnetdiscover")


def umad2sim_lib() -> str:
    found = sorted(glob.glob(UMAD2SIM_GLOB))
    return found[0] if found else UMAD2SIM_DEFAULT


def fabric_ports(exp: dict) -> list[tuple[dict, dict]]:
    """(device, port) of every port of the expanded profile that is on the host's fabric (IB ports, boot link layer)."""
    if not exp.get("ib_fabric"):
        return []
    return [(dev, port) for dev in exp["devices"] for port in dev["ports"] if port.get("fabric")]


def ib_devices(exp: dict) -> list[dict]:
    """The host's devices with at least one fabric port, in profile order: the index is the device's rail."""
    seen, out = set(), []
    for dev, _port in fabric_ports(exp):
        if dev["name"] not in seen:
            seen.add(dev["name"])
            out.append(dev)
    return out


def _load_host(item) -> dict:
    """An expanded profile from a path (JSON: the tree's .simhost/profile.json, or a raw profile with ib_fabric) or
    a {host, profile} mapping; raw profiles are expanded here."""
    from . import profile as profile_mod  # pylint: disable=import-outside-toplevel
    host = None
    if isinstance(item, dict) and "profile" in item:
        host, prof = item.get("host"), item["profile"]
    else:
        prof = item
    if isinstance(prof, (str, Path)):
        prof = profile_mod.load(str(prof))
    expanded = bool(prof.get("devices")) and all("port_guid" in p for d in prof["devices"] for p in d["ports"])
    if not expanded:
        if host and "ib_fabric" not in prof:  # a {host, profile} item of the fabric's host list
            prof = dict(prof, ib_fabric={"server": "fabric", "hostname": host})
        prof = profile_mod.expand(prof)
    return prof


def netfile(hosts: list, title: str = "") -> str:
    """The ibsim netfile of ``hosts`` (see the module doc). Raises ValueError on duplicate node ids or GUIDs."""
    exps = [_load_host(h) for h in hosts]
    rails: dict[int, list[tuple[str, int]]] = {}  # rail -> [(node id, ca port)]
    cas = []
    seen_ids, seen_guids = {}, {}
    for exp in exps:
        if not exp.get("ib_fabric"):
            continue
        for rail, dev in enumerate(ib_devices(exp)):
            node_id = dev["node_desc"]
            if node_id in seen_ids:
                raise ValueError(f"node id {node_id!r} of {exp['ib_fabric']['hostname']} is already taken by "
                                 f"{seen_ids[node_id]} (host names must differ)")
            seen_ids[node_id] = exp["ib_fabric"]["hostname"]
            ports = [p for p in dev["ports"] if p.get("fabric")]
            first = dev["ports"][0]
            caguid = int(first["port_guid"], 16) - first["port"]
            for p in dev["ports"]:
                if int(p["port_guid"], 16) != caguid + p["port"]:
                    raise ValueError(f"{node_id}: port {p['port']} GUID {p['port_guid']} is not node GUID + port "
                                     "(ibsim numbers port GUIDs so)")
            for p in ports:
                if p["port_guid"] in seen_guids:
                    raise ValueError(f"{node_id}: port GUID 0x{p['port_guid']} is also {seen_guids[p['port_guid']]}")
                seen_guids[p["port_guid"]] = node_id
            links = []
            for p in ports:
                sw = rails.setdefault(rail, [])
                sw.append((node_id, p["port"]))
                links.append((p["port"], rail, len(sw)))
            cas.append((node_id, caguid, len(dev["ports"]), links))
    out = ["# ibsim netfile written by simhost (python3 -m simhost fabric netfile)" + (f": fabric {title}" if title else ""),
           "# one switch per IB rail (separate subnets), one CA per IB device \"<hostname> <dev>\";",
           "# caguid = port GUID - 1: ibsim's port GUID (node GUID + port number) is the profile's port GUID", ""]
    for rail in sorted(rails):
        members = rails[rail]
        out.append(f"switchguid=0x{0x0002c90300fab000 + rail:016x}")
        out.append(f'Switch {max(len(members), 2)} "sw-rail{rail}"')
        for i, (node_id, ca_port) in enumerate(members, 1):
            out.append(f'[{i}] "{node_id}"[{ca_port}]')
        out.append("")
    for node_id, caguid, nports, links in cas:
        out.append(f"caguid=0x{caguid:016x}")
        out.append(f'Hca {nports} "{node_id}"')
        for ca_port, rail, sw_port in links:
            out.append(f'[{ca_port}] "sw-rail{rail}"[{sw_port}]')
        out.append("")
    return "\n".join(out)


def server_env(exp: dict) -> dict:
    """The umad2sim client environment of a host on a fabric (without SIM_HOST)."""
    fab = exp["ib_fabric"]
    return {"LD_PRELOAD": umad2sim_lib(), "IBSIM_SERVER_NAME": fab["server"], "IBSIM_SERVER_PORT": str(fab["port"])}


def env_files(exp: dict) -> dict[str, str]:
    """{relative path: content} of the environment files under /etc/simhost (empty without a fabric)."""
    if not exp.get("ib_fabric"):
        return {}
    files = {"ibsim.env": "# umad2sim client environment (simhost fabric); read by opensm@.service.d/simhost.conf\n"
             + "".join(f"{k}={v}\n" for k, v in server_env(exp).items())}
    for dev, port in fabric_ports(exp):
        files[f"opensm/0x{port['port_guid']}.env"] = (
            f"# opensm@0x{port['port_guid']}.service binds {dev['name']} port {port['port']}: its ibsim node\n"
            f'SIM_HOST="{dev["node_desc"]}"\n')
    return files


def write_env_files(exp: dict, etc: Path) -> list[str]:
    """Write env_files(exp) under ``etc`` (only what changed) and remove stale opensm/*.env; return changed paths."""
    want = env_files(exp)
    changed = []
    for rel, text in want.items():
        path = etc / rel
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
            changed.append(str(path))
    stale = [etc / "ibsim.env"] if "ibsim.env" not in want else []
    stale += [p for p in (etc / "opensm").glob("*.env") if f"opensm/{p.name}" not in want]
    for path in stale:
        if path.exists():
            path.unlink()
            changed.append(str(path))
    return changed


_SMINFO_RE = re.compile(r"^sminfo: sm lid (\d+) sm guid (0x[0-9a-f]+), activity count (\d+) priority (\d+) "
                        r"state (\d+) (SMINFO_\w+)$")


def parse_sminfo(text: str) -> dict | None:
    """``sminfo: sm lid 1 sm guid 0x..., activity count 72 priority 10 state 3 SMINFO_MASTER`` -> dict; None for
    anything else (``sminfo: iberror: failed: query``: no SM answers)."""
    for line in text.splitlines():
        m = _SMINFO_RE.match(line.strip())
        if m:
            return {"lid": int(m.group(1)), "guid": m.group(2), "activity": int(m.group(3)),
                    "priority": int(m.group(4)), "state": int(m.group(5)), "state_name": m.group(6)}
    return None


# ------------------------------------------------------------------------------------------- tool launchers
def _split_opts(argv: list[str]) -> tuple[list[str], str | None, str | None]:
    """Remove -C/--Ca and -P/--Port (all spellings) from argv; return (rest, ca, port)."""
    rest, ca, port = [], None, None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        for short, long_ in (("-C", "--Ca"), ("-P", "--Port")):
            val = None
            if arg in (short, long_) and i + 1 < len(argv):
                val, i = argv[i + 1], i + 1
            elif arg.startswith(long_ + "="):
                val = arg[len(long_) + 1:]
            elif arg.startswith(short) and len(arg) > 2 and not arg.startswith("--"):
                val = arg[2:]
            if val is not None:
                if short == "-C":
                    ca = val
                else:
                    port = val
                break
        else:
            rest.append(arg)
        i += 1
    return rest, ca, port


def tool_command(name: str, argv: list[str], exp: dict, environ: dict | None = None) -> tuple[list[str], dict]:
    """(argv, env) to exec for simulated tool ``name`` called as ``argv`` (argv[0] = the launcher)."""
    env = dict(os.environ if environ is None else environ)
    real = os.path.join(REAL_TOOLS_DIR, name)
    args = list(argv[1:])
    ports = fabric_ports(exp)
    if not ports:  # no fabric: the real tool as on a host without IB hardware
        return [real] + args, env
    rest, ca, port = _split_opts(args)
    chosen = None
    for dev, p in ports:
        if (ca is None or dev["name"] == ca) and (port is None or str(p["port"]) == port.strip()):
            chosen = (dev, p)
            break
    if chosen is None and ca is not None:
        return [real] + args, env  # a CA that is no fabric device: the real tool's own error for it
    if chosen is None:  # -P n with no such port on the first device: let the real tool say so
        chosen = ports[0]
        rest = ["-P", port] + rest
    elif port is not None and chosen[1]["port"] != 1:
        rest = ["-P", port] + rest
    env.update(server_env(exp))
    env["SIM_HOST"] = chosen[0]["node_desc"]
    return [real] + rest, env


def exec_tool(name: str, argv: list[str]) -> int:
    from . import sysfs  # pylint: disable=import-outside-toplevel
    try:
        exp = sysfs.simhost_profile()
    except (OSError, ValueError):
        exp = {}
    cmd, env = tool_command(name, argv, exp)
    try:
        os.execve(cmd[0], [name] + cmd[1:], env)
    except OSError as exc:
        print(f"{name}: {cmd[0]}: {exc.strerror} (install infiniband-diags)", file=sys.stderr)
        return 127
    return 0  # not reached


# ---------------------------------------------------------------------------------------------------- CLI
def main(argv=None) -> int:
    import argparse  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(prog="python3 -m simhost fabric", description="simulated InfiniBand fabric")
    sub = parser.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("netfile", help="print the ibsim netfile of the hosts on one fabric")
    n.add_argument("--profile", action="append", default=[], help="a host's profile JSON (expanded or with ib_fabric)")
    n.add_argument("--hosts", help="JSON list of {host, profile} (a path, or - for stdin)")
    n.add_argument("--title", default="", help="fabric name for the header comment")
    n.add_argument("--output", help="write here (only when changed) instead of printing")
    e = sub.add_parser("env", help="write /etc/simhost/ibsim.env and opensm/<guid>.env for a host")
    e.add_argument("--root", default="/run/simhost/sys", help="the host's tree (its .simhost/profile.json)")
    e.add_argument("--etc", default="/etc/simhost")
    args = parser.parse_args(argv)
    if args.cmd == "netfile":
        hosts = list(args.profile)
        if args.hosts:
            text = sys.stdin.read() if args.hosts == "-" else Path(args.hosts).read_text(encoding="utf-8")
            hosts += json.loads(text)
        text = netfile(hosts, args.title)
        if args.output:
            out = Path(args.output)
            if out.exists() and out.read_text(encoding="utf-8") == text:
                print(f"simhost: {out} unchanged")
            else:
                tmp = out.with_name(out.name + ".tmp")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, out)
                print(f"simhost: wrote {out} (changed)")
        else:
            sys.stdout.write(text)
    else:
        from . import sysfs  # pylint: disable=import-outside-toplevel
        changed = write_env_files(sysfs.simhost_profile(Path(args.root)), Path(args.etc))
        print(f"simhost: {len(changed)} environment file(s) changed" + (": " + ", ".join(changed) if changed else ""))
    return 0
