#!/usr/bin/env python3
"""Time a no-op hpcnet.rdma.roce_qos run on a 2-port RoCE host (not a test; it prints, and checks the target).

Usage: .venv/bin/python tests/bench/bench_roce_qos.py [--runs N] [--profile NAME]

Builds the simulated host (tests/simhost, default cx7_roce_400g_2x_ofed, MLNX_OFED tools and ecn/ tree; pass
cx7_roce_400g_2x --backend dcb for the inbox stack), applies NVIDIA's lossless profile once, then times the module's logic
(read the whole state, plan, no apply) per netdev with the simulator's tools on PATH, and counts tool invocations.
Target (issue 9): one module call per netdev, under 100 ms of module time per netdev on a no-op. The simulated tools
are Python programs (about 30-60 ms of interpreter start each), so the figure here is an upper bound of what the
real C / Python tools cost; the tool count is the number to watch.
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
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import SubprocessRunner  # noqa: E402
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_qos import Port  # noqa: E402

LOSSLESS = {"trust": "dscp", "pfc": [3], "dscp2prio": {26: 3, 48: 6}, "ecn": [3], "cnp_dscp": 48, "cnp_priority": 6,
            "dcqcn": None, "traffic_class": 106, "roce_tos": 106, "roce_mode": "v2", "global_pause": False}


def _cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CountingRunner(SubprocessRunner):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def run(self, argv, changes=False, timeout=None):
        self.calls += 1
        return super().run(argv, changes=changes) if timeout is None else super().run(argv, changes, timeout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", default="cx7_roce_400g_2x_ofed")
    parser.add_argument("--backend", default="auto", choices=["auto", "mlnx_qos", "dcb"])
    args = parser.parse_args()
    import simhost  # pylint: disable=import-outside-toplevel
    from simhost import kernelfs  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sys"
        simhost.build_tree(simhost.load(args.profile), root, host_index=1)
        os.environ["SIMHOST_SYSFS_ROOT"] = str(root)
        os.environ["PATH"] = "%s:%s" % (REPO / "tests" / "simhost" / "bin", os.environ.get("PATH", ""))
        netdevs = ["enp12s0np0", "enp140s0np0"]
        for netdev in netdevs:
            port = Port(CountingRunner(), str(root), netdev, args.backend)
            _after, steps, _fw = port.plan(port.read(), LOSSLESS)
            port.apply(steps)
        if hasattr(kernelfs, "settle"):
            kernelfs.settle(root)
        times, cpus, calls, changes = [], [], [], 0
        for _ in range(args.runs):
            for netdev in netdevs:
                runner = CountingRunner()
                start, cpu0 = time.perf_counter(), _cpu()
                port = Port(runner, str(root), netdev, args.backend)
                _after, steps, _fw = port.plan(port.read(create_cm=False), LOSSLESS)
                times.append(time.perf_counter() - start)
                cpus.append(_cpu() - cpu0)
                calls.append(runner.calls)
                changes += len(steps)
        median_ms = statistics.median(times) * 1000
        print("roce_qos no-op on %s (%s backend), %d netdevs x %d runs: median %.1f ms per netdev (min %.1f, max %.1f), "
              "CPU %.1f ms (module and tools), %d tool invocations per netdev, %d planned changes"
              % (args.profile, port.backend, len(netdevs), args.runs, median_ms, min(times) * 1000, max(times) * 1000,
                 statistics.median(cpus) * 1000, max(calls), changes))
        print("target: one module call per netdev, < 100 ms module time per netdev on a no-op: %s"
              % ("met" if median_ms < 100 and changes == 0 else "NOT met (median %.1f ms, %d changes)" % (median_ms, changes)))


if __name__ == "__main__":
    main()
