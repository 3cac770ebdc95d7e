#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cost of verify.yml's perftest matrix as the cluster grows (a benchmark, not a test).

Usage: .venv/bin/python tests/bench/bench_verify_rounds.py [--sizes 4,8] [--patterns ring,all_pairs] [--keep]

For each size N and pattern it builds N simulated RoCE hosts in a temp dir (tests/simhost trees of
cx7_roce_400g_2x, 2 rails) and runs ``verify.yml --tags verify_perftest`` on them with forks = N. Each host is an
inventory host with ``ansible_connection: local``; its Python is a small wrapper that sets ``SIMHOST_SYSFS_ROOT`` to
its own tree and puts the simulator's tools first on PATH, so that the perftest module runs the stand-in
``ib_write_bw``/``ib_write_lat`` of that host, really over TCP on 127.0.0.1 (each host has its own
``verify_perftest_port``). The stand-ins take no modelled time, so what is measured is the orchestration: rounds x
rails x (bandwidth + latency) steps, each a server started async, a client, the server's end and its cleanup.

Printed per size and pattern: rounds, steps, tests run, wall time, seconds per step; then a linear fit of the step
time over N (a + b N, forks = N) and the estimate for 1,000 hosts with ring (2 rounds) and all_pairs (999 rounds), with
2 and 8 rails. Exit status 1 when a run fails or the report's number of tests is not rounds x pairs x rails x 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "simhost"))
sys.path.insert(0, str(REPO / "collections"))

from simhost import profile, tree  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import perftest_rounds  # noqa: E402  pylint: disable=wrong-import-position

RAILS = 2
TESTS_PER_PAIR = 2  # ib_write_bw, then ib_write_lat


def _wrapper(path: Path, sysfs: Path, disk: Path) -> None:
    path.write_text("#!/bin/sh\nexport SIMHOST_SYSFS_ROOT=%s SIMHOST_PERSIST_DIR=%s PATH=%s:$PATH\nexec %s \"$@\"\n"
                    % (sysfs, disk, REPO / "tests" / "simhost" / "bin", sys.executable), encoding="utf-8")
    path.chmod(0o755)


def run(size: int, pattern: str, work: Path) -> dict:
    hosts = {}
    for i in range(1, size + 1):
        name = "bench-roce%02d" % i
        sysfs, disk = work / name / "sys", work / name / "disk"
        disk.mkdir(parents=True)
        os.environ["SIMHOST_PERSIST_DIR"] = str(disk)
        tree.build_tree(profile.load("cx7_roce_400g_2x"), sysfs, host_index=i)
        _wrapper(work / name / "python", sysfs, disk)
        hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": str(work / name / "python"),
                       "ansible_become": False, "rdma_sysfs_root": str(sysfs), "verify_oob_address": "127.0.0.1",
                       "verify_perftest_port": 20000 + 10 * i}
    inventory = {"all": {"children": {"roce": {"hosts": hosts}}}}
    (work / "hosts.yml").write_text(json.dumps(inventory), encoding="utf-8")
    report_dir = work / ("report-%d-%s" % (size, pattern))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_HOME=str(REPO / ".ansible"),
               ANSIBLE_FORKS=str(size), ANSIBLE_NOCOLOR="1")
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(REPO / "verify.yml"), "-i", str(work / "hosts.yml"),
            "--tags", "verify_perftest", "-e", json.dumps({"verify_perftest_pattern": pattern,
                                                          "verify_report_dir": str(report_dir),
                                                          "verify_fail_on_findings": False})]
    start = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    rounds = perftest_rounds.schedule(sorted(hosts), pattern)
    expected = sum(len(r) for r in rounds) * RAILS
    report = {}
    if (report_dir / "fabric-report.json").exists():
        report = json.loads((report_dir / "fabric-report.json").read_text(encoding="utf-8"))
    got = len(report.get("perftest") or [])
    ok = done.returncode == 0 and got == expected
    if not ok:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-2000:])
    steps = len(rounds) * RAILS * TESTS_PER_PAIR
    return {"size": size, "pattern": pattern, "rounds": len(rounds), "steps": steps, "bw_tests": got,
            "expected_bw_tests": expected, "wall_s": wall, "s_per_step": wall / steps, "ok": ok}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,8")
    parser.add_argument("--patterns", default="ring,all_pairs")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        for pattern in args.patterns.split(","):
            work = Path(tempfile.mkdtemp(prefix="hpcnet-verify-bench-"))
            try:
                res = run(size, pattern, work)
            finally:
                if not args.keep:
                    shutil.rmtree(work, ignore_errors=True)
            results.append(res)
            print("%-9s %3d hosts: %3d rounds, %4d steps, %4d/%4d bandwidth tests, %7.1f s, %5.2f s/step %s"
                  % (pattern, size, res["rounds"], res["steps"], res["bw_tests"], res["expected_bw_tests"],
                     res["wall_s"], res["s_per_step"], "" if res["ok"] else "FAIL"))
    ring = sorted((r["size"], r["s_per_step"]) for r in results if r["ok"] and r["pattern"] == "ring")
    if len({s for s, _ in ring}) >= 2:
        (n1, t1), (n2, t2) = ring[0], ring[-1]
        b = (t2 - t1) / (n2 - n1) if n2 != n1 else 0.0
        a = t1 - b * n1
        per_step = a + b * 1000
        print("step time fit: %.2f s + %.4f s x hosts (forks = hosts); at 1,000 hosts about %.1f s per step" % (a, b, per_step))
        for rails in (2, 8):
            print("1,000 hosts, %d rails: ring %d steps ~ %.0f min; all_pairs %d steps ~ %.1f h (plus the tests' own time)"
                  % (rails, 2 * rails * TESTS_PER_PAIR, 2 * rails * TESTS_PER_PAIR * per_step / 60,
                     999 * rails * TESTS_PER_PAIR, 999 * rails * TESTS_PER_PAIR * per_step / 3600))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
