#!/usr/bin/env python3
"""Create and destroy a Molecule scenario's containers and networks with the docker CLI.

Molecule's create and destroy stages (tests/container/molecule/create.yml and destroy.yml run this; the scenarios
still use the docker driver for everything else: the community.docker.docker connection, `molecule login`). The
driver's own playbooks do the same work through a dozen Ansible tasks, one async job per container and one
include per network: 22-51 s for a create and 23-66 s for a scenario's two destroys on the CI machine (session 16),
about 470 s of CPU-bound Molecule time in all. Here they are docker CLI calls, a few seconds a scenario.

The platforms come on stdin as JSON (molecule.yml's `platforms`, environment variables expanded, as Molecule passes
them to its playbooks: molecule_yml.platforms). Only the keys the scenarios use are known; any other key is an error
that names it, so a scenario cannot ask for a setting that would be silently dropped.

Usage: molecule_hosts.py create|destroy < platforms.json    prints {"changed": true|false}
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys

KNOWN_KEYS = {"name", "image", "pre_build_image", "command", "stop_signal", "capabilities", "tmpfs", "volumes",
              "groups", "restart_policy", "docker_networks", "networks", "hostname", "ulimits"}
NETWORK_KEYS = {"name", "driver_options", "ipam_config", "internal"}   # a docker_networks entry
ATTACH_KEYS = {"name", "aliases"}                                        # a networks entry
BUILTIN_NETWORKS = {"bridge", "host", "none"}
LABEL = "owner=molecule"  # as the docker driver labels what it makes


def docker(*args, check=True):
    """Run one docker CLI call; its stdout."""
    done = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"docker {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def _refuse_unknown(what, given, known):
    unknown = sorted(set(given) - known)
    if unknown:
        raise SystemExit(f"{what}: {', '.join(unknown)} not supported by tests/tools/molecule_hosts.py "
                         f"(known: {', '.join(sorted(known))})")


def check_platforms(platforms):
    for platform in platforms:
        _refuse_unknown(f"platform {platform.get('name')}", platform, KNOWN_KEYS)
        for network in platform.get("docker_networks") or []:
            _refuse_unknown(f"platform {platform['name']}, docker_networks {network.get('name')}", network, NETWORK_KEYS)
        for network in platform.get("networks") or []:
            _refuse_unknown(f"platform {platform['name']}, networks {network.get('name')}", network, ATTACH_KEYS)
        if not platform.get("pre_build_image"):
            raise SystemExit(f"platform {platform['name']}: only pre_build_image: true is supported")


def networks(platforms):
    """{name: docker_networks entry} of every network the platforms attach to, builtin networks left out."""
    found = {}
    for platform in platforms:
        for network in platform.get("docker_networks") or []:
            found.setdefault(network["name"], network)
        for network in platform.get("networks") or []:
            if network["name"] not in BUILTIN_NETWORKS:
                found.setdefault(network["name"], {"name": network["name"]})
    return found


def create_network(spec):
    args = ["network", "create", "--label", LABEL] + (["--internal"] if spec.get("internal") else [])
    for key, value in (spec.get("driver_options") or {}).items():
        args += ["--opt", f"{key}={value}"]
    for ipam in spec.get("ipam_config") or []:
        args += [f"--{flag}={ipam[key]}" for key, flag in
                 (("subnet", "subnet"), ("gateway", "gateway"), ("iprange", "ip-range")) if ipam.get(key)]
    docker(*args, spec["name"])


def create_container(platform):
    name = platform["name"]
    attached = platform.get("networks") or [{"name": "bridge"}]
    args = ["create", "--name", name, "--hostname", platform.get("hostname", name), "--label", LABEL,
            "--network", attached[0]["name"]] + [f"--network-alias={alias}" for alias in attached[0].get("aliases") or []]
    args += [f"--cap-add={cap}" for cap in platform.get("capabilities") or []]
    args += [f"--tmpfs={path}" for path in platform.get("tmpfs") or []]
    args += [f"--volume={volume}" for volume in platform.get("volumes") or []]
    # Molecule's form name:soft[:hard] -> docker's name=soft[:hard]
    args += ["--ulimit=%s=%s" % tuple(limit.split(":", 1)) for limit in platform.get("ulimits") or []]
    if platform.get("stop_signal"):
        args += ["--stop-signal", platform["stop_signal"]]
    if platform.get("restart_policy"):
        args += ["--restart", platform["restart_policy"]]
    args.append(platform["image"])
    if platform.get("command"):
        args += shlex.split(platform["command"])
    docker(*args)
    for network in attached[1:]:
        docker("network", "connect", *[f"--alias={alias}" for alias in network.get("aliases") or []],
               network["name"], name)


def create(platforms):
    for name, spec in networks(platforms).items():
        if docker("network", "inspect", name, check=False).returncode != 0:
            create_network(spec)
    for platform in platforms:
        # a container of an earlier run that was not destroyed: made again, as the platform says now
        docker("rm", "--force", platform["name"], check=False)
        create_container(platform)
    docker("start", *[platform["name"] for platform in platforms])
    return True


def destroy(platforms):
    names = [platform["name"] for platform in platforms]
    existing = set(docker("ps", "--all", "--format", "{{.Names}}").stdout.split())
    present = [name for name in names if name in existing]
    if present:
        docker("rm", "--force", *present)
    changed = bool(present)
    for name in networks(platforms):
        inspected = docker("network", "inspect", "--format", "{{len .Containers}}", name, check=False)
        # a network still in use (a container outside this scenario) stays, as the driver leaves it
        if inspected.returncode == 0 and inspected.stdout.strip() == "0":
            docker("network", "rm", name)
            changed = True
    return changed


def main(argv):
    if len(argv) != 2 or argv[1] not in ("create", "destroy"):
        raise SystemExit(__doc__.strip().splitlines()[-1])
    platforms = json.load(sys.stdin)
    check_platforms(platforms)
    changed = create(platforms) if argv[1] == "create" else destroy(platforms)
    print(json.dumps({"changed": changed}))


if __name__ == "__main__":
    main(sys.argv)
