#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the NCCL_DEBUG=INFO analyser (not a pytest test).

Generates a many-rank log in a temp dir, then measures:
  * analyser throughput in MB/s, as a ratio to ``grep -c 'NCCL INFO'`` on the same file (target >= 25 %);
  * peak RSS of the analyser, run in a child process (ru_maxrss of RUSAGE_CHILDREN; target < 100 MB).
Exit status 1 when a target is missed.

Usage: bench_nccl_log.py [SIZE_MB]        (or NCCL_BENCH_MB=...; default 2048)
       NCCL_BENCH_RANKS (default 1024), NCCL_BENCH_KEEP=1 keeps the file.

Log mix (per communicator init, per rank): bootstrap/plugin/NET/IB/Using network/env lines, ~24 channel
connection lines (P2P/IPC inside a node, NET/IB/n/GDRDMA between nodes), Trees, channel summary, Init COMPLETE;
then NCCL COLL-subsystem op lines ("AllReduce: opCount ...") and proxy chatter, which make up most of a multi-GB log.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET_RATIO = 0.25
TARGET_RSS_MB = 100.0


def generate(path, size_bytes, nranks):
    gpus = 8
    hosts = max(1, nranks // gpus)
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
                pre + "Trees [0] %d/-1/-1->%d->%d [1] -1/-1/-1->%d->%d" % ((rank + 1) % nranks, rank, (rank - 1) % nranks, rank,
                                                                          (rank + 1) % nranks),
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
import sys, time, json, resource
sys.path.insert(0, sys.argv[2])
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import analyze_file
t = time.perf_counter()
r = analyze_file(sys.argv[1])
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "net_transport": r["net_transport"], "gdr": r["gdr"], "ranks": r["ranks"],
                  "processes": r["processes"], "lines": r["lines"]}))
"""


def collection_path(tmp):
    base = Path(tmp) / "coll"
    link = base / "ansible_collections" / "hpcnet" / "rdma"
    link.parent.mkdir(parents=True)
    link.symlink_to(REPO, target_is_directory=True)
    return str(base)


def main():
    size_mb = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("NCCL_BENCH_MB", "2048"))
    nranks = int(os.environ.get("NCCL_BENCH_RANKS", "1024"))
    tmp = tempfile.mkdtemp(prefix="nccl-bench-")
    try:
        log = os.path.join(tmp, "many-ranks.log")
        t = time.perf_counter()
        size = generate(log, int(size_mb * 1024 * 1024), nranks)
        gen_s = time.perf_counter() - t
        mb = size / 1e6
        subprocess.run(["grep", "-c", "NCCL INFO", log], stdout=subprocess.DEVNULL, check=False)  # warm the page cache
        t = time.perf_counter()
        grep = subprocess.run(["grep", "-c", "NCCL INFO", log], stdout=subprocess.PIPE, check=False, env=dict(os.environ, LC_ALL="C"))
        grep_s = time.perf_counter() - t
        coll = collection_path(tmp)
        child = subprocess.run([sys.executable, "-c", CHILD, log, coll], stdout=subprocess.PIPE, check=True)
        import json
        res = json.loads(child.stdout)
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
        an_s = res["seconds"]
        grep_mbs = mb / grep_s
        an_mbs = mb / an_s
        ratio = an_mbs / grep_mbs
        ok_ratio = ratio >= TARGET_RATIO
        ok_rss = rss_mb < TARGET_RSS_MB
        print("NCCL log analyser benchmark")
        print("  log: %.0f MB, %d ranks, %s lines (%s 'NCCL INFO'), generated in %.1f s"
              % (mb, nranks, res["lines"], grep.stdout.decode().strip(), gen_s))
        print("  %-28s %12s %12s %10s" % ("", "seconds", "MB/s", "target"))
        print("  %-28s %12.2f %12.0f %10s" % ("grep -c 'NCCL INFO'", grep_s, grep_mbs, ""))
        print("  %-28s %12.2f %12.0f %10s" % ("analyser (analyze_file)", an_s, an_mbs, ""))
        print("  %-28s %12s %12.1f%% %9s %s" % ("throughput ratio", "", ratio * 100, ">= %d%%" % (TARGET_RATIO * 100),
                                             "OK" if ok_ratio else "MISSED"))
        print("  %-28s %12s %11.1f MB %9s %s" % ("peak RSS (child)", "", rss_mb, "< %d MB" % TARGET_RSS_MB, "OK" if ok_rss else "MISSED"))
        print("  analysis: net_transport=%s gdr=%s ranks=%s processes=%s" % (res["net_transport"], res["gdr"], res["ranks"],
                                                                             res["processes"]))
        return 0 if ok_ratio and ok_rss else 1
    finally:
        if os.environ.get("NCCL_BENCH_KEEP"):
            print("  kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
