#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the NCCL_DEBUG=INFO analyser (not a pytest test).

Generates a many-rank log in a temp dir, then measures both paths of ``analyze_file``:
  * accelerated (default): GNU grep selects the lines, Python analyses them;
  * pure Python (``use_grep=False``, the reference and fallback);
each as throughput in MB/s, as a ratio to ``grep -c 'NCCL INFO'`` on the same file (wall clock, best of
NCCL_BENCH_REPEAT runs), as a multiple of the floor (the wall time of one ``grep -E -c`` over the analyser's own
selection pattern, ``_GREP_ERE``: selecting the lines costs that much before Python reads any), and peak RSS of the
analyser's process tree (the child process plus the grep/wc/head it starts: sum of VmRSS sampled every 20 ms; also
ru_maxrss of the analyser and of its largest helper).  The CPU time (user+sys of the whole analyser tree, and its
ratio to grep -c's) is printed too: on a loaded or single-core host the wall-clock ratio of a multi-process pipeline
suffers more than grep's.  Both paths must give the same result (sha256 of the analysis).
Targets on the accelerated path (exit status 1 when one is missed): no loss against the figures of the analyser
before it became a package (ratio >= 15 % of grep -c, peak RSS < 50 MB), and wall time within 2x of the floor.

Usage: bench_nccl_log.py [SIZE_MB]        (or NCCL_BENCH_MB=...; default 2048, about 2-3 minutes on 2 cores;
                                           e.g. ``bench_nccl_log.py 200`` for a quick run of well under a minute)
       NCCL_BENCH_RANKS (default 1024), NCCL_BENCH_REPEAT (default 2), NCCL_BENCH_PYTHON=0 skips the pure-Python
       path (the slow one), NCCL_BENCH_KEEP=1 keeps the file.

Log mix (per communicator init, per rank): bootstrap/plugin/NET/IB/Using network/env lines, ~24 channel
connection lines (P2P/IPC inside a node, NET/IB/n/GDRDMA between nodes), Trees, channel summary, Init COMPLETE;
then NCCL COLL-subsystem op lines ("AllReduce: opCount ...") and proxy chatter, which make up most of a multi-GB log.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET_RATIO = 0.15         # about 15 % of grep -c on 2 cores before the split into a package: no loss
TARGET_RSS_MB = 50.0
TARGET_FLOOR = 2.0          # analysis wall time within 2x of one grep -E over the selection pattern


def generate(path, size_bytes, nranks):
    gpus = 8
    out = open(path, "w", buffering=1 << 20)
    written = 0
    comm = 0
    while written < size_bytes:
        comm += 1
        block = []
        for rank in range(nranks):
            h, local = divmod(rank, gpus)
            pre = "gpu%04d:%d:%d [%d] NCCL INFO " % (h, 40000 + local, 40100 + local, local)
            if comm == 1:
                block += [
                    pre + "Bootstrap : Using ib0:10.%d.%d.1<0>" % (h // 250, h % 250),
                    pre + "NET/Plugin: Could not find: libnccl-net.so",
                    pre + "NCCL_IB_HCA set by environment to mlx5",
                    pre + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB ib0:10.%d.%d.1<0>"
                    % (h // 250, h % 250),
                    pre + "Initialized NET plugin IB",
                ]
                if rank == 0:
                    block.append(pre + "NCCL version 2.28.7+cuda12.9")
            block += [
                pre + "Assigned NET plugin IB to comm",
                pre + "Using network IB",
                pre + "ncclCommInitRankConfig comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId 0x%x - Init START"
                % (0x5500000 + comm, rank, nranks, local, local, 0x18 + local, comm),
                pre + "Setting affinity for GPU %d to ffff0000,00000000" % local,
                pre + "Trees [0] %d/-1/-1->%d->%d [1] -1/-1/-1->%d->%d"
                % ((rank + 1) % nranks, rank, (rank - 1) % nranks, rank, (rank + 1) % nranks),
            ]
            nxt = (rank + 1) % nranks
            for ch in range(16):
                if local == gpus - 1:
                    block.append(pre + "Channel %02d/0 : %d[%d] -> %d[%d] [send] via NET/IB/%d/GDRDMA" % (ch, rank, local, nxt, 0, ch % 4))
                    block.append(pre + "Channel %02d/0 : %d[%d] -> %d[%d] [receive] via NET/IB/%d/GDRDMA"
                                 % (ch, (rank - 1) % nranks, 7, rank, local, ch % 4))
                else:
                    block.append(pre + "Channel %02d/0 : %d[%d] -> %d[%d] via P2P/IPC/read" % (ch, rank, local, nxt, local + 1))
            block += [
                pre + "Connected all rings, use ring PXN 0 GDR 1",
                pre + "threadThresholds 8/8/64 | 8192/8/64 | 512 | 512",
                pre + "16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels, 2 p2p channels per peer",
                pre + "ncclCommInitRankConfig comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId 0x%x - Init COMPLETE"
                % (0x5500000 + comm, rank, nranks, local, local, 0x18 + local, comm),
            ]
            for op in range(160):
                block.append(pre + "AllReduce: opCount %x sendbuff 0x7f%010x recvbuff 0x7f%010x count 1048576 datatype 7 op 0 root 0 "
                             "comm 0x%x [nranks=%d] stream 0x%x" % (op, op * 4096, op * 8192, 0x5500000 + comm, nranks, 0x9900 + local))
                if op % 16 == 0:
                    block.append(pre + "Proxy: opCount %x channel %d nsteps 8 nbytes 1048576 peer %d" % (op, op % 16, nxt))
            text = "\n".join(block) + "\n"
            out.write(text)
            written += len(text)
            block = []
            if written >= size_bytes:
                break
    out.close()
    return os.path.getsize(path)


CHILD = r"""
import sys, time, json, hashlib, resource
sys.path.insert(0, sys.argv[2])
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import analyze_file
t = time.perf_counter()
r = analyze_file(sys.argv[1], use_grep=sys.argv[3] == "grep")
dt = time.perf_counter() - t
me = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": dt, "cpu": me.ru_utime + me.ru_stime, "helpers_cpu": kids.ru_utime + kids.ru_stime,
                  "rss_mb": me.ru_maxrss / 1024.0, "helper_rss_mb": kids.ru_maxrss / 1024.0,
                  "digest": hashlib.sha256(json.dumps(r, sort_keys=True, default=str).encode()).hexdigest()[:16],
                  "net_transport": r["net_transport"], "gdr": r["gdr"], "ranks": r["ranks"],
                  "processes": r["processes"], "lines": r["lines"]}))
"""


def tree_rss_kb(root):
    """Sum of VmRSS (kB) of ``root`` and all its descendants (Linux /proc; 0 when unavailable)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    total = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        todo.extend(parents.get(pid, ()))
        try:
            with open("/proc/%d/status" % pid) as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except (OSError, ValueError):
            pass
    return total


def run_analyser(log, coll, mode):
    """Run analyze_file in a child process; returns its report plus the sampled peak RSS of its process tree."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, log, coll, mode], stdout=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss_kb(proc.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = proc.communicate()[0]
    done.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit("analyser child failed (exit status %d)" % proc.returncode)
    res = json.loads(out)
    res["tree_rss_mb"] = peak[0] / 1024.0
    return res


def best(runs):
    """The fastest run, with the largest RSS figures of all runs."""
    fast = dict(min(runs, key=lambda r: r["seconds"]))
    for key in ("rss_mb", "helper_rss_mb", "tree_rss_mb"):
        fast[key] = max(r[key] for r in runs)
    return fast


def time_grep(log, args=("-c", "NCCL INFO")):
    """Wall time, CPU time and output of ``grep ARGS log`` in the C locale."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(["grep"] + list(args) + [log], stdout=subprocess.PIPE, check=False, env=dict(os.environ, LC_ALL="C"))
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return dt, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), out.stdout.decode().strip()


def selection_pattern(coll):
    """The analyser's own line selection as a grep ERE (``scan._GREP_ERE``, derived from ``grammar._TOKENS``)."""
    sys.path.insert(0, coll)
    from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.scan import _GREP_ERE  # pylint: disable=import-outside-toplevel
    return _GREP_ERE


def collection_path(tmp):
    base = Path(tmp) / "coll"
    link = base / "ansible_collections" / "hpcnet" / "rdma"
    link.parent.mkdir(parents=True)
    link.symlink_to(REPO, target_is_directory=True)
    return str(base)


def main():
    size_mb = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("NCCL_BENCH_MB", "2048"))
    nranks = int(os.environ.get("NCCL_BENCH_RANKS", "1024"))
    repeat = max(1, int(os.environ.get("NCCL_BENCH_REPEAT", "2")))
    with_python = os.environ.get("NCCL_BENCH_PYTHON", "1") != "0"
    tmp = tempfile.mkdtemp(prefix="nccl-bench-")
    try:
        log = os.path.join(tmp, "many-ranks.log")
        t = time.perf_counter()
        size = generate(log, int(size_mb * 1024 * 1024), nranks)
        gen_s = time.perf_counter() - t
        mb = size / 1e6
        coll = collection_path(tmp)
        floor_args = ("-a", "-c", "-E", "-e", selection_pattern(coll))
        time_grep(log)  # warm the page cache
        greps, floors, accel = [], [], []
        for _ in range(repeat):     # interleaved, so that a burst of load elsewhere hits all three
            greps.append(time_grep(log))
            floors.append(time_grep(log, floor_args))
            accel.append(run_analyser(log, coll, "grep"))
        grep_s, grep_cpu, grep_count = min(greps)
        floor_s, floor_cpu, floor_count = min(floors)
        grep_mbs = mb / grep_s
        rows = [("accelerated (grep + Python)", best(accel))]
        if with_python:
            rows.append(("pure Python (use_grep=False)", run_analyser(log, coll, "python")))
        res = rows[0][1]
        print("NCCL log analyser benchmark")
        print("  log: %.0f MB, %d ranks, %s lines (%s 'NCCL INFO'), generated in %.1f s; best of %d runs"
              % (mb, nranks, res["lines"], grep_count, gen_s, repeat))
        print("  %-30s %9s %9s %8s %7s %10s %10s %10s"
              % ("", "seconds", "MB/s", "ratio", "/floor", "tree RSS", "own RSS", "helper RSS"))
        print("  %-30s %9.2f %9.0f %8s" % ("grep -c 'NCCL INFO'", grep_s, grep_mbs, "100.0%"))
        print("  %-30s %9.2f %9.0f %7.1f%% %6.2fx   (floor: %s lines selected)"
              % ("floor: grep -E -c (selection)", floor_s, mb / floor_s, grep_s / floor_s * 100, 1.0, floor_count))
        for name, r in rows:
            r["ratio"] = mb / r["seconds"] / grep_mbs
            r["floor"] = r["seconds"] / floor_s
            print("  %-30s %9.2f %9.0f %7.1f%% %6.2fx %7.1f MB %7.1f MB %7.1f MB"
                  % (name, r["seconds"], mb / r["seconds"], r["ratio"] * 100, r["floor"], r["tree_rss_mb"], r["rss_mb"],
                     r["helper_rss_mb"]))
        for name, r in rows:
            cpu = r["cpu"] + r["helpers_cpu"]
            print("  CPU time, %-20s %6.2f s (Python %.2f s + helpers %.2f s); grep -c %.2f s: ratio %.1f%%; floor %.2f s"
                  % (name.split(" (")[0] + ":", cpu, r["cpu"], r["helpers_cpu"], grep_cpu, 100.0 * grep_cpu / cpu if cpu else 0.0,
                     floor_cpu))
        ok_ratio = res["ratio"] >= TARGET_RATIO
        ok_rss = res["tree_rss_mb"] < TARGET_RSS_MB and res["rss_mb"] < TARGET_RSS_MB
        ok_floor = res["floor"] <= TARGET_FLOOR
        same = all(r["digest"] == res["digest"] for _n, r in rows)
        print("  targets (accelerated path): ratio to grep -c >= %d%% %s; peak RSS < %d MB %s; wall time <= %.0fx the floor "
              "%s (%.2fx)" % (TARGET_RATIO * 100, "OK" if ok_ratio else "MISSED", TARGET_RSS_MB, "OK" if ok_rss else "MISSED",
                              TARGET_FLOOR, "OK" if ok_floor else "MISSED", res["floor"]))
        print("  results of both paths identical: %s (sha256 %s)" % ("yes" if same else "NO", ", ".join(r["digest"] for _n, r in rows)))
        print("  analysis: net_transport=%s gdr=%s ranks=%s processes=%s" % (res["net_transport"], res["gdr"], res["ranks"],
                                                                             res["processes"]))
        return 0 if ok_ratio and ok_rss and ok_floor and same else 1
    finally:
        if os.environ.get("NCCL_BENCH_KEEP"):
            print("  kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
