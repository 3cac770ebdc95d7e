#!/usr/bin/env python3
"""One run of hpcnet-rdma-health on a 10-port RoCE host: the program's CPU time and the processes it spawns (not a
test; it prints, and checks the targets).

Usage: .venv/bin/python tests/bench/bench_health.py [--runs N] [--profile NAME]

Builds the simulated host (tests/simhost, default roce_8x400_2x200: 8 x 400GbE compute and 2 x 200GbE storage, every
port RoCE), writes its expected state with a lossless profile declared on all ten netdevs (as the roce role with
roce_storage_qos: compute hands it over), keeps a first snapshot, then times runs of the program's check in this
process (``cli.check``: read sysfs, the spec checks, the QoS comparison, the counters and their rules, the snapshot
written) with the simulator's tools on PATH, and counts the tools it starts per RoCE netdev, in the two modes:
``--sysfs-only`` (the metrics timer) and the full check (Slurm's HealthCheckProgram, a manual run).
Targets (issue 24): under 0.5 CPU-seconds per run of the program itself, and at most one process per RoCE netdev
(the timer's run). The simulated tools are Python programs (30-60 ms of interpreter start each), so their CPU time,
printed apart, is an upper bound of what the real ethtool and dcb cost; the process count is the number to watch.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "simhost"))

import unit.conftest  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
import simhost  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.hpcnet.rdma.plugins.module_utils.health import cli  # noqa: E402
from ansible_collections.hpcnet.rdma.plugins.module_utils.health.deploy import deploy  # noqa: E402
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import SubprocessRunner  # noqa: E402

LOSSLESS = {"backend": "auto", "trust": "dscp", "pfc": [3], "dscp2prio": {"26": 3, "48": 6}, "traffic_class": 106,
            "roce_tos": 106, "roce_mode": "v2", "global_pause": False}
CPU_TARGET = 0.5


class CountingRunner(SubprocessRunner):
    def __init__(self):
        super().__init__()
        self.calls = []

    def run(self, argv, changes=False, timeout=60):
        self.calls.append(os.path.basename(argv[0]))
        return super().run(argv, changes, timeout)


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(tmp, runs, sysfs_only):
    own, tools, calls = [], [], []
    args = cli.parse_args(["--expected", str(tmp / "health.json")] + (["--sysfs-only"] if sysfs_only else []))
    for _ in range(runs):
        runner = CountingRunner()
        start, child = time.process_time(), _children_cpu()
        cli.check(args, runner, time.time())
        own.append(time.process_time() - start)
        tools.append(_children_cpu() - child)
        calls.append(runner.calls)
    return own, tools, calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", default="roce_8x400_2x200")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        root = tmp / "sys"
        os.environ.update(SIMHOST_SYSFS_ROOT=str(root), SIMHOST_PERSIST_DIR=str(tmp / "persist"),
                          PATH="%s:%s" % (REPO / "tests/simhost/bin", os.environ["PATH"]))
        simhost.build_tree(simhost.load(opts.profile), root)
        facts_ports = simhost.booted_names(simhost.load(opts.profile))
        netdevs = [nd for dev in facts_ports for nd in dev["netdevs"]]
        deploy(dict(host="bench", group="roce", fabrics=["roce"], port_roles=[{"role": "compute", "devices": ["all"]}],
                    management_netdevs=["eth0"], sysfs_root=str(root), memlock="unlimited", gdr="false", ipoib=[],
                    sm=False, roce_qos=dict((nd, LOSSLESS) for nd in netdevs), lossless_priorities=[3],
                    nccl_conf_path=None, thresholds={}, slurm=False, metrics="false", textfile_dir=None, timer=False,
                    expected_path=str(tmp / "health.json"), prefix=str(tmp / "usr"), unit_dir=str(tmp / "units"),
                    state_dir=str(tmp / "state"), validate_only=False), SubprocessRunner(), False)
        cli.check(cli.parse_args(["--expected", str(tmp / "health.json"), "--sysfs-only"]), SubprocessRunner(), time.time())
        print("hpcnet-rdma-health on %s: %d RoCE netdevs, %d runs each" % (opts.profile, len(netdevs), opts.runs))
        worst = {}
        for sysfs_only in (True, False):
            own, tools, calls = measure(tmp, opts.runs, sysfs_only)
            per_netdev = max(len(c) for c in calls) / float(len(netdevs))
            kinds = sorted(set(name for c in calls for name in c))
            label = "--sysfs-only (timer)" if sysfs_only else "full (Slurm, manual)"
            print("  %-21s program CPU median %.3f s (max %.3f); processes %d = %.1f per RoCE netdev (%s); simulated "
                  "tools' CPU %.2f s" % (label, statistics.median(own), max(own), max(len(c) for c in calls),
                                         per_netdev, ", ".join(kinds), statistics.median(tools)))
            worst[sysfs_only] = (max(own), per_netdev)
        ok = worst[True][0] < CPU_TARGET and worst[True][1] <= 1 and worst[False][0] < CPU_TARGET
        print("  target: program CPU < %.1f s per run, <= 1 process per RoCE netdev for the timer's run: %s"
              % (CPU_TARGET, "met" if ok else "NOT met"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
