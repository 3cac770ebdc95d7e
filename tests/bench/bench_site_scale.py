#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller cost of site.yml as the cluster grows (a benchmark, not a test; see docs/scale.md).

Usage: .venv/bin/python tests/bench/bench_site_scale.py [--sizes 4,16,32] [--forks N] [--strategy linear|free]
                                                        [--fact-cache] [--pipelining on|off] [--keep] [--tasks]

For each size N it builds N simulated hosts in a temp dir and runs site.yml on them three times, with forks = N
(unless --forks): a first run (the RoCE hosts' fresh cards get the ECN/CNP settings an inbox stack keeps in firmware,
and site.yml stops those hosts until a reboot: expected here), then every host "boots" again (its tree is rebuilt and
the pending firmware values become current, as the rolling reboot would make them; the rolling reboot itself is never
run, it would reboot this machine), a second run that converges every host, and a no-op re-run. Each host is an inventory host with
``ansible_connection: local``, its own simulated sysfs tree (tests/simhost, ``host_index`` = its number within its
profile), its own ``rdma_sysfs_root``, ``nccl_conf_path`` and health check files, ``ansible_become: false``; half the hosts are
InfiniBand (cx7_ib_ndr_8x, group ``infiniband``), half RoCE v2 (cx7_roce_400g_2x and cx7_roce_400g_2x_ipv6,
group ``roce``). What would change the controller's packages or network is skipped, with the tags that
tests/unit/playbooks/test_site_awx_runner.py skips (SKIP_TAGS below); the rest of the play runs for real.
``nccl_socket_ifname`` is this machine's default-route interface (``ip -j route show default``) or, when there is
none, left unset (the nccl preflight refuses an interface the host does not have).

Printed per size and run: task results per host (skipped included) and of them the skipped ones, module calls per
host (task results that were not skipped, counted
by a small aggregate callback written to the temp dir; "on-host" leaves out the actions that run only on the
controller: set_fact, assert, debug, include_vars, validate_argument_spec, ...), wall time and wall time per host,
and CPU seconds per host: all children of this script (resource.getrusage(RUSAGE_CHILDREN) around the run),
which with a local connection includes the modules' own processes, and of that the ansible-playbook main process
alone ("main"); and the peak resident memory of the controller (the largest child, ansible-playbook itself).
Exit status 1 when a run fails a host or when the re-run reports changed != 0 (a FAIL line says which task).
The 4-vs-32 comparison of the re-run's wall time per host is printed, not enforced: the numbers are noisy.
Results and what the settings change: docs/scale.md.

The template task writes nccl.conf with owner/group root, so run it as root.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "simhost"))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import localhost  # noqa: E402  pylint: disable=wrong-import-position

TARGET = "does not grow from 4 to 32 hosts with forks set to the host count"
GROWTH_TOLERANCE = 0.10    # noise allowance for the verdict on a loaded 2-core machine
# As tests/unit/playbooks/test_site_awx_runner.py: what would change the controller's packages or network (package
# installs, the roce role's QoS tools and addresses) is skipped; the preflights and the nccl role run for real.
SKIP_TAGS = "ofed_fetch,ofed_kernel,ofed_remove,ofed_install,ofed_verify,ofed_activate,roce_probe,roce_address,roce_configure,roce_persist"
PROFILES = [("infiniband", "ib", "cx7_ib_ndr_8x"), ("roce", "roce", "cx7_roce_400g_2x"),
            ("infiniband", "ib", "cx7_ib_ndr_8x"), ("roce", "roce", "cx7_roce_400g_2x_ipv6")]

