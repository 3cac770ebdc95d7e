# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the NCCL_DEBUG=INFO analyser (plugins/module_utils/nccl_log.py).

Fixture comparison rules (every ``*.expected.json`` under ``shared/fixtures/nccl-logs``):

* every public key of the issue whose expected value is not null must agree;
* ``ib_devices`` is compared exactly (name, port, link layer, NCCL's order);
* ``intra_node`` is compared by category: the expected files describe a hop in prose
  (``"SHM (direct shared memory)"``, ``"NET/IB (P2P and SHM disabled by environment)"``), so both sides are reduced to the
  transport NCCL printed (parenthetical remarks and the word "loopback" dropped, "direct shared memory" -> "SHM");
* ``errors``: the WARN lines must be the same set (the trailing parenthetical of an expected entry is a classification
  remark and is ignored); every other non-inferred expected entry (return-code chains, nccl-tests and framework
  failures, quoted with ``...`` ellipses) must be found in one analyser entry, its fragments in order;
  an ``inferred:`` entry is a conclusion no line states, so it is compared by CATEGORY: the analyser must report an
  inferred entry of the category named in ``INFERRED_CATEGORY`` and no inferred entry when none is expected.
"""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import (
    NcclLogAnalyzer, analyze_file, analyze_text, gid_kind, transport_label)
from fixtures_path import shared_fixtures

LOG_DIR = shared_fixtures() / "nccl-logs"
FIXTURES = sorted(LOG_DIR.glob("*.log"))
PUBLIC_KEYS = ("nccl_version", "net_transport", "ib_devices", "gdr", "collnet", "nvls", "intra_node", "multi_node",
               "fallback_to_socket", "errors")

# Category of each inferred conclusion: keyword in the expected text -> analyser category.
INFERRED_CATEGORY = (
    ("different NCCL builds", "version mismatch"),
    ("plugin-loader wordings", "version mismatch"),
    ("cannot reach other hosts", "socket on loopback"),
    ("different network transports", "transport mismatch"),
)


def _canon_intra(label):
    label = re.sub(r"\s*\(.*\)\s*$", "", label).strip()
    label = re.sub(r"\s+loopback$", "", label)
    if label in ("direct shared memory", "SHM"):
        return "SHM"
    return label


def _strip_remark(text):
    return re.sub(r"\s+\([^()]*(?:\([^()]*\)[^()]*)*\)\s*$", "", text).strip()


def _fragments(text):
    frames = re.findall(r"[\w./\-+]+:\d+ -> \d+", text)
    if frames:
        return frames
    return [p.strip().strip(",").strip() for p in _strip_remark(text).split("...") if p.strip().strip(",").strip()]


def _in_order(fragments, text):
    pos = 0
    for frag in fragments:
        idx = text.find(frag, pos)
        if idx < 0:
            return False
        pos = idx + len(frag)
    return True


def _inferred_category(text):
    for needle, category in INFERRED_CATEGORY:
        if needle in text:
            return category
    raise AssertionError("no category known for inferred expectation: %s" % text)


SCALAR_KEYS = tuple(k for k in PUBLIC_KEYS if k not in ("errors", "intra_node", "ib_devices"))


def _expected(log):
    return json.loads(log.with_suffix(".expected.json").read_text())


_ANALYSES = {}


def _analysis(log):
    if log not in _ANALYSES:
        _ANALYSES[log] = analyze_file(str(log))
    return _ANALYSES[log]


# One case per (fixture, key) whose expected value is not null (null: the excerpt shows no evidence, nothing to compare).
SCALAR_CASES = [(log, key) for log in FIXTURES for key in SCALAR_KEYS if _expected(log).get(key) is not None]


@pytest.fixture(scope="module", params=FIXTURES, ids=[f.stem for f in FIXTURES])
def case(request):
    return _analysis(request.param), _expected(request.param)


def test_fixture_directory_is_not_empty():
    assert len(FIXTURES) >= 20


@pytest.mark.parametrize("log, key", SCALAR_CASES, ids=["%s-%s" % (log.stem, key) for log, key in SCALAR_CASES])
def test_fixture_scalar_fields_agree(log, key):
    got, expected = _analysis(log), _expected(log)
    assert got[key] == expected[key], "%s: got %r, expected %r" % (key, got[key], expected[key])


def test_fixture_ib_devices_agree(case):
    got, expected = case
    assert got["ib_devices"] == expected["ib_devices"]


def test_fixture_intra_node_agrees_by_category(case):
    got, expected = case
    assert sorted(set(map(_canon_intra, got["intra_node"]))) == sorted(set(map(_canon_intra, expected["intra_node"])))


def test_fixture_warn_lines_agree(case):
    got, expected = case
    exp = sorted(_strip_remark(e) for e in expected["errors"] if " WARN " in e and not e.startswith("inferred:"))
    mine = sorted(e["text"] for e in got["errors"] if " WARN " in e["text"] and not e.get("inferred"))
    assert mine == exp


def test_fixture_other_errors_are_reported(case):
    got, expected = case
    for e in expected["errors"]:
        if " WARN " in e or e.startswith("inferred:"):
            continue
        frags = _fragments(e)
        assert any(_in_order(frags, g["text"]) for g in got["errors"]), "missing error %r in %r" % (e, got["errors"])


def test_fixture_inferred_errors_agree_by_category(case):
    got, expected = case
    exp = sorted(_inferred_category(e) for e in expected["errors"] if e.startswith("inferred:"))
    mine = sorted(e["category"] for e in got["errors"] if e.get("inferred"))
    assert mine == exp


def test_every_error_has_line_number_and_category(case):
    got, _expected = case
    for e in got["errors"]:
        assert e["category"]
        assert e.get("inferred") or isinstance(e["line"], int)


# ----------------------------------------------------------------- synthetic edge cases
P = "node%02d:%d:%d [%d] NCCL INFO "


def _lines_ib(host=1, pid=100, version="2.18.5"):
    pre = P % (host, pid, pid, 0)
    return [
        pre + "Bootstrap : Using eth0:10.0.%d.1<0>" % host,
        "NCCL version %s+cuda12.2" % version,
        pre + "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.%d.1<0>" % host,
        pre + "Using network IB",
    ]


def test_bootstrap_socket_line_of_nccl_2_4_is_not_the_data_transport():
    r = analyze_text("\n".join([
        "node01:1:1 [0] NCCL INFO NET/Socket : Using [0]ib0:10.0.0.1<0>",
        "NCCL version 2.4.7+cuda10.0",
        "node01:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
        "node01:2:2 [1] NCCL INFO NET/Socket : Using [0]ib0:10.0.0.1<0>",
    ]))
    assert r["net_transport"] == "IB"
    assert r["per_host"]["node01:2"]["net_transport"] is None
    assert r["fallback_to_socket"] is False


def test_internal_ib_reported_as_plugin_in_2_27_is_ib():
    r = analyze_text("node01:1:1 [0] NCCL INFO Initialized NET plugin IB\nnode01:1:1 [0] NCCL INFO Assigned NET plugin IB to comm\n")
    assert r["net_transport"] == "IB"


def test_external_plugin_name_is_kept_as_printed():
    r = analyze_text("node01:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IBext_v9/0/GDRDMA\n")
    assert r["net_transport"] == "plugin:IBext_v9"
    assert r["gdr"] is True
    assert transport_label("AWS Libfabric") == "plugin:AWS Libfabric"


def test_fallback_to_socket_needs_probe_failure_and_socket_choice():
    r = analyze_text("\n".join([
        "node01:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        "node01:1:1 [0] NCCL INFO NET/IB : No device found.",
        "node01:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
        "node01:1:1 [0] NCCL INFO Using network Socket",
    ]))
    assert r["net_transport"] == "Socket"
    assert r["fallback_to_socket"] is True
    r = analyze_text("node01:1:1 [0] NCCL INFO Using network Socket\n")
    assert r["fallback_to_socket"] is None


def test_one_host_ib_other_socket_is_a_mismatch():
    lines = _lines_ib(host=1)
    lines += [
        "node02:200:200 [0] NCCL INFO Bootstrap : Using eth0:10.0.2.1<0>",
        "node02:200:200 [0] NCCL INFO NET/IB : No device found.",
        "node02:200:200 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.2.1<0>",
        "node02:200:200 [0] NCCL INFO Using network Socket",
    ]
    r = analyze_text("\n".join(lines))
    assert r["mismatch"] is True
    assert r["net_transports"] == ["IB", "Socket"]
    assert r["per_host"]["node01:100"]["net_transport"] == "IB"
    assert r["per_host"]["node02:200"]["net_transport"] == "Socket"
    assert r["fallback_to_socket"] is True
    assert any(e["category"] == "transport mismatch" for e in r["errors"])
    assert r["multi_node"] is True


def test_same_hostname_on_two_processes_is_grouped_by_pid():
    r = analyze_text("\n".join(_lines_ib(host=1, pid=10) + _lines_ib(host=1, pid=11)))
    assert set(r["per_host"]) == {"node01:10", "node01:11"}


def test_mixed_versions_are_all_reported():
    r = analyze_text("\n".join(_lines_ib(1, 10, "2.18.5") + _lines_ib(2, 20, "2.19.3")))
    assert r["nccl_version"] == ["2.18.5", "2.19.3"]
    assert r["nccl_versions"] == ["2.18.5", "2.19.3"]


def test_prefixed_version_line_of_2_22_is_attributed_to_the_process():
    r = analyze_text("node01:5:5 [0] NCCL INFO NCCL version 2.23.4+cuda12.4\n")
    assert r["nccl_version"] == "2.23.4"
    assert r["per_host"]["node01:5"]["nccl_version"] == "2.23.4"


@pytest.mark.parametrize("wrap", [
    "[1,3]<stdout>:%s", "3: %s", "[trainer3]: %s", "(RayWorker pid=123, ip=10.0.0.9) %s", "  %s", "> %s",
    "[2025-01-01 10:00:00] %s",
])
def test_launcher_prefixes_are_understood(wrap):
    line = wrap % "node07:42:43 [2] NCCL INFO NET/IB : Using [0]mlx5_3:1/IB ; OOB ib0:10.0.0.7<0>"
    r = analyze_text(line + "\n" + wrap % "node07:42:43 [2] NCCL INFO Using network IB")
    assert r["net_transport"] == "IB"
    assert r["ib_devices"] == [{"name": "mlx5_3", "port": 1, "link_layer": "IB"}]
    assert "node07:42" in r["per_host"]


def test_json_wrapped_lines_are_unwrapped():
    rec = {"timestamp": 1, "log": "node01:1:1 [0] NCCL INFO Using network IB\n", "stream": "stdout"}
    cw = {"message": "node01:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>"}
    r = analyze_text(json.dumps(rec) + "\n" + json.dumps(cw))
    assert r["net_transport"] == "IB"
    assert r["ib_devices"][0]["link_layer"] == "RoCE"


def test_lines_with_stripped_prefix_still_count():
    r = analyze_text("NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\nNCCL INFO Using network IB\n")
    assert r["net_transport"] == "IB"


def test_rank_prefix_of_2_29_is_understood():
    r = analyze_text("node01:1:1 [0] NCCL INFO [Rank 3] Using network IB\n")
    assert r["net_transport"] == "IB"
    assert r["per_host"]["node01:1"]["ranks"] == [3]


def test_truncated_and_garbage_lines_do_not_break_analysis():
    text = "\n".join([
        "node01:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/I",
        "node01:1:1 [0] NCCL INF",
        "4] -> 5[5] via P2P/IPC",
        "\x00\x01garbage ]]]] [[[ -> -> via",
        "node01:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
        "node01:1:1 [0] NCCL INFO Using network IB",
    ])
    r = analyze_text(text)
    assert r["net_transport"] == "IB"
    assert r["intra_node"] == ["P2P/IPC"]
    assert r["ib_devices"] == []


def test_thousand_ranks_on_125_hosts():
    lines = []
    for rank in range(1000):
        host, local = divmod(rank, 8)
        pre = "gpu%03d:%d:%d [%d] NCCL INFO " % (host, 1000 + local, 2000 + local, local)
        lines.append(pre + "NET/IB : Using [0]mlx5_%d:1/IB ; OOB ib0:10.1.%d.%d<0>" % (local, host // 250, host % 250))
        lines.append(pre + "Using network IB")
        peer = (rank + 8) % 1000
        lines.append(pre + "Channel 00/0 : %d[%d] -> %d[%d] [send] via NET/IB/%d/GDRDMA" % (rank, local, peer, local, local))
        lines.append(pre + "comm 0x1 rank %d nranks 1000 cudaDev %d busId 1000 - Init COMPLETE" % (rank, local))
    r = analyze_text("\n".join(lines))
    assert r["net_transport"] == "IB"
    assert r["gdr"] is True
    assert r["multi_node"] is True
    assert r["ranks"] == 1000
    assert len(r["per_host"]) == 1000
    assert len(r["hosts"]) == 125
    assert len(r["ib_devices"]) == 8


def test_gdr_disabled_line_means_no_gdr():
    r = analyze_text("node01:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n")
    assert r["gdr"] is False


def test_completion_error_is_classified_with_meaning():
    r = analyze_text("node01:1:9 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4242> "
                     "with status=12 opcode=0 len=0 vendor err 129 (Send)\n")
    e = r["errors"][0]
    assert e["category"] == "completion"
    assert "RETRY_EXC" in e["meaning"]
    assert e["line"] == 1


def test_new_warn_format_with_function_name():
    r = analyze_text("node01:1:9 [0] misc/socket.cc:50 (ncclSocketConnect) NCCL WARN socket connect failed\n")
    assert r["errors"][0]["category"] == "bootstrap"


def test_return_code_chain_is_one_error():
    r = analyze_text("\n".join("node01:1:1 [0] NCCL INFO %s -> 3" % f for f in ("bootstrap.cc:1", "init.cc:2", "init.cc:3")))
    assert [e["text"] for e in r["errors"]] == ["bootstrap.cc:1 -> 3 ... init.cc:3 -> 3"]
    assert "ncclInternalError" in r["errors"][0]["meaning"]


def test_single_return_code_line_is_not_an_error():
    assert analyze_text("node01:1:1 [0] NCCL INFO include/net.h:24 -> 2\n")["errors"] == []


def test_env_echo_lines():
    r = analyze_text("node01:1:1 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n"
                     "node01:1:1 [0] NCCL INFO NCCL_IB_HCA set to mlx5_4\n")
    assert r["env"] == {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "mlx5_4"}


def test_link_local_gid_is_recognised():
    r = analyze_text("\n".join([
        "node01:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>",
        "node01:1:1 [0] NCCL INFO NET/IB: Dev 0 Port 1 qpn 58 mtu 3 GID 0 (80FE/E05BC4FFFE3A1B2C)",
    ]))
    assert r["gid"][0]["kind"] == "link-local"
    assert r["gid"][0]["hca"] == "mlx5_0"
    assert gid_kind("0", "0101000AFFFF0000") == "ipv4-mapped"


def test_nccl_tests_result_table_is_kept():
    text = "\n".join([
        "#                                                              out-of-place                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
        "     1048576        262144     float     sum      -1    50.10   20.93   39.24      0    49.80   21.05   39.48      0",
        "   134217728      33554432     float     sum      -1   1400.0   95.87  179.75      0   1398.0   96.01  180.02      0",
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 109.62 ",
    ])
    r = analyze_text(text)
    assert r["busbw"]["avg_busbw_gbps"] == pytest.approx(109.62)
    assert r["busbw"]["peak_busbw_gbps"] == pytest.approx(180.02)
    assert r["busbw"]["rows"][1]["size"] == 134217728
    assert r["busbw"]["rows"][1]["out_of_place"]["busbw_gbps"] == pytest.approx(179.75)


def test_feed_accepts_bytes_and_counts_lines():
    an = NcclLogAnalyzer()
    an.feed(b"node01:1:1 [0] NCCL INFO Using network IB\n")
    an.feed("")
    assert an.result()["lines"] == 2


def test_empty_log_has_no_evidence():
    r = analyze_text("")
    assert r["net_transport"] is None and r["gdr"] is None and r["multi_node"] is None and r["errors"] == []


@pytest.mark.parametrize("log", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_string_and_file_input_give_the_same_analysis(log):
    assert analyze_text(log.read_bytes()) == analyze_file(str(log))
