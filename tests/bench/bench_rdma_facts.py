#!/usr/bin/env python3
"""Time one rdma_facts sysfs read of an 8-HCA host (not a test; no target enforced, it only prints).

Usage: .venv/bin/python tests/bench/bench_rdma_facts.py [--runs N] [--profile NAME]

Builds the simulated tree of ``--profile`` (default cx7_ib_ndr_8x) with tests/simhost in a temp dir (falls back to
the unit-test fixture builder when the kit is missing), then times gather_rdma_sysfs() with and without counters.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "simhost"))
sys.path.insert(0, str(REPO / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "sysfs"))

# unit.conftest makes ansible_collections.hpcnet.rdma importable (temp dir with a symlink to the repository)
import unit.conftest  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
from ansible_collections.hpcnet.rdma.plugins.module_utils.stack.rdma_stack import probe_stack  # noqa: E402
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import SubprocessRunner  # noqa: E402
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs  # noqa: E402


def build(root: Path, profile: str) -> str:
    try:
        import simhost  # pylint: disable=import-outside-toplevel
    except ImportError:
        from rdma_sysfs_tree import add_hca, ib_port  # pylint: disable=import-outside-toplevel
        for index in range(8):
            add_hca(root, "mlx5_%d" % index, pci="0000:%02x:00.0" % (0x18 + index * 0x10), ports={1: ib_port(lid="0x%x" % (26 + index))},
                    netdevs={"ibp%ds0" % (0x18 + index * 0x10): {"mtu": 4092}})
        return "fixture builder (8 x IB)"
    simhost.build_tree(simhost.load(profile), root)
    return "simhost profile " + profile


def timed(runs: int, func) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def report(label: str, samples: list[float]) -> None:
    print("%-34s runs=%-3d min=%7.2f ms  median=%7.2f ms  max=%7.2f ms" % (label, len(samples), min(samples), statistics.median(samples), max(samples)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--profile", default="cx7_ib_ndr_8x")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sys"
        what = build(root, args.profile)
        files = sum(1 for p in root.rglob("*") if p.is_file())
        facts = gather_rdma_sysfs(str(root))
        ports = sum(len(d["ports"]) for d in facts["devices"].values())
        print("tree: %s, %d files, %d devices, %d ports" % (what, files, len(facts["devices"]), ports))
        report("sysfs facts", timed(args.runs, lambda: gather_rdma_sysfs(str(root))))
        report("sysfs facts + counters", timed(args.runs, lambda: gather_rdma_sysfs(str(root), gather_counters=True)))
        report("sysfs facts + all netdevs", timed(args.runs, lambda: gather_rdma_sysfs(str(root), gather_all_netdevs=True)))
    report("stack probe (this machine)", timed(3, lambda: probe_stack(SubprocessRunner())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
