#!/usr/bin/env python3
"""Run Molecule scenarios side by side where they cannot collide, and say plainly which one failed and where.

Most of a scenario's wall time is waiting (docker exec round trips, systemd boots, subnet manager sweeps), so two
scenarios at once use a 2-core machine much better than one. Two scenarios collide when they share a container
name, a Docker network name or a subnet (Docker refuses a second network on a subnet in use, and the simulated
hosts' profiles fix their rails' subnets). Those are read from each scenario's molecule.yml; a scenario starts, in
the order given, as soon as a lane is free and nothing running collides with it.

Each scenario's output goes to <logs>/<scenario>.log. At the end: the end of each failed scenario's log, one line
per scenario with the seconds of each Molecule stage (create, prepare, converge, ...), and last the tasks that
failed, so that the tail of a CI log names the failure; the first failed task of each, in a few lines, also goes to
<logs>/failed-tasks.txt, which tests/tools/stages prints after its stage times.

Usage: molecule_lanes.py [--jobs N] [--logs DIR] [SCENARIO ...]   (default: every molecule/*/molecule.yml)
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MOLECULE = ROOT / "molecule"
STAGE = re.compile(r"➜ (\w+): (Executing|Executed)")
FAILED_TASK = re.compile(r"^\s*(?:\S+\s+)?(fatal|failed): \[|ERROR|Executed: Failed")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def scenario_names():
    """Every scenario of the repository, in directory order."""
    return sorted(p.parent.name for p in MOLECULE.glob("*/molecule.yml"))


def resources(scenario):
    """What a scenario holds while it runs: container:<name>, network:<name> and subnet:<cidr> entries."""
    config = yaml.safe_load((MOLECULE / scenario / "molecule.yml").read_text(encoding="utf-8")) or {}
    held = set()
    for platform in config.get("platforms") or []:
        held.add(f"container:{platform['name']}")
        for network in platform.get("docker_networks") or []:
            held.add(f"network:{network['name']}")
            for ipam in network.get("ipam_config") or []:
                if ipam.get("subnet"):
                    held.add(f"subnet:{ipam['subnet']}")
    return held


def foreign_networks(held, networks):
    """Docker networks no scenario owns that hold a subnet a scenario needs, as "<name> (<subnet>, needed by <s>)".

    ``networks`` maps network names to their subnets (docker network inspect). Such a network, the demo's rails for
    one (hpcnet-rail0 is on the IB profiles' 10.10.0.0/24), makes a scenario's create fail with Docker's "Pool overlaps
    with other one on this address space"; it is named before anything runs instead."""
    owned = {item.split(":", 1)[1] for items in held.values() for item in items if item.startswith("network:")}
    found = []
    for name, subnets in sorted(networks.items()):
        if name in owned:
            continue
        for subnet in subnets:
            users = sorted(s for s, items in held.items() if f"subnet:{subnet}" in items)
            if users:
                found.append(f"{name} ({subnet}, needed by {', '.join(users)})")
    return found


def docker_networks():
    """Every Docker network's name and IPv4/IPv6 subnets; empty when docker cannot be asked."""
    try:
        ids = subprocess.run(["docker", "network", "ls", "-q"], capture_output=True, text=True, check=True).stdout.split()
        if not ids:
            return {}
        out = subprocess.run(["docker", "network", "inspect", *ids], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {n["Name"]: [c["Subnet"] for c in (n.get("IPAM") or {}).get("Config") or [] if c.get("Subnet")]
            for n in yaml.safe_load(out) or []}


def collides(scenario, running, held):
    """The running scenario this one would collide with, or None."""
    for other in running:
        if held[scenario] & held[other]:
            return other
    return None


FAILURE_LINES = 24  # lines shown from each failure on: a module's traceback ends with its cause


def failure_excerpt(log_path, tail=60):
    """The failed tasks (with the task line above each) and the last lines of a scenario's log."""
    lines = [ANSI.sub("", line.rstrip("\n")) for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines()]
    picked = []
    last_task = None
    shown = 0  # lines before this one are in picked already
    for number, line in enumerate(lines):
        if "TASK [" in line:
            last_task = line.strip(" │")
        if FAILED_TASK.search(line) and number >= shown:
            if last_task and last_task not in picked[-(FAILURE_LINES + 1):]:
                picked.append(last_task)
            shown = number + FAILURE_LINES
            picked.extend(text.strip(" │") for text in lines[number:shown])
    return picked[-200:], lines[-tail:]


def stage_times(lines, clock=time.monotonic):
    """Copy a scenario's output lines to its log; return {stage: seconds} as Molecule announces each stage.

    ``lines`` yields the output as bytes; each stage runs from its "➜ stage: Executing" line to its "Executed" line
    (a stage Molecule runs twice, destroy, adds up)."""
    times, begun = {}, {}
    for line in lines:
        match = STAGE.search(ANSI.sub("", line.decode("utf-8", errors="replace")))
        if match and match.group(2) == "Executing":
            begun[match.group(1)] = clock()
        elif match and match.group(1) in begun:
            stage = match.group(1)
            times[stage] = times.get(stage, 0) + clock() - begun.pop(stage)
        yield line, times


def _follow(process, log_path, sink):
    """Write the process's output to its log and keep its stage times in sink."""
    with open(log_path, "wb") as log:
        for line, times in stage_times(iter(process.stdout.readline, b"")):
            log.write(line)
            log.flush()
            sink.update(times)


def run(scenarios, jobs, logs):
    """Run the scenarios; return {scenario: (returncode, seconds, {stage: seconds})}."""
    held = {name: resources(name) for name in scenarios}
    waiting = list(scenarios)
    running = {}
    results = {}
    logs.mkdir(parents=True, exist_ok=True)
    # the collection as the clone holds it (collections/ansible_collections/hpcnet/rdma -> the clone), for every
    # scenario at once: .config/molecule/config.yml turns Molecule's per-scenario install (prerun) off
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(
        [str(ROOT / "collections")] + [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p]))
    while waiting or running:
        for name in list(waiting):
            if len(running) >= jobs:
                break
            if collides(name, running, held) is None:
                waiting.remove(name)
                process = subprocess.Popen(["molecule", "test", "-s", name], cwd=ROOT, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
                stages = {}
                follower = threading.Thread(target=_follow, args=(process, logs / f"{name}.log", stages), daemon=True)
                follower.start()
                running[name] = (process, time.monotonic(), follower, stages)
                print(f"molecule: {name} started", flush=True)
        time.sleep(2)
        for name, (process, started, follower, stages) in list(running.items()):
            if process.poll() is not None:
                follower.join()
                del running[name]
                results[name] = (process.returncode, round(time.monotonic() - started), stages)
                verdict = "passed" if process.returncode == 0 else f"FAILED (rc {process.returncode})"
                print(f"molecule: {name} {verdict} in {results[name][1]} s ({logs / name}.log)", flush=True)
    return results


def stage_table(results):
    """One line per scenario: verdict, total and each stage's seconds, in the order Molecule runs them."""
    order = []
    for _, _, stages in results.values():
        order += [stage for stage in stages if stage not in order]
    lines = ["  %-12s %-7s %6s  %s" % ("scenario", "result", "total", "  ".join("%11s" % s for s in order))]
    for name, (returncode, seconds, stages) in results.items():
        lines.append("  %-12s %-7s %4d s  %s" % (name, "passed" if returncode == 0 else "FAILED", seconds, "  ".join(
            "%9d s" % round(stages[s]) if s in stages else "%11s" % "-" for s in order)))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MOLECULE_JOBS", "2")))
    parser.add_argument("--logs", type=Path, default=ROOT / ".ansible" / "molecule-logs")
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args(argv)
    known = scenario_names()
    unknown = [name for name in args.scenarios if name not in known]
    if unknown or args.jobs < 1:
        parser.error(f"unknown scenario {', '.join(unknown)}; scenarios: {', '.join(known)}" if unknown
                     else "--jobs must be 1 or more")
    scenarios = args.scenarios or known
    in_the_way = foreign_networks({name: resources(name) for name in scenarios}, docker_networks())
    if in_the_way:
        print("molecule: Docker networks that are not the scenarios' hold their subnets: " + "; ".join(in_the_way)
              + ". Remove them first (the demo's: make demo-clean).", file=sys.stderr)
        return 2
    started = time.monotonic()
    results = run(scenarios, args.jobs, args.logs)
    failed = [name for name, (returncode, _, _) in results.items() if returncode != 0]
    # what a CI log shows first is its end: the logs' tails, then the recap, then the failed tasks last
    excerpts = {name: failure_excerpt(args.logs / f"{name}.log") for name in failed}
    for name, (_, tail) in excerpts.items():
        print(f"\n=== {name}: end of {args.logs / name}.log\n" + "\n".join(tail))
    print(f"\nmolecule: {len(results)} scenarios in {round(time.monotonic() - started)} s, {args.jobs} at a time")
    print("\n".join(stage_table(results)))
    for name, (picked, _) in excerpts.items():
        print(f"\n=== {name}: failed tasks\n" + "\n".join(picked or ["(none found)"]))
    # tests/tools/stages prints this after its stage times: the last lines of a CI log name the failed task
    summary = args.logs / "failed-tasks.txt"
    summary.unlink(missing_ok=True)
    if failed:
        summary.write_text("".join(failure_summary(name, args.logs / f"{name}.log") for name in failed), encoding="utf-8")
    return 1 if failed else 0


SUMMARY_LINES = 12  # lines of each failed scenario in failed-tasks.txt
HOST_FAILED = re.compile(r"^\s*(?:\S+\s+)?(fatal|failed): \[")


def failure_summary(name, log_path):
    """A few lines for the very end of a CI log: the last task that failed (the one that ended the play; a failure a
    rescue caught comes before it) and its first lines."""
    lines = [ANSI.sub("", line.rstrip("\n")).strip(" │")
             for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines()]
    last_task, found = None, None
    for number, line in enumerate(lines):
        if "TASK [" in line:
            last_task = line
        elif HOST_FAILED.search(line) and "...ignoring" not in "".join(lines[number + 1:number + 3]):
            found = (last_task, number)
    if found is None:
        return f"=== {name}: no failed task in {log_path}\n"
    task, number = found
    return (f"=== {name}: the failed task ({log_path})\n{task}\n"
            + "\n".join(line[:300] for line in lines[number:number + SUMMARY_LINES]) + "\n")


if __name__ == "__main__":
    sys.exit(main())
