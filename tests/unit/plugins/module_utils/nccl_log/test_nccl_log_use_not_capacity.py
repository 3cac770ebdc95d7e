# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The analyser reads what NCCL did, not what it could do (issue 34, item 4): NVLS and CollNet from the lines NCCL
prints when it connects them, ranks per communicator (``ncclCommShrink`` / ``ncclCommSplit`` renumber them), whether
an external net plugin carried the traffic, and the size of every communicator.  The line forms are NCCL's
(src/init.cc, src/transport/nvls.cc, src/transport/coll_net.cc, src/plugin/net.cc, 2.18-2.30); the grammar is
described in tests/fixtures/real/nccl-logs/README.md and the real excerpts are listed in its SOURCES.md."""

from __future__ import annotations

import json

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import analyze_file, analyze_text
from fixtures_path import nccl_log_fixtures

P = "node01:100:100 [0] NCCL INFO "
CAPACITY = P + "32 coll channels, 32 collnet channels, 32 nvls channels, 32 p2p channels, 32 p2p channels per peer\n"


def _log(*messages, prefix=P):
    return "".join(prefix + m + "\n" for m in messages)


# ---------------------------------------------------------------- NVLS: capacity is not use
def test_nvls_channels_with_ncclalgo_ring_are_not_use():
    text = _log("NCCL_ALGO set by environment to Ring", "NVLS multicast support is available on dev 0") + CAPACITY
    assert analyze_text(text)["nvls"] is False


def test_nvls_channels_alone_do_not_claim_nvls():
    assert analyze_text(CAPACITY)["nvls"] is None
    assert analyze_text(_log("NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 16)"))["nvls"] is None


@pytest.mark.parametrize("use", [
    "NVLS comm 0x55a7be5601c0 headRank 0 nHeads 8 buffSize 4194304 memSize 2097152 nvlsPerRankSize 201326592 "
    "nvlsTotalSize 1610612736",
    "NVLS comm 0x5f2c headRank 0 nHeads 4 nvlsRanks 4 buffSize 1048576 nvlsPerRankSize 33554432 nvlsTotalSize 134217728",
    "Connected NVLS tree",
])
def test_nvls_buffer_setup_or_tree_connection_is_use(use):
    assert analyze_text(CAPACITY + _log(use))["nvls"] is True


def test_ncclalgo_without_nvls_wins_over_a_2_20_init_time_setup():
    # 2.18-2.21 set the NVLS buffers up at init whatever NCCL_ALGO says; no collective then runs on them
    text = _log("NVLS comm 0x55 headRank 0 nHeads 8 buffSize 4194304 memSize 2097152 nvlsPerRankSize 1 nvlsTotalSize 8",
                "NCCL_ALGO set by environment to Tree,Ring")
    assert analyze_text(text)["nvls"] is False


@pytest.mark.parametrize("value, allowed", [
    ("Ring", False), ("ring,tree", False), ("^NVLS,NVLSTree", False), ("Tree,Ring,,CollnetDirect", False),
    ("NVLS", True), ("nvlstree", True), ("^NVLS", True), ("^ring", True), ("ring;allreduce:nvls,ring", True),
    ("Tree,Ring,,CollnetDirect,CollnetChain,NVLS", True), ("ring;allreduce:^nvls,nvlstree", False),
])
def test_ncclalgo_grammar(value, allowed):
    from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.summary import algo_allows_nvls
    assert algo_allows_nvls(value) is allowed


# ---------------------------------------------------------------- CollNet: "0 CollNet devices" is false
@pytest.mark.parametrize("line", [
    "Rank 1: 0 CollNet devices",
    "Local CollNet device counts across ranks: min 0 max 0",
    "Communicator has 1 nodes which is less than CollNet node threshold 2, disabling CollNet",
])
def test_collnet_off_lines_are_false(line):
    assert analyze_text(_log("Rank 1: 3 Net devices", line))["collnet"] is False


def test_a_collnet_connection_wins_over_a_rank_without_devices():
    text = _log("Rank 0: 0 CollNet devices") + _log(
        "CollNet 00/0 : 1 [send] via COLLNET/IBext_v8/0/GDRDMA", prefix="node02:200:200 [0] NCCL INFO ")
    assert analyze_text(text)["collnet"] is True


# ---------------------------------------------------------------- ranks are per communicator
def _shrink_log():
    """node01 holds ranks 2 and 3 of a 4-rank communicator whose ranks 0 and 1 are on node02 (network connections);
    ncclCommShrink then drops ranks 0 and 1, and the node01 ranks become 0 and 1 of a 2-rank communicator."""
    a = "node01:251907:251907 [0] NCCL INFO "
    b = "node01:251908:251908 [1] NCCL INFO "
    return (
        a + "ncclCommInitRank comm 0x56461d4d4c10 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 69000 "
            "commId 0x8d1c46a5b6e3a9f1 - Init START\n"
        + b + "ncclCommInitRank comm 0x560a4f522ae0 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId b1000 "
              "commId 0x8d1c46a5b6e3a9f1 - Init START\n"
        + a + "Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA\n"
        + a + "Channel 00/0 : 2[0] -> 3[1] via P2P/CUMEM/read\n"
        + b + "Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/1/GDRDMA\n"
        + a + "ncclCommShrink comm 0x564621c3e210 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 69000 "
              "parent 0x56461d4d4c10 childCount 0 color 0 key 2- Init START\n"
        + b + "ncclCommShrink comm 0x560a53c8c740 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId b1000 "
              "parent 0x560a4f522ae0 childCount 0 color 0 key 3- Init START\n"
        + b + "Channel 00 : 1[1] -> 0[0] via SHM/direct/direct\n"
        + a + "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n")


def test_intra_node_after_comm_shrink_reads_ranks_per_communicator():
    # rank 1 is node02's in the parent and node01's in the shrunk communicator: its network connection is inter-node
    r = analyze_text(_shrink_log())
    assert sorted(r["intra_node"]) == ["P2P/CUMEM/read", "SHM/direct/direct"]


def test_net_loopback_inside_one_communicator_is_still_intra_node():
    a = "node01:7:7 [0] NCCL INFO "
    b = "node01:8:8 [1] NCCL INFO "
    text = (a + "ncclCommInitRank comm 0x11 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x77 - Init START\n"
            + b + "ncclCommInitRank comm 0x22 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x77 - Init START\n"
            + a + "Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0\n"
            + b + "Channel 00/0 : 0[0] -> 1[1] [receive] via NET/IB/0\n")
    assert analyze_text(text)["intra_node"] == ["NET/IB"]


# ---------------------------------------------------------------- communicators and their sizes
def test_every_communicator_and_its_size_is_returned():
    r = analyze_text(_shrink_log())
    comms = {(c["pid"], c["comm"]): c for c in r["communicators"]}
    assert comms[(251907, "0x56461d4d4c10")]["nranks"] == 4
    assert comms[(251907, "0x56461d4d4c10")]["comm_id"] == "0x8d1c46a5b6e3a9f1"
    assert comms[(251907, "0x564621c3e210")] == {
        "host": "node01", "pid": 251907, "comm": "0x564621c3e210", "rank": 0, "nranks": 2,
        "function": "ncclCommShrink", "parent": "0x56461d4d4c10"}
    assert r["ranks"] == 4


def test_ranks_that_ran_alone_show_one_rank_per_communicator():
    # srun without PMIx: each rank initialises a communicator of its own
    text = "".join(
        "node0%d:%d:%d [0] NCCL INFO ncclCommInitRank comm 0x5%d rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1a000 "
        "commId 0x%x - Init COMPLETE\n" % (i, 10 + i, 10 + i, i, 0xabc + i) for i in (1, 2))
    text += "node01:11:11 [0] NCCL INFO comm 0x51 rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0\n"
    r = analyze_text(text)
    assert [(c["host"], c["nranks"]) for c in r["communicators"]] == [("node01", 1), ("node02", 1)]
    assert r["communicators"][0]["nnodes"] == 1


# ---------------------------------------------------------------- plugin.usable
RDMA_PLUGIN = ("NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)",
               "Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so")


def test_a_plugin_used_under_its_network_name_is_usable():
    # the plugin loads under its struct's name and NCCL selects the network the plugin names at init
    r = analyze_text(_log(*RDMA_PLUGIN) + _log("Using network IBext_v8",
                                             "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IBext_v8/0/GDRDMA"))
    assert r["plugin"]["usable"] is True and r["plugin"]["name"] == "NCCL RDMA Plugin v8"


@pytest.mark.parametrize("chosen", [
    ("Using network IB",),
    ("Initialized NET plugin IB", "Assigned NET plugin IB to comm"),
    ("Using network Socket", "Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0"),
])
def test_a_plugin_loaded_then_not_used_is_not_usable(chosen):
    r = analyze_text(_log(*RDMA_PLUGIN) + _log("P2P plugin v8 IBext_v8") + _log(*chosen))
    assert r["plugin"]["loaded"] is True and r["plugin"]["usable"] is False


def test_an_ofi_plugin_that_fell_back_to_sockets_is_not_usable():
    text = _log("NET/OFI Initializing aws-ofi-nccl 1.9.1-aws", "NET/OFI Using Libfabric version 1.21",
                "Using network Socket")
    assert analyze_text(text)["plugin"]["usable"] is False


# ---------------------------------------------------------------- the real excerpts (tests/fixtures/real/nccl-logs)
REAL = [log for log in nccl_log_fixtures() if log.parent.name == "nccl-logs"]
EXTRA = [(log, key) for log in REAL for key in ("communicators", "plugin")
         if key in json.loads(log.with_suffix(".expected.json").read_text())
         and (key == "communicators" or "usable" in json.loads(log.with_suffix(".expected.json").read_text())[key])]


@pytest.mark.parametrize("log, key", EXTRA, ids=["%s-%s" % (log.stem, key) for log, key in EXTRA])
def test_real_excerpts_communicators_and_plugin_use(log, key):
    expected = json.loads(log.with_suffix(".expected.json").read_text())[key]
    got = analyze_file(str(log))[key]
    if key == "plugin":
        assert got["usable"] == expected["usable"]
    else:
        assert got == expected


def test_the_new_excerpts_are_there():
    names = [log.stem for log, _key in EXTRA]
    assert any(n.startswith("44-") for n in names) and any(n.startswith("45-") for n in names)


def test_communicators_kept_in_memory_are_bounded():
    from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import NcclLogAnalyzer
    from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.comms import KEEP_ALL
    an = NcclLogAnalyzer()
    for n in range(KEEP_ALL * 3):
        an.feed(P + "ncclCommInitRank comm 0x%x rank 0 nranks 2 cudaDev 0 busId 1000 commId 0x%x - Init START" % (n + 1, n + 1))
        an.feed(P + "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read")
    kept = sum(len(p.comms) for p in an.procs.values())
    assert kept <= KEEP_ALL + 1 and len(an.result()["communicators"]) == min(kept, 256)
