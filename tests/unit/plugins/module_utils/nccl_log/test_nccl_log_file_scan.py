# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""analyze_file's chunked fast path gives exactly the result of the plain per-line filter + parser.

The reference below is the straightforward algorithm analyze_file replaces: split the whole file into lines, feed
every line that ``_relevant`` or ``_LEADING`` accepts, in order, with its line number.  The fast path (whole-chunk
scans, memo replay of repeated lines) must agree with it on every fixture, on adversarial mixes (wrappers, CRLF,
tokens inside host names, return-code chains between repeats, nccl-tests tables) and at any chunk size.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import NcclLogAnalyzer, analyze_file, grammar, scan
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.grammar import _LEADING, _TOKENS, _relevant
from fixtures_path import nccl_log_fixtures

FIXTURES = nccl_log_fixtures()


def reference(data):
    """The documented rule, line by line: each line is read up to its first _LINE_BYTES bytes; it is analysed when that
    head holds a token (or matches _LEADING); an unterminated last line too."""
    an = NcclLogAnalyzer()
    lines = [line[:grammar._LINE_BYTES] for line in data.split(b"\n")]
    last = lines.pop()
    for i, line in enumerate(lines):
        if _relevant(line) or _LEADING.match(line):
            an.feed_at(line, i + 1)
    count = len(lines)
    if last:
        count += 1
        if _relevant(last) or _LEADING.match(last):
            an.feed_at(last, count)
    an.lineno = count
    return an.result()


def canon(result):
    return json.dumps(result, sort_keys=True, default=str)


def check(tmp_path, data, chunk_sizes=(1 << 23, 4096, 257)):
    """The pure-Python path at every chunk size, and the grep path, give the reference result."""
    path = tmp_path / "log"
    path.write_bytes(data)
    want = canon(reference(data))
    for size in chunk_sizes:
        assert canon(analyze_file(str(path), chunk_size=size, use_grep=False)) == want, "chunk_size=%d" % size
    assert canon(analyze_file(str(path))) == want, "grep path"


P = "gpu%02d:%d:%d [%d] NCCL INFO "


def rank_block(host, pid, dev, rank, nranks, comm, net="IB", gdr=True):
    pre = P % (host, pid, pid + 100, dev)
    suffix = "/GDRDMA" if gdr else ""
    lines = [
        pre + "Assigned NET plugin %s to comm" % net,
        pre + "Using network %s" % net,
        pre + "ncclCommInitRankConfig comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId 1000 commId 0x%x - Init START"
        % (0x100 + comm, rank, nranks, dev, dev, comm),
        pre + "Trees [0] %d/-1/-1->%d->%d [1] -1/-1/-1->%d->%d"
        % ((rank + 1) % nranks, rank, (rank - 1) % nranks, rank, (rank + 1) % nranks),
    ]
    for ch in range(4):
        lines.append(pre + "Channel %02d/0 : %d[%d] -> %d[%d] [send] via NET/%s/%d%s" % (ch, rank, dev, (rank + 1) % nranks, 0,
                                                                                         net, ch % 2, suffix))
        lines.append(pre + "Channel %02d/0 : %d[%d] -> %d[%d] via P2P/IPC/read" % (ch, rank, dev, (rank + 1) % nranks, dev + 1))
    lines += [
        pre + "Setting affinity for GPU %d to ffff" % dev,
        pre + "4 coll channels, 0 collnet channels, %d nvls channels, 4 p2p channels" % (comm % 2),
        pre + "ncclCommInitRankConfig comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId 1000 commId 0x%x - Init COMPLETE"
        % (0x100 + comm, rank, nranks, dev, dev, comm),
    ]
    for op in range(5):
        lines.append(pre + "AllReduce: opCount %x sendbuff 0x7f00 recvbuff 0x7f00 count 1 datatype 7 op 0 root 0 comm 0x%x "
                     "[nranks=%d] stream 0x99" % (op, 0x100 + comm, nranks))
    return lines


