# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property tests: arbitrary input never makes the NCCL log analyser raise."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import NcclLogAnalyzer

FRAGMENTS = [
    "node01:1:2 [0] ", "NCCL INFO ", "NCCL WARN ", "INFO ", "WARN ", "[1,3]<stdout>:", "0: ", "[Rank 3] ", "Channel 00/0 : ",
    "Ring 00 : ", "0[0] -> 1[1]", " [send]", " [receive]", " via ", "NET/IB/0/GDRDMA", "NET/", "P2P/IPC", "Using network ",
    "NET/IB : Using ", "[0]mlx5_0:1/RoCE", "; OOB eth0:10.0.0.1<0>", "NCCL version 2.", "init.cc:1 -> ", "Trees [0] ",
    "-1/-1/-1->0->1", "comm 0x1 rank 0 nranks ", "NCCL_IB_HCA set by environment to ", "{\"log\": \"", "\"}", "#  Rank  0 ",
    "# Avg bus bandwidth : ", "#  size  count  type ", "GID 0 (80FE/", ")", "16 coll channels, 0 nvls channels, ",
    "Got completion with error 12", "\n", "\x00", "\u00e9", "\t", "]", "[", ":", "-", "9" * 30,
]

line_strategy = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(line_strategy, max_size=30))
def test_arbitrary_lines_never_raise(lines):
    an = NcclLogAnalyzer()
    an.feed_lines("\n".join(lines).splitlines())
    assert an.parse_errors == 0  # no line made a parser rule raise (feed() would hide it)
    result = an.result()
    json.dumps(result)
    assert result["net_transport"] is None or isinstance(result["net_transport"], str)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(data):
    an = NcclLogAnalyzer()
    for chunk in data.split(b"\n"):
        an.feed(chunk)
    assert an.parse_errors == 0
    json.dumps(an.result())