# Aggregate callback: counts results per host and writes them, with the main process's CPU, as JSON.
CALLBACK = r'''
from __future__ import annotations

import json
import os
import resource

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: bench_counts
    type: aggregate
    short_description: per-host result counts for tests/bench/bench_site_scale.py
    description: Writes per-host counts of task results and the main process CPU time to $BENCH_COUNTS_OUT.
"""

CONTROLLER_ONLY = {"set_fact", "assert", "debug", "include_vars", "include_tasks", "import_tasks", "include_role",
                   "import_role", "validate_argument_spec", "meta", "fail", "add_host", "group_by", "set_stats", "pause"}


def _attr(result, name):
    return getattr(result, name) if hasattr(type(result), name) else getattr(result, "_" + name)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_counts"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.hosts = {}
        self.changed = []
        self.failed = []
        self.tasks = {}

    def _record(self, result, kind):
        host, task = _attr(result, "host").get_name(), _attr(result, "task")
        res = _attr(result, "result")
        h = self.hosts.setdefault(host, {"results": 0, "skipped": 0, "calls": 0, "on_host": 0, "changed": 0,
                                         "failed": 0})
        h["results"] += 1
        t = self.tasks.setdefault(task.get_name(), {"action": task.action, "results": 0, "skipped": 0})
        t["results"] += 1
        t["skipped"] += kind == "skipped"
        if kind == "skipped":
            h["skipped"] += 1
            return
        h["calls"] += 1
        if task.action.rsplit(".", 1)[-1] not in CONTROLLER_ONLY:
            h["on_host"] += 1
        if kind in ("failed", "unreachable"):
            h["failed"] += 1
            self.failed.append("%s: %s: %s" % (host, task.get_name(), str(res.get("msg", ""))[:300]))
        elif res.get("changed"):
            h["changed"] += 1
            self.changed.append("%s: %s" % (host, task.get_name()))

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "ok" if ignore_errors else "failed")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        me = resource.getrusage(resource.RUSAGE_SELF)
        out = {"hosts": self.hosts, "changed": self.changed, "failed": self.failed, "tasks": self.tasks,
               "main_cpu": me.ru_utime + me.ru_stime}
        with open(os.environ["BENCH_COUNTS_OUT"], "w", encoding="utf-8") as f:
            json.dump(out, f)
'''