def many_comms(ncomms, nranks=8, hosts=2):
    out = []
    for comm in range(1, ncomms + 1):
        for rank in range(nranks):
            host, dev = divmod(rank, nranks // hosts)
            out += rank_block(host, 1000 + dev, dev, rank, nranks, comm, net="IB" if comm % 3 == 1 else "Socket",
                              gdr=comm % 2 == 0)
    return out


def test_fast_path_equals_reference_on_every_fixture(tmp_path):
    assert FIXTURES, "no fixtures found"
    for log in FIXTURES:
        check(tmp_path, log.read_bytes())


def test_fast_path_equals_reference_on_repeated_communicators(tmp_path):
    check(tmp_path, ("\n".join(many_comms(12)) + "\n").encode())


def test_fast_path_equals_reference_on_all_fixtures_concatenated_and_repeated(tmp_path):
    data = b"".join(log.read_bytes().rstrip(b"\n") + b"\n" for log in FIXTURES)
    check(tmp_path, data * 3, chunk_sizes=(1 << 23, 1000))


def adversarial_mix():
    """Repeated communicators interleaved with return-code chains, wrappers, CRLF, blanks, JSON, nccl-tests tables,
    tokens inside host names and non-ASCII host names; no final newline."""
    base = many_comms(3, nranks=4, hosts=1)
    odd = [
        P % (0, 1000, 1100, 0) + "init.cc:903 -> 5",
        P % (0, 1000, 1100, 0) + "init.cc:1200 -> 5",
        "[1,0]<stdout>:" + base[6],
        "0: " + base[7],
        base[6] + "\r",
        base[6] + "  ",
        "  " + base[6],
        '{"log": "%s"}' % base[6],
        "plugin-node:1:2 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x1 count 1 datatype 7 op 0 root 0",
        "Trees01:1:2 [3] NCCL INFO Proxy: opCount 1",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "     1048576        262144     float     sum      -1    100.0   10.49   19.66      0    100.0   10.49   19.66      0",
        base[6],
        "# Avg bus bandwidth    : 19.66",
        P % (0, 1000, 1100, 0) + "NCCL version 2.21.5+cuda12.4 " + base[6].split("INFO ")[1],
        P % (0, 1000, 1100, 0) + "[Rank 3] " + base[6].split("INFO ")[1],
        P % (0, 1000, 1100, 0) + "NVLS comm 0x1 headRank 0 nHeads 1",
        P % (0, 1000, 1100, 0) + "2 coll channels, 2 collnet channels, 2 nvls channels, 2 p2p channels",
        "host\xe9:1:2 [0] NCCL INFO " + base[6].split("INFO ")[1],
        P % (0, 1000, 1100, 0) + "WARN Call to ibv_modify_qp failed with error Connection timed out",
    ]
    lines = []
    for i, line in enumerate(base):
        lines.append(line)
        if i % 7 == 0:
            lines.append(odd[(i // 7) % len(odd)])
    ret = [P % (0, 1000, 1100, 0) + "init.cc:903 -> 5", P % (0, 1000, 1100, 0) + "init.cc:1200 -> 5"]
    chains = ret + [base[6]] + ret + [base[7]] + ret   # a repeat must end a return-code chain like any other INFO line
    return ("\n".join(lines + base + odd * 6 + chains + base)).encode("utf-8")   # no final newline


def test_repeats_interleaved_with_chains_wrappers_crlf_and_tables(tmp_path):
    check(tmp_path, adversarial_mix())


def test_every_token_is_found_by_the_chunk_scans():
    for tok in _TOKENS:
        line = b"h:1:2 [0] NCCL INFO x " + tok + b" y"
        assert any(rx.search(line) for _a, _l, rx in scan._TOKEN_SCANS), tok
    assert {tok for tok in _TOKENS if _relevant(b" " + tok + b" ")} == set(_TOKENS)


def test_memo_stays_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "_MEMO_MAX", 50)
    check(tmp_path, ("\n".join(many_comms(4)) + "\n").encode(), chunk_sizes=(1 << 23,))


LINE_PARTS = st.sampled_from(many_comms(2, nranks=4, hosts=2)[:60] + [
    "", "  ", "\r", "12 34 x", "{}", "# x", P % (1, 1, 1, 0) + "a.cc:1 -> 2", "[0,1]<stderr>:x NCCL WARN boom",
    "x" * 300, "gpu01:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via NET/Socket/0",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(LINE_PARTS, max_size=120), st.booleans(), st.sampled_from([64, 333, 1 << 23]))
def test_fast_path_equals_reference_on_random_mixes(tmp_path, lines, final_newline, size):
    data = "\n".join(lines).encode() + (b"\n" if final_newline and lines else b"")
    check(tmp_path, data, chunk_sizes=(size,))


def test_lines_longer_than_the_cap_are_read_by_their_head_in_every_path(tmp_path):
    """A line is analysed up to its first _LINE_BYTES bytes (file paths at any chunk size, grep, text); a token only
    in the dropped tail does not select it, and memory stays bounded whatever the line length."""
    cap = grammar._LINE_BYTES
    good = (P % (1, 10, 110, 0)).encode()
    data = b"\n".join([
        good + b"Using network IB " + b"x" * (cap + 10),                          # token in the head: read
        good + b"x" * (cap + 10) + b" NET/IB : Using [0]mlx5_9:1/IB",            # token only in the tail: not read
        good + b"NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>",
        good + b"Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA " + b"y" * (3 * cap),
        good + b"WARN " + b"z" * (2 * cap),                                       # unterminated last line
    ])
    check(tmp_path, data, chunk_sizes=(1 << 23, cap // 3, 4096))
    r = analyze_file(str(tmp_path / "log"))
    assert [d["name"] for d in r["ib_devices"]] == ["mlx5_0"]
    assert r["lines"] == 5


@pytest.mark.parametrize("data", [
    # a wrapped repeat whose clipped host is later a host of its own
    b"worker-23:83:83 [0] NCCL INFO Using network IB\n" + b"0: [1]23:83:83 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via NET/IB/0\n"
    + b"23:99:99 [0] NCCL INFO Using network Socket\n" + b"0: [1]23:83:83 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via NET/IB/0\n" * 5,
    # a JSON record without a message between repeats
    b"[1,0]<stdout>:h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n" + b'{"log": ""}\n'
    + b"[1,0]<stdout>:h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n" * 5,
    # a bare ISO timestamp is not a host
    b"2025-05-16T16:39:51 [0] NCCL INFO Using network Socket\n" * 3 + b"h:1:2 [0] NCCL INFO Using network IB\n"
    + b"2025-05-16T16:39:51 [0] NCCL INFO Using network Socket\n" * 3,
])
def test_memo_replay_of_wrapped_and_clipped_lines_equals_the_parse(tmp_path, data):
    check(tmp_path, data, chunk_sizes=(1 << 23, 97))
