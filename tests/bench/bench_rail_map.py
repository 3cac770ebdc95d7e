#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time the fabric-wide rail map on the controller (not a test; it prints, and checks the target).

Usage: .venv/bin/python tests/bench/bench_rail_map.py [--hosts N] [--rails R] [--runs N]

Builds a synthetic rail-optimised RoCE fabric (default 1,000 hosts x 8 rails): scalable units of 32 hosts, rail r of
unit u on leaf ``su<u>-r<r>``, the i-th host of a unit on its leaves' port ``swp<i>``; with faults sprinkled in so that every finding path
runs: a crossed pair on every 50th host, a port with no peer on every 97th, a port on another rail's leaf on every
211th. Times ``rail_map.build`` inferred and declared (``rdma_rail_switches``: one glob per rail), then the switch
intent of every reached switch port with its NVUE and SONiC renderings, and checks the findings' count.
Target (issue 35): the rail map of 1,000 hosts x 8 rails in under 5 s (exit status 1 when missed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import unit.conftest  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import rail_map, switch_intent  # noqa: E402

TARGET_S = 5.0
UNIT = 32
PROFILE = {"dscp": 26, "priority": 3, "lossless": [3], "ecn": [3], "cnp_dscp": 48, "cnp_priority": 6, "mtu": 9000}


def synthetic(hosts, rails):
    """``{host: [{rail, device, port, peer}]}`` and the number of faulty ports (the findings it should give)."""
    fabric, faults = {}, 0
    for n in range(1, hosts + 1):
        su = (n - 1) // UNIT + 1
        ports = [{"rail": r, "device": "mlx5_%d" % r, "port": 1,
                  "peer": {"system_name": "su%d-r%d" % (su, r), "port_id": "swp%d" % ((n - 1) % UNIT + 1),
                           "chassis_id": "0c:42:a1:%02x:%02x:%02x" % (su // 256, su % 256, r)}}
                 for r in range(rails)]
        if n % 50 == 0 and rails > 3:
            ports[2]["peer"], ports[3]["peer"] = ports[3]["peer"], ports[2]["peer"]
            faults += 1                      # one finding per crossed pair
        if n % 97 == 0:
            ports[0]["peer"] = None
            faults += 1
        if n % 211 == 0 and rails > 5:
            ports[5]["peer"] = dict(ports[4]["peer"], port_id="swp%d" % (100 + n))
            faults += 1
        fabric["node%04d" % n] = ports
    return fabric, faults


def timed(function, runs):
    best, result = None, None
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--rails", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    fabric, faults = synthetic(args.hosts, args.rails)
    ports = args.hosts * args.rails
    inferred_s, inferred = timed(lambda: rail_map.build(fabric), args.runs)
    globs = ["su*-r%d" % r for r in range(args.rails)]
    declared_s, declared = timed(lambda: rail_map.build(fabric, globs), args.runs)

    def intent():
        spec = switch_intent.intent(inferred["rail_map"], PROFILE)
        for switch, one in spec.items():
            switch_intent.render_nvue(switch, one)
            switch_intent.render_sonic(switch, one)
        return spec
    intent_s, spec = timed(intent, args.runs)
    print("rail map of %d hosts x %d rails (%d ports, %d faults): inferred %.3f s, declared %.3f s (best of %d); "
          "%d and %d findings; switch intent and renderings of %d switches %.3f s"
          % (args.hosts, args.rails, ports, faults, inferred_s, declared_s, args.runs, len(inferred["findings"]),
             len(declared["findings"]), len(spec), intent_s))
    ok = max(inferred_s, declared_s) < TARGET_S and len(inferred["findings"]) == len(declared["findings"]) == faults
    print("target: the rail map of 1,000 hosts x 8 rails in under %.0f s, every fault found: %s"
          % (TARGET_S, "met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