def default_route_ifname() -> str | None:
    try:
        out = subprocess.run(["ip", "-j", "route", "show", "default"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             check=True, text=True).stdout
        routes = json.loads(out or "[]")
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None
    return next((r["dev"] for r in routes if r.get("dev")), None)


def host_python() -> str:
    # What a real host runs modules with; set explicitly so that no host pays for interpreter discovery.
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def build_hosts(base: Path, count: int, ifname: str | None) -> tuple[Path, list]:
    """Simulated hosts and an inventory (JSON, read by the yaml inventory plugin) for `count` of them: the
    inventory's path and each host's (profile, directory, host index), to boot them again."""
    boots = []
    groups: dict[str, dict] = {"infiniband": {"hosts": {}}, "roce": {"hosts": {}}}
    per_profile: dict[str, int] = {}
    loaded = {name: simhost.load(name) for _g, _p, name in PROFILES}
    for i in range(count):
        group, prefix, prof = PROFILES[i % len(PROFILES)]
        index = per_profile.get(prof, 0)
        per_profile[prof] = index + 1
        name = "sim-%s-%03d" % (prefix, i + 1)
        hdir = base / "hosts" / name
        # its own module interpreter: its tree, its cards' NV state, the simulator's mstconfig (simhost/localhost.py)
        python = localhost.create(loaded[prof], hdir, index, host_python())
        boots.append((loaded[prof], hdir, index))
        groups[group]["hosts"][name] = {"rdma_sysfs_root": str(hdir / "sys"), "nccl_conf_path": str(hdir / "nccl.conf"),
                                        "ansible_python_interpreter": str(python),
                                        # the health check's files in the host's directory, no timer
                                        "health_expected_path": str(hdir / "health.json"), "health_metrics": "false",
                                        "health_nccl_conf_path": str(hdir / "nccl.conf"),
                                        "health_install_prefix": str(hdir / "usr")}
    all_vars = {"ansible_connection": "local", "ansible_become": False}
    if ifname:
        all_vars["nccl_socket_ifname"] = ifname
    inv = base / "inventory.json"
    inv.write_text(json.dumps({"all": {"vars": all_vars, "children": groups}}, indent=1))
    return inv, boots


def run_site(base: Path, inv: Path, label: str, forks: int, env_extra: dict, plugins: Path) -> dict:
    counts = base / ("counts-%s.json" % label)
    log = base / ("%s.log" % label)
    env = dict(os.environ)
    env.setdefault("ANSIBLE_CONFIG", str(REPO / "ansible.cfg"))
    env.setdefault("ANSIBLE_HOME", str(REPO / ".ansible"))
    env.update({"ANSIBLE_CALLBACK_PLUGINS": str(plugins), "ANSIBLE_CALLBACKS_ENABLED": "bench_counts",
                "BENCH_COUNTS_OUT": str(counts), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"})
    env.update(env_extra)
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "site.yml", "-i", str(inv), "--forks", str(forks),
           "--skip-tags", SKIP_TAGS]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    data = json.loads(counts.read_text()) if counts.exists() else {"hosts": {}, "changed": [], "failed": [], "main_cpu": 0.0}
    data.update(rc=proc.returncode, wall=wall, log=str(log),
                cpu=(r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
                # the largest resident set of any child so far: ansible-playbook's main process
                rss_mb=r1.ru_maxrss / 1024)
    return data


def row(size: int, label: str, d: dict) -> str:
    hosts = d["hosts"].values() or [{"results": 0, "skipped": 0, "calls": 0, "on_host": 0, "changed": 0}]
    n = max(len(d["hosts"]), 1)

    def per(key):
        vals = [h[key] for h in hosts]
        avg = sum(vals) / n
        return ("%.1f" % avg) if min(vals) == max(vals) else ("%.1f (%d-%d)" % (avg, min(vals), max(vals)))
    changed = sum(h["changed"] for h in hosts)
    return ("  %5d  %-6s %14s %14s %14s %12s %8d %8.1f %10.2f %9.2f %9.2f %8.0f" % (
        size, label, per("results"), per("skipped"), per("calls"), per("on_host"), changed, d["wall"], d["wall"] / size,
        d["cpu"] / size, d["main_cpu"] / size, d["rss_mb"]))


def print_tasks(d: dict, size: int) -> None:
    """The run's tasks, most results per host first: results (of them skipped) per host, the action, the name."""
    print("    %8s %8s  %-34s %s" % ("res/host", "skp/host", "action", "task"))
    for name, t in sorted(d.get("tasks", {}).items(), key=lambda kv: (-kv[1]["results"], kv[0])):
        print("    %8.2f %8.2f  %-34s %s" % (t["results"] / size, t["skipped"] / size, t["action"][-34:], name))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,16,32", help="comma-separated host counts (default 4,16,32)")
    parser.add_argument("--forks", type=int, default=0, help="forks (default: the host count of each size)")
    parser.add_argument("--strategy", choices=["linear", "free"], default=None,
                        help="ANSIBLE_STRATEGY (default: Ansible's, linear)")
    parser.add_argument("--fact-cache", action="store_true", help="gathering = smart with a jsonfile fact cache")
    parser.add_argument("--pipelining", choices=["on", "off"], default=None,
                        help="ANSIBLE_PIPELINING (default: ansible.cfg's; its [ssh_connection] setting does not "
                             "reach the local connection, so off)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (trees, inventory, logs)")
    parser.add_argument("--tasks", action="store_true",
                        help="after each size, list the no-op run's tasks by results per host (where the count goes)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    ifname = default_route_ifname()
    tmp = Path(tempfile.mkdtemp(prefix="site-scale-bench-"))
    (tmp / "callback_plugins").mkdir()
    (tmp / "callback_plugins" / "bench_counts.py").write_text(CALLBACK)
    env_extra = {}
    if args.strategy:
        env_extra["ANSIBLE_STRATEGY"] = args.strategy
    if args.pipelining:
        env_extra["ANSIBLE_PIPELINING"] = "True" if args.pipelining == "on" else "False"
    try:
        import ansible.release  # pylint: disable=import-outside-toplevel
        version = ansible.release.__version__
    except ImportError:
        version = "?"
    print("site.yml scale benchmark: ansible-core %s, Python %s, %d CPUs, load average %s" % (
        version, platform.python_version(), os.cpu_count() or 0, " ".join("%.2f" % x for x in os.getloadavg())))
    print("  hosts: ansible_connection=local, simulated sysfs per host, half IB NDR 8x / half RoCE v2 2x; "
          "--skip-tags %s; nccl_socket_ifname=%s" % (SKIP_TAGS, ifname or "(unset)"))
    print("  settings: forks=%s strategy=%s pipelining=%s fact cache=%s" % (
        args.forks or "hosts", args.strategy or "linear", args.pipelining or "off (default)",
        "smart + jsonfile" if args.fact_cache else "off"))
    print("  %5s  %-6s %14s %14s %14s %12s %8s %8s %10s %9s %9s %8s" % (
        "hosts", "run", "results/host", "skipped/host", "calls/host", "on-host/host", "changed", "wall s", "wall/host",
        "CPU/host", "main/host", "RSS MB"))
    failures, noop_wall = [], {}
    try:
        for size in sizes:
            base = tmp / ("n%d" % size)
            base.mkdir()
            inv, boots = build_hosts(base, size, ifname)
            extra = dict(env_extra)
            if args.fact_cache:
                extra.update({"ANSIBLE_GATHERING": "smart", "ANSIBLE_CACHE_PLUGIN": "jsonfile",
                              "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(base / "facts"),
                              "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "3600"})
            for label in ("first", "second", "no-op"):
                if label == "second":
                    # what the rolling reboot would do for the hosts that stopped for consent (never run here: it
                    # would reboot this machine): every simulated host boots again
                    for prof, hdir, index in boots:
                        localhost.boot(prof, hdir, index)
                d = run_site(base, inv, "%s-%d" % (label, size), args.forks or size, extra, tmp / "callback_plugins")
                print(row(size, label, d), flush=True)
                if label == "first":
                    # fresh RoCE cards: the ECN/CNP settings an inbox stack keeps only in firmware wait for a reboot,
                    # and site.yml stops those hosts without consent (no rolling reboot here)
                    d["failed"] = [f for f in d["failed"] if "take effect at the next boot" not in f]
                    if d["rc"] == 2 and not d["failed"]:
                        d["rc"] = 0
                if d["rc"] != 0 or d["failed"] or len(d["hosts"]) != size:
                    failures.append("FAIL: %d hosts, %s run: exit status %d, %d of %d hosts reported, failed: %s (log %s)" % (
                        size, label, d["rc"], len(d["hosts"]), size, "; ".join(d["failed"][:5]) or "-", d["log"]))
                if label == "no-op":
                    noop_wall[size] = d["wall"] / size
                    if args.tasks:
                        print_tasks(d, size)
                    if d["changed"]:
                        failures.append("FAIL: %d hosts, no-op re-run reported changed=%d: %s" % (
                            size, len(d["changed"]), "; ".join(d["changed"][:5])))
        if len(noop_wall) >= 2:
            lo, hi = min(noop_wall), max(noop_wall)
            ratio = noop_wall[hi] / noop_wall[lo]
            verdict = "MET" if ratio <= 1.0 + GROWTH_TOLERANCE else "MISSED"
            print("  no-op re-run wall time per host: %d hosts %.2f s, %d hosts %.2f s (x%.2f); target \"%s\": %s"
                  " (tolerance %d%% for noise)" % (lo, noop_wall[lo], hi, noop_wall[hi], ratio, TARGET, verdict,
                                                   GROWTH_TOLERANCE * 100))
        for line in failures:
            print(line)
        return 1 if failures else 0
    finally:
        if args.keep or failures:
            print("  kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
