# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the NCCL_DEBUG=INFO analyser (plugins/module_utils/nccl_log/).

Fixture comparison rules (every ``*.expected.json`` under ``tests/fixtures/real/nccl-logs`` and ``fixtures/nccl-field``):

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
    NcclLogAnalyzer, analyze_file, analyze_text, classify_error, gid_kind, transport_label)
from fixtures_path import nccl_log_fixtures

FIXTURES = nccl_log_fixtures()
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


def test_gid_trace_of_2_20_names_nccl_dev_and_ib_dev():
    r = analyze_text("\n".join([
        "node01:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>",
        "node01:1:9 [0] NCCL INFO NET/IB: NCCL Dev 1 IbDev 1 Port 1 qpn 1047 mtu 5 query_ece={supported=1, vendor_id=0x15b3, "
        "options=0x0, comp_mask=0x0} GID 0 (80FE/1A8A41FEFF21A75E) fifoRkey=0x15e6c5 fifoLkey=0x15e6c5",
    ]))
    assert [(g["hca"], g["port"], g["gid_index"], g["kind"]) for g in r["gid"]] == [("mlx5_1", 1, 0, "link-local")]


def test_pxn_proxy_rank_in_net_hop_is_a_net_hop():
    r = analyze_text("\n".join([
        "gpu36:20776:20833 [1] NCCL INFO Channel 00/0 : 3[1] -> 4[0] [send] via NET/IBext_v8/5(2)/GDRDMA",
        "gpu36:20776:20833 [1] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/CUMEM/read",
    ]))
    assert r["net_transport"] == "plugin:IBext_v8"
    assert r["gdr"] is True
    assert r["intra_node"] == ["P2P/CUMEM/read"]


@pytest.mark.parametrize("probe", [
    "node01:7:7 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",   # 2.10: a WARN
    "node01:7:9 [0] NCCL INFO Failed to open libibverbs.so[.1]",                        # 2.19+: an INFO line
    "node01:7:7 [0] NCCL INFO Failed to initialize NET plugin IB",                       # 2.27+
])
def test_ib_unavailable_then_socket_is_a_fallback(probe):
    r = analyze_text(probe + "\nnode01:7:9 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
                             "node01:7:9 [0] NCCL INFO Using network Socket\n")
    assert r["net_transport"] == "Socket"
    assert r["fallback_to_socket"] is True


def test_libibverbs_warn_is_classified_with_its_fix():
    r = analyze_text("node01:7:7 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n")
    assert r["errors"][0]["category"] == "device"
    assert "rdma-core" in r["errors"][0]["meaning"]


def test_markdown_autolinks_of_a_pasted_log_are_read_through_and_quoted_as_pasted():
    warn = ("transport/[net_ib.cc:1909](http://net_ib.cc:1909/) NCCL WARN NET/IB : Got completion from peer "
            "[10.1.3.201](http://10.1.3.201/)<33057> with status=9 opcode=0 len=0 vendor err 138 (Send)")
    r = analyze_text("\n".join([
        "node01:25:98 [3] " + warn,
        "node01:25:98 [3] NCCL INFO [net.cc:1137](http://net.cc:1137/) -> 6",
        "node01:25:98 [3] NCCL INFO [proxy.cc:698](http://proxy.cc:698/) -> 6",
    ]))
    warns = [e for e in r["errors"] if " WARN " in e["text"]]
    assert [e["text"] for e in warns] == [warn]
    assert warns[0]["category"] == "completion" and "IBV_WC_REM_INV_REQ_ERR" in warns[0]["meaning"]
    assert any(e["text"] == "net.cc:1137 -> 6 ... proxy.cc:698 -> 6" for e in r["errors"])
    assert r["net_transport"] == "IB"       # only NCCL's own verbs transport prints that completion WARN


def test_completion_warn_of_an_external_plugin_is_not_builtin_ib():
    r = analyze_text("node01:1:9 [0] ib_plugin.c:900 NCCL WARN NET/IB : Got completion with error 12, opcode 0\n")
    assert r["net_transport"] is None


def test_ibv_wc_status_name_of_2_30_is_decoded():
    r = analyze_text("[2026-09-09 10:46:33] ubuntu2:319733:319761 [1] transport/net_ib/p2p.cc:648 NCCL WARN NET/IB: Got "
                     "completion from peer 10.0.0.3<52743> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) "
                     "vendor_err=129\n"
                     "[2026-09-09 10:46:33] ubuntu2:319733:319761 [1] transport/net_ib/p2p.cc:783 NCCL WARN NET/IB: "
                     "ncclIbTest: Got CQE with error (devIndex=0, req=0x7fccfc04e028, wr_id=0, qp_num=26257)\n")
    assert [e["category"] for e in r["errors"]] == ["completion", "completion"]
    assert "RETRY_EXC" in r["errors"][0]["meaning"]
    assert r["per_host"]["ubuntu2:319733"]["net_transport"] == "IB"


def test_ras_warn_is_not_a_bootstrap_failure():
    r = analyze_text("ubuntu2:321049:321049 [0] ras/client_support.cc:181 NCCL WARN Call to bind failed: Address already in use\n")
    assert r["errors"][0]["category"] == "RAS"


def test_truncated_host_names_still_group_by_process():
    r = analyze_text("...-48:34050:34121 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error\n"
                     "...-48:34052:34141 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error\n")
    assert sorted(r["per_host"]) == ["...-48:34050", "...-48:34052"]
    assert r["errors"][0]["text"] == "transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error"
    assert r["errors"][0]["count"] == 2


def test_cloudwatch_console_column_and_repeated_message_are_dropped():
    r = analyze_text("\n".join([
        "  | 2025-05-16T16:39:51.208-07:00 | ip-10-36-29-253:79:79 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
        "  | 2025-05-16T16:39:51.208-07:00ip-10-36-29-253:79:79 [0] NCCL INFO Bootstrap : Using eth0:10.36.29.253<0> | "
        "ip-10-36-29-253:79:79 [0] NCCL INFO Bootstrap : Using eth0:10.36.29.253<0>",
        "  | 2025-05-16T16:39:51.208-07:00 | NCCL version 2.21.5+cuda12.8",
    ]))
    assert r["hosts"] == ["ip-10-36-29-253"]
    assert r["machines"] == 1
    assert r["nccl_version"] == "2.21.5"
    assert r["env"] == {"NCCL_SOCKET_IFNAME": "eth0"}


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


def test_a_malformed_address_is_not_another_machine():
    r = analyze_text("xxx:16090:16180 [0] NCCL INFO Bootstrap : Using [0]ib0:10.10.10..2<0> [1]ib1:10.11.10.2<0>\n"
                     "xxx:16092:16181 [1] NCCL INFO Bootstrap : Using [0]ib0:10.10.10.2<0> [1]ib1:10.11.10.2<0>\n")
    assert r["machines"] == 1
    assert r["multi_node"] is not True


def test_ib_devices_listed_one_per_line_by_nccl_2_3():
    r = analyze_text("n1:4:4 [0] NCCL INFO NET/IB: [0] mlx5_1:1/IB\nn1:4:4 [0] NCCL INFO NET/IB: [1] mlx5_3:1/RoCE\n"
                     "n1:4:4 [0] NCCL INFO Using internal Network IB\n")
    assert r["ib_devices"] == [{"name": "mlx5_1", "port": 1, "link_layer": "IB"},
                               {"name": "mlx5_3", "port": 1, "link_layer": "RoCE"}]
    assert r["net_transport"] == "IB"


def test_warn_after_a_bare_device_tag_keeps_its_source_location():
    r = analyze_text("[5] misc/ibvwrap.cc:173 NCCL WARN lib wrapper not initialized.\n")
    assert [e["text"] for e in r["errors"]] == ["misc/ibvwrap.cc:173 NCCL WARN lib wrapper not initialized."]


def test_messages_without_any_nccl_prefix_are_read():
    r = analyze_text("\n".join([
        "NET/IB : Using [0]ibp0:1/IB/SHARP [1]ibp1:1/IB/SHARP [RO]; OOB eth0:10.7.147.73<0>",
        "P2P plugin IBext_v8",
        "Using network IBext_v8",
        "Using network settings from the launcher config file",      # an application's words, not NCCL's: ignored
    ]))
    assert [d["name"] for d in r["ib_devices"]] == ["ibp0", "ibp1"]
    assert r["net_transport"] == "plugin:IBext_v8"


def test_an_application_line_is_not_mistaken_for_nccl():
    r = analyze_text("Using PyTorch network helpers\nChannel 5 is ready\n")
    assert r["net_transport"] is None and r["intra_node"] == []


def test_ray_deduplication_suffix_is_dropped():
    r = analyze_text("(RayWorkerWrapper pid=539) vllm-0:539:539 [6] NCCL INFO NCCL_CUMEM_ENABLE set by environment to 0. "
                     "[repeated 15x across cluster]\n")
    assert r["env"] == {"NCCL_CUMEM_ENABLE": "0"}


@pytest.mark.parametrize("nodes, expected", [(1, False), (2, True)])
def test_node_count_of_a_communicator_decides_multi_node(nodes, expected):
    r = analyze_text("vllm-0:539:539 [6] NCCL INFO comm 0x2fa81fa0 rank 6 nRanks 8 nNodes %d localRanks 8 localRank 6 MNNVL 0\n"
                     % nodes)
    assert r["multi_node"] is expected
    assert r["ranks"] == 8


def test_nccl_lines_joined_on_one_line_are_split():
    a = "VM-1:11983:12550 [5] NCCL INFO Channel 00/0 : 5[5] -> 6[6] via P2P/IPC"
    b = "VM-1:11981:12552 [3] NCCL INFO Channel 00/0 : 8[0] -> 3[3] [receive] via NET/IBext/0/GDRDMA"
    r = analyze_text(a + " " * 40 + b + "\n")
    assert sorted(r["per_host"]) == ["VM-1:11981", "VM-1:11983"]
    assert r["intra_node"] == ["P2P/IPC"]
    assert r["net_transport"] == "plugin:IBext"


def test_nvls_disabled_by_environment_is_false_without_nvls_connections():
    line = "n1:1:1 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.\n"
    assert analyze_text(line)["nvls"] is False
    assert analyze_text(line + "n1:1:1 [0] NCCL INFO NVLS comm 0x55 headRank 0 nHeads 4\n")["nvls"] is True


@pytest.mark.parametrize("frame, transport", [("transport/net_ib.cc:1047", "IB"), ("transport/net_socket.cc:331", "Socket")])
def test_return_codes_from_nccl_network_code_show_the_transport(frame, transport):
    r = analyze_text("n1:5:7 [3] NCCL INFO %s -> 2\nn1:5:7 [3] NCCL INFO transport/net.cc:687 -> 2\n" % frame)
    assert r["net_transport"] == transport


def test_a_network_choice_outranks_return_code_evidence():
    r = analyze_text("n1:5:7 [3] NCCL INFO transport/net_ib.cc:282 -> 2\nn1:5:7 [3] NCCL INFO Using network Socket\n")
    assert r["net_transport"] == "Socket"


def test_newer_ofi_plugin_name_is_not_guessed():
    old = "n1:1:1 [0] NCCL INFO NET/OFI Selected Provider is tcp;ofi_rxm\n"
    new = old + "n1:1:1 [0] NCCL INFO NET/OFI Using transport protocol SENDRECV\n"
    assert analyze_text(old)["net_transport"] == "plugin:AWS Libfabric"
    r = analyze_text(new)
    assert r["net_transport"] is None
    assert r["fallback_to_socket"] is False


def test_local_ranks_alone_do_not_prove_a_single_node():
    r = analyze_text("worker-0:5:6 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
                     "worker-0:7:8 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM\n")
    assert r["multi_node"] is None


def test_network_name_of_several_words_is_kept_as_printed():
    r = analyze_text("n1:1:1 [0] NCCL INFO Using network NCCL RDMA Plugin v6\n")
    assert r["net_transport"] == "plugin:NCCL RDMA Plugin v6"


def test_warn_location_may_be_a_plugin_cxx_signature():
    r = analyze_text("[0] tcpxResult_t tcpxCommProgress(tcpxComm*):1231 NCCL WARN 0xadca:0xadcb, nic 0, enp12s0 rx ctrl timeout\n")
    assert r["errors"][0]["text"].startswith("tcpxResult_t tcpxCommProgress(tcpxComm*):1231 NCCL WARN ")


def test_socket_with_a_routable_interface_besides_loopback_is_not_flagged():
    both = analyze_text("n1:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0> [1]eth0:172.17.0.2<0>\n"
                        "n1:1:1 [0] NCCL INFO Using network Socket\n")
    only = analyze_text("n1:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>\nn1:1:1 [0] NCCL INFO Using network Socket\n")
    assert not [e for e in both["errors"] if e["category"] == "socket on loopback"]
    assert [e["category"] for e in only["errors"]] == ["socket on loopback"]


def test_nvls_heads_are_capacity_not_use():
    # graph/connect.cc prints the NVLS topology whenever NVLS is supported, before any algorithm is chosen
    r = analyze_text("n1:1:1 [0] NCCL INFO NVLS Head  0:  0  8 16\n")
    assert r["nvls"] is None and r["intra_node"] == []


def test_socket_thread_count_line_is_not_the_socket_choice():
    r = analyze_text("n1:1:1 [0] NCCL INFO NET/Socket: Using 2 threads and 8 sockets per thread\n")
    assert r["net_transport"] is None and r["fallback_to_socket"] is None


@pytest.mark.parametrize("text, category", [
    ("proxy.cc:1119 NCCL WARN [Proxy Service 9] Failed to execute operation Connect from rank 9, retcode 6", "proxy"),
    ("graph/connect.cc:123 NCCL WARN Error : ring 0 does not loop back to start (5 != 0)", "topology"),
])
def test_proxy_and_ring_warns_are_classified(text, category):
    assert analyze_text("n1:1:1 [0] " + text + "\n")["errors"][0]["category"] == category


def test_return_code_frames_with_trailing_text_join_the_chain():
    r = analyze_text("\n".join("n1:5:5 [0] NCCL INFO %s" % f for f in (
        "misc/socket.cc:100 -> 2 (Connection refused)", "misc/socket.cc:607 -> 2 socketWait(...)",
        "bootstrap.cc:868 -> 2 ncclSocketConnect()")) + "\n")
    assert [e["text"] for e in r["errors"]] == ["misc/socket.cc:100 -> 2 ... bootstrap.cc:868 -> 2"]


def test_pytorch_what_line_is_a_framework_error():
    r = analyze_text("  what():  NCCL error: unhandled system error, NCCL version 2.14.3\n")
    assert [e["text"] for e in r["errors"]] == ["NCCL error: unhandled system error, NCCL version 2.14.3"]


@pytest.mark.parametrize("text, category", [
    ("misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-ab12 to 9637892 bytes", "shared memory"),
    ("transport/net_ib.cc:93 NCCL WARN NET/IB : mlx5_0:1 Got async event : client reregistration", "IB event"),
    ("transport/net_ib.cc:93 NCCL WARN NET/IB : mlx5_0:1 Got async event : GID table change", "IB event"),
    ("proxy.cc:1485 NCCL WARN [Service thread] Error encountered progressing operation=Connect, res=3, closing connection",
     "proxy"),
])
def test_more_warns_are_classified(text, category):
    assert analyze_text("n1:1:1 [0] " + text + "\n")["errors"][0]["category"] == category


def test_an_application_using_network_line_is_not_a_selection():
    r = analyze_text("n1:1:1 [0] NCCL INFO Using network IB\nUsing network interface eth0\n")
    assert r["net_transport"] == "IB" and r["mismatch"] is False


@pytest.mark.parametrize("wrap", ["[2024-01-01 10:00:00] ", "0: ", "2025-05-16T16:39:51.208Z ", "\x1b[32m"])
def test_bare_messages_are_read_after_wrappers_are_removed(wrap):
    r = analyze_text(wrap + "NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n")
    assert [d["name"] for d in r["ib_devices"]] == ["mlx5_0"]


@pytest.mark.parametrize("line", [
    "x " * 32000 + "NCCL WARN foo",
    "node01:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0" + "/x" * 40 + " y",
    "node01:1:1 [0] NCCL INFO Channel 00 : 0 -> 1 via NET" + " " * 60000 + "x",
    "node01:1:1 [0] NCCL INFO NET/IB : Dev 0 Port 1 qpn 58 mtu 3 GID 3 (1FFFFFFFFFFFFFFFFF/0)",
    "node01:1:1 [0] NCCL INFO NCCL version " + "9" * 5000 + ".1.1",
    "node01:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 3000000000 cudaDev 0 busId 1000 - Init START",
])
def test_hostile_lines_are_analysed_quickly_and_never_raise(line):
    # Each of these took minutes (backtracking), memory (range of nranks) or raised before; now well under a second.
    r = analyze_text(line + "\n")
    assert r["lines"] == 1
    assert NcclLogAnalyzer().feed_lines([line]).parse_errors == 0


def test_a_bare_carriage_return_does_not_split_a_line():
    r = analyze_text("step 1/10\rstep 2/10\rnode01:1:1 [0] NCCL INFO Using network IB\n"
                     "node01:1:1 [0] misc/socket.cc:50 NCCL WARN socket connect failed\n")
    assert r["lines"] == 2 and r["errors"][0]["line"] == 2


def test_ray_suffixed_connection_lines_count_the_same_in_every_path(tmp_path):
    p = "node01:1:1 [0] NCCL INFO "
    log = "".join([p + "Channel 0%d/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n" % i for i in range(2)] +
                  [p + "Channel 05/0 : 0[0] -> 1[0] [send] via NET/IB/0 [repeated 3x across cluster]\n"] * 3)
    path = tmp_path / "ray.log"
    path.write_text(log)
    want = analyze_text(log)["net_transport"]
    assert want == "IB"
    assert analyze_file(str(path))["net_transport"] == want
    assert analyze_file(str(path), use_grep=False)["net_transport"] == want


def test_connection_evidence_quotes_the_whole_line_with_its_host():
    hop = "node07:4242:4300 [3] NCCL INFO Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/1/GDRDMA"
    p2p = "node07:4242:4300 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC/read"
    r = analyze_text(hop + "\n" + p2p + "\n")
    assert r["evidence"]["hop"] == [{"line": 1, "text": hop}]
    assert r["evidence"]["gdr"] == [{"line": 1, "text": hop}]
    assert r["evidence"]["intra"] == [{"line": 2, "text": p2p}]


def test_hpcx_plugin_v8_wording_names_the_plugin_after_its_api_version():
    # nccl-rdma-sharp-plugins print "P2P plugin v%d %s" from v8 on, "P2P plugin %s" before.
    assert analyze_text("h:1:2 [0] NCCL INFO P2P plugin v10 IBext_v10\n")["plugin"]["p2p_name"] == "IBext_v10"
    assert analyze_text("h:1:2 [0] NCCL INFO P2P plugin IBext\n")["plugin"]["p2p_name"] == "IBext"


def test_rccl_communicator_tail_is_not_part_of_the_transport():
    r = analyze_text("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC comm 0x5609976f9470 nRanks 32\n"
                     "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 9[1] [send] via NET/IB/0/GDRDMA comm 0x5609976f9470 nRanks 32\n")
    assert r["intra_node"] == ["P2P/IPC"]
    assert r["net_transport"] == "IB" and r["gdr"] is True


def test_network_hop_to_an_unseen_rank_is_another_node_only_beside_p2p_or_shm_hops():
    hop = "h:1:2 [0] NCCL INFO Channel 00/0 : 9[2000] -> 0[1000] [receive] via NET/IB/0/GDRDMA\n"
    p2p = "h:1:2 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[3000] via P2P/IPC/read\n"
    assert analyze_text(hop)["multi_node"] is None      # NCCL may loop through the NIC inside one node
    assert analyze_text(p2p + hop)["multi_node"] is True
    for name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"):
        assert analyze_text("h:1:2 [0] NCCL INFO %s set by environment to 1.\n" % name + p2p + hop)["multi_node"] is None


def test_network_hop_between_gpus_with_the_same_id_is_between_nodes():
    log = ("h:1:2 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n"
           "h:1:2 [7] NCCL INFO Channel 03/0 : 47[7] -> 39[7] [receive] via NET/IBext_v8/2\n")
    assert analyze_text(log)["multi_node"] is True
    assert analyze_text(log.replace("47[7]", "47[6]"))["multi_node"] is None


def test_two_processes_written_into_one_line_do_not_make_a_second_host():
    r = analyze_text("g183:1:2 [0] NCCL INFO Using network IB\ng183:1:2g183:5:6 [1] NCCL INFO Connected NVLS tree\n")
    assert r["hosts"] == ["g183"] and r["machines"] == 1 and r["multi_node"] is None
    # a host name that starts with digits keeps them unless the rest is a host already seen
    r = analyze_text("a:5:66010-0-1-5:7:8 [0] NCCL INFO Using network IB\n")
    assert r["hosts"] == ["66010-0-1-5"]


def test_glued_host_and_pid_that_two_processes_share_are_attributed_to_neither():
    r = analyze_text("node1:23:5 [0] NCCL INFO Using network IB\nnode12:3:5 [0] NCCL INFO Using network IB\n"
                     "node123:5 [0] NCCL INFO Using network Socket\n")
    assert r["per_host"]["node1:23"]["net_transport"] == "IB" and r["per_host"]["node12:3"]["net_transport"] == "IB"


def test_same_gpu_id_rule_ignores_one_node_communicators():
    hop = "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"
    log = ("h1:100:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n"
           "h1:200:1 [0] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0\n"
           "h1:100:1 [0] " + hop)
    assert analyze_text(log)["multi_node"] is False


def test_gdr_is_decided_by_the_connection_lines_not_by_topology_lines_about_other_gpus():
    r = analyze_text("h:1:2 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 1 / HCA 0 (distance 3 <= 4), read 0 mode Default\n"
                     "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0\n")
    assert r["gdr"] is False
    mixed = analyze_text("h:1:2 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 1b000 / HCA 0 (distance 3 <= 4), read 0\n"
                         "h:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 1b000 / HCA 1 (distance 9 > 4)\n")
    assert mixed["gdr"] is None
    own = ("h:1:2 [0] NCCL INFO comm 0x1 rank 3 nranks 8 cudaDev 0 busId 1b000 - Init COMPLETE\n"
           "h:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for GPU/0-1b000 (rank 3) - NET/0-0 (distance 7 > 4)\n"
           "h:1:2 [0] NCCL INFO GPU Direct RDMA Enabled for GPU/0-3b000 (rank 5) - NET/0-0 (distance 3 <= 4, read 1, mode Default)\n")
    assert analyze_text(own)["gdr"] is False


def test_hpcx_plugin_gdr_mode_lines_and_dma_buf_beside_a_bare_disabled_line():
    r = analyze_text("h:1:2 [0] NCCL INFO NET/IBext_v9 : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
                     "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0'\n")
    assert r["gdr"] is True
    r = analyze_text("h:1:2 [0] NCCL INFO NET/IBext_v9 : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
                     + "h:1:2 [0] NCCL INFO DMA-BUF is available on GPU device 0\n" * 8)
    assert r["gdr"] is None and len(r["evidence"]["gdr"]) == 1


def test_prefix_with_a_blank_before_the_first_colon_or_a_lost_colon_keeps_its_process():
    r = analyze_text("NAME :70918:70927 [0] NCCL INFO misc/socket.cc:752 -> 6\n"
                     "NAME:70918:70927 [0] NCCL INFO misc/socket.cc:428 -> 6\n"
                     "host:22337:22400 [6] NCCL INFO Using network IB\n"
                     "host22337:22400 [6] NCCL INFO proxy.cc:859 -> 6\n"
                     "host:22337:22400 [6] NCCL INFO init.cc:784 -> 6\n")
    assert sorted(e["text"] for e in r["errors"]) == ["misc/socket.cc:752 -> 6 ... misc/socket.cc:428 -> 6",
                                                      "proxy.cc:859 -> 6 ... init.cc:784 -> 6"]
    assert r["processes"] == 2


def test_frames_without_a_process_prefix_chain_only_on_consecutive_lines():
    frames = " [0] NCCL INFO proxy.cc:859 -> 6\n [1] NCCL INFO init.cc:784 -> 6\n"
    assert [e["text"] for e in analyze_text(frames)["errors"]] == ["proxy.cc:859 -> 6 ... init.cc:784 -> 6"]
    apart = " [0] NCCL INFO proxy.cc:859 -> 6\nunrelated\n [1] NCCL INFO init.cc:784 -> 6\n"
    assert analyze_text(apart)["errors"] == []


def test_socket_warn_under_the_proxy_or_network_transport_is_not_bootstrap():
    warn = "h:1:9 [0] misc/socket.cc:521 NCCL WARN Net : Connection closed by remote peer 10.0.0.2<53422>\n"
    under_proxy = warn + "h:1:9 [0] NCCL INFO misc/socket.cc:529 -> 6\nh:1:9 [0] NCCL INFO proxy.cc:859 -> 6\n"
    in_bootstrap = warn + "h:1:9 [0] NCCL INFO misc/socket.cc:529 -> 6\nh:1:9 [0] NCCL INFO bootstrap.cc:300 -> 6\n"
    assert [e["category"] for e in analyze_text(under_proxy)["errors"] if "WARN" in e["text"]] == ["proxy"]
    assert [e["category"] for e in analyze_text(in_bootstrap)["errors"] if "WARN" in e["text"]] == ["bootstrap"]


@pytest.mark.parametrize("text, words", [
    ("bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 1 of 8 ranks has already checked in", "same rank"),
    ("bootstrap.cc:140 NCCL WARN Bootstrap Root : mismatch in rank count from procs 8 : 16", "number of ranks"),
])
def test_bootstrap_root_warnings_say_what_went_wrong(text, words):
    category, meaning = classify_error(text)
    assert category == "bootstrap" and words in meaning


def test_a_network_nccl_does_not_build_in_names_the_plugin_when_no_loader_line_survived():
    r = analyze_text("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] [send] via NET/FastSocket/0\n")
    assert r["plugin"] == {"name": "FastSocket", "loaded": True, "usable": True}
    assert analyze_text("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] [send] via NET/IB/0\n")["plugin"] is None


def test_aws_ofi_nccl_1_13_provider_line_with_its_fabric():
    r = analyze_text("h:1:2 [0] NCCL INFO NET/OFI Selected provider is tcp, fabric is 10.0.0.0/24 (found 1 nics)\n"
                     "h:1:2 [0] NCCL INFO Using network AWS Libfabric\n")
    assert r["plugin_provider"] == "tcp"
    efa = analyze_text("h:1:2 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n")
    assert efa["plugin_provider"] == "efa"


def test_nccl_2_3_external_network_is_a_plugin():
    assert analyze_text("h:1:2 [0] NCCL INFO Using external Network AWS Libfabric\n")["net_transport"] == "plugin:AWS Libfabric"


def test_nccl_2_3_ib_probe_that_found_no_device_is_a_fallback():
    r = analyze_text("NCCL version 2.3.7+cuda10.0\nh:1:2 [0] NCCL INFO Net/IB: call to devices() returned 0 devices.\n"
                     "h:1:2 [0] NCCL INFO Using internal Network Socket\n")
    assert r["net_transport"] == "Socket" and r["fallback_to_socket"] is True


@pytest.mark.parametrize("line, gdr", [
    ("NET/IB : GPU Direct RDMA Disabled for GPU 0 / HCA mlx5_0 (no module or not supported by GPU)", False),
    ("NET/IB : GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 4 >= 2)", False),
    ("NET/IB : GPU Direct RDMA Enabled for GPU 0[0] / HCA 0 (distance 2 < 3), read 0", True),
    ("GPU Direct RDMA Enabled for GPU 81000 / HCA 0 (distance 4 <= 5), read 0", True),
    ("GPU Direct RDMA Disabled for GPU 81000 / HCA 0 (distance 9 > 5)", False),
    ("GPU Direct RDMA Enabled for GPU 0 / HCA 0 (distance 4 <= 5), read 1 mode Default", True),
    ("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)", False),
])
def test_gpu_direct_rdma_verdicts_of_every_release(line, gdr):
    assert analyze_text("h:1:2 [0] NCCL INFO %s\n" % line)["gdr"] is gdr


def test_no_module_is_not_gdr_off_when_dma_buf_is_available():
    r = analyze_text("h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)\n"
                     "h:1:2 [0] NCCL INFO DMA-BUF is available on GPU device 0\n")
    assert r["gdr"] is None


@pytest.mark.parametrize("devices, want", [
    ("[0]mlx5_0:1:0/IB [1]mlx5_1:1:1/IB [RO]", [("mlx5_0", 1, "IB"), ("mlx5_1", 1, "IB")]),
    ("[0]mlx5_0:1::0/RoCE [1]mlx5_1:1::1/RoCE [RO]", [("mlx5_0", 1, "RoCE"), ("mlx5_1", 1, "RoCE")]),
    ("[0]mlx5_0:1:3:0/IB", [("mlx5_0", 1, "IB")]),
])
def test_ib_device_lists_with_rail_and_plane_fields(devices, want):
    r = analyze_text("h:1:2 [0] NCCL INFO NET/IB : Using %s; OOB eth0:10.0.0.1<0>\n" % devices)
    assert [(d["name"], d["port"], d["link_layer"]) for d in r["ib_devices"]] == want
    assert r["net_transport"] == "IB"


def test_per_device_trace_names_the_hca_not_its_uverbs_device():
    r = analyze_text("h:1:2 [0] NCCL INFO NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000 context=0x55d0 "
                     "pciPath=/sys/devices/pci0000:00/0000:00:01.0 ar=1 oooRqSize=0\n")
    assert [(d["name"], d["port"], d["link_layer"]) for d in r["ib_devices"]] == [("mlx5_0", 1, "IB")]


def test_a_ring_list_cut_by_nccl_is_not_the_communicator_size():
    cut = analyze_text("h:1:2 [0] NCCL INFO Channel 00/02 :" + "".join(" %3d" % i for i in range(28)) + "\n")
    assert cut["ranks"] is None
    whole = analyze_text("h:1:2 [0] NCCL INFO Channel 00/02 :" + "".join(" %3d" % i for i in range(8)) + "\n")
    assert whole["ranks"] == 8


@pytest.mark.parametrize("name, transport, fallback", [("IB", "IB", False), ("Socket", "Socket", True)])
def test_nccl_2_4_nic_distance_line_names_the_network(name, transport, fallback):
    log = "NCCL version 2.4.8+cuda10.1\n"
    if name == "Socket":
        log += "h:1:2 [0] NCCL INFO NET/IB : No device found.\n"
    log += "h:1:2 [0] NCCL INFO CUDA Dev 0[0], %s NIC distance :  PIX\n" % name
    r = analyze_text(log)
    assert r["net_transport"] == transport and r["fallback_to_socket"] is fallback


def test_no_transport_found_is_a_topology_error():
    category, meaning = classify_error("transport.cc:174 NCCL WARN No transport found for rank 0[1000] -> rank 1[2000]")
    assert category == "topology" and "no transport" in meaning.lower()


def test_rccl_version_banner():
    assert analyze_text("RCCL version : 2.21.5-HEAD:9a0e6a1\n")["nccl_version"] == "2.21.5"
    assert analyze_text("node [0] NCCL INFO RCCL version : 2.27.7-HEAD:29e1567\n")["nccl_version"] == "2.27.7"


@pytest.mark.parametrize("line, signal", [
    ("[rtptest1621:405884] *** Process received signal ***", None),
    ("[gpu7:1234:0:1240] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)", "11"),
])
def test_a_crashed_process_is_an_error(line, signal):
    errors = analyze_text(line + "\n")["errors"]
    assert [(e["text"], e["category"]) for e in errors] == [(line, "system")]
    assert ("signal %s" % signal in errors[0]["meaning"]) if signal else "crashed" in errors[0]["meaning"]


def test_a_plugin_the_loader_refused_is_an_error_but_a_missing_one_is_not():
    refused = ("h:1:2 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : /usr/lib/libnccl-net.so: version `GLIBC_2.32' "
               "not found (required by /usr/lib/libnccl-net.so) : when loading libnccl-net.so\n")
    errors = analyze_text(refused)["errors"]
    assert [e["category"] for e in errors] == ["plugin load"] and "GLIBC_2.32" in errors[0]["text"]
    assert "dynamic loader" in errors[0]["meaning"]
    missing = ("h:1:2 [0] NCCL INFO NET/Plugin : Plugin load returned 2 : libnccl-net.so: cannot open shared object "
               "file: No such file or directory.\n")
    assert analyze_text(missing)["errors"] == []


@pytest.mark.parametrize("text, category, words", [
    ("net.cc:579 NCCL WARN Error: network gIB not found.", "plugin load", "NCCL_NET"),
    ('init.cc:100 NCCL WARN Missing "iommu=pt" from kernel command line which can lead to system instablity or hang!',
     "system", "iommu=pt"),
    ("cudawrap.cc:179 NCCL WARN Failed to find CUDA library libcuda.so (NCCL_CUDA_PATH='')", "system", "libcuda.so"),
])
def test_host_and_plugin_setup_warnings_say_what_to_fix(text, category, words):
    got_category, meaning = classify_error(text)
    assert got_category == category and words in meaning


@pytest.mark.parametrize("wrapper", ["node01: ", "10.3.35.83: "])
def test_pdsh_style_host_wrapper_is_removed_from_nccl_tests_lines(wrapper):
    r = analyze_text(wrapper + "#  Rank  0 Group  0 Pid     42 on ip-10-3-60-129 device  0 [0x53] NVIDIA H100\n"
                     + wrapper + "#  Rank 15 Group  0 Pid     42 on ip-10-3-60-130 device  7 [0xca] NVIDIA H100\n")
    assert r["multi_node"] is True and r["machines"] == 2


def test_return_code_chains_of_threads_of_one_process_do_not_mix():
    log = ("h:1:10 [0] NCCL INFO transport/net.cc:100 -> 2\n"
           "h:1:11 [1] NCCL INFO misc/socket.cc:50 -> 6\n"
           "h:1:10 [0] NCCL INFO init.cc:200 -> 2\n"
           "h:1:11 [1] NCCL INFO proxy.cc:70 -> 6\n"
           "h:1:10 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
           "h:1:11 [1] NCCL INFO group.cc:80 -> 6\n")
    assert sorted(e["text"] for e in analyze_text(log)["errors"]) == [
        "misc/socket.cc:50 -> 6 ... group.cc:80 -> 6", "transport/net.cc:100 -> 2 ... init.cc:200 -> 2"]


def test_a_chain_passes_to_another_thread_on_the_next_line():
    log = ("h:1:10 [0] NCCL INFO transport/net_ib.cc:900 -> 6\n"
           "h:1:10 [0] NCCL INFO transport/net.cc:901 -> 6\n"
           "h:1:11 [0] NCCL INFO transport/net.cc:450 -> 6\n"
           "h:1:11 [0] NCCL INFO group.cc:133 -> 6\n")
    assert [e["text"] for e in analyze_text(log)["errors"]] == ["transport/net_ib.cc:900 -> 6 ... group.cc:133 -> 6"]


def test_framework_error_is_classified_by_the_last_error_on_its_line():
    line = ("terminate called after throwing an instance of 'std::runtime_error' what(): NCCL error: remote process exited "
            "or there was a network error, NCCL version 2.14.3 ncclRemoteError: A call failed. Last error: NET/IB : Got "
            "completion from peer 10.0.0.2<39138> with error 12, opcode 0, len 0, vendor err 129\n")
    (entry,) = analyze_text(line)["errors"]
    assert entry["category"] == "completion" and "RETRY_EXC" in entry["meaning"]


def test_framework_error_without_a_cause_explains_the_nccl_result():
    (entry,) = analyze_text("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, remote process exited "
                            "or there was a network error, NCCL version 2.21.5\n")["errors"]
    assert entry["category"] == "framework" and entry["meaning"].startswith("ncclRemoteError")


def test_old_pytorch_version_code_is_decoded():
    r = analyze_text("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:975, internal error, NCCL version 21.1.4\n")
    assert r["nccl_version"] == "2.11.4"


def test_ofi_plugin_disabling_gdr_is_gdr_off():
    r = analyze_text("h:1:2 [0] NCCL INFO NET/OFI Could not disable CUDA API usage for HMEM, disabling GDR\n")
    assert r["gdr"] is False


@pytest.mark.parametrize("text, words", [
    ("bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 130)", "out of memory"),
    ("misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported",
     "NCCL_DMABUF_ENABLE=0"),
    ("include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'", "ran out of memory"),
    ("enqueue.cc:47 NCCL WARN Cuda failure 'no kernel image is available for execution on the device'", "architecture"),
    ("include/alloc.h:112 NCCL WARN Cuda failure 999 'unknown error'", "failed state"),
    ("socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.10.1.3<36138>", "exited or crashed"),
])
def test_warn_meanings_name_the_likely_cause(text, words):
    assert words in classify_error(text)[1]


def test_socket_transport_data_path_warn_shows_sockets_carried_the_data():
    r = analyze_text("w-23:83:2526 [0] transport/net_socket.cc:219 NCCL WARN NET/Socket : socket progress error\n")
    assert r["net_transport"] == "Socket"
    assert [e["category"] for e in r["errors"]] == ["proxy"]


def test_network_hops_of_lines_without_a_process_prefix_are_not_nic_loopback():
    r = analyze_text(" [1] NCCL INFO Ring 00 : 1[23000] -> 8[1e000] [send] via NET/IB/1/GDRDMA\n"
                     " [0] NCCL INFO Ring 00 : 8[1e000] -> 1[23000] [receive] via NET/IB/1/GDRDMA\n")
    assert r["intra_node"] == []


def test_masked_prefix_is_read_without_a_process():
    r = analyze_text("hostname:portnum [0] INFO Using internal Network Socket\n")
    assert r["net_transport"] == "Socket" and r["hosts"] == []


def test_clipped_host_with_a_known_pid_and_glued_write_keep_their_host():
    clipped = ("[15]worker-23:83:2526 [0] NCCL INFO NET/IB : No device found.\n"
               "[15]23:83:2526 [0] NCCL INFO Using network Socket\n")
    assert analyze_text(clipped)["hosts"] == ["worker-23"]
    glued = ("lax-vllm-0:273:273 [3] NCCL INFO Bootstrap : Using eth0:10.130.6.121<0>\n"
             "lax-vllm-0:271:402 [1] NCCL INFO comm 0x2619e050 rank 1 nranks 4 cudaDev 1 nvmlax-vllm-0:273:273 [3] "
             "NCCL INFO cudaDriverVersion 12040\n")
    r = analyze_text(glued)
    assert r["hosts"] == ["lax-vllm-0"] and r["machines"] == 1


def test_nccl_2_2_bootstrap_socket_warn_stays_bootstrap():
    log = ("node01:1:2 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out\n"
           "node01:1:2 [0] INFO transport/net_socket.cu:118 -> 2\n"
           "node01:1:2 [0] INFO bootstrap.cu:28 -> 2 [Net]\n")
    assert [e["category"] for e in analyze_text(log)["errors"] if "WARN" in e["text"]] == ["bootstrap"]


def test_socket_transport_without_an_interface_is_not_socket_data_path_evidence():
    r = analyze_text("h:1:2 [0] NCCL INFO NET/IB : No device found.\n"
                     "h:1:2 [0] transport/net_socket.cc:500 NCCL WARN NET/Socket : no interface found\n")
    assert r["net_transport"] is None and [e["category"] for e in r["errors"]] != ["proxy"]


def test_application_log_with_a_time_and_a_bracket_is_not_a_masked_nccl_prefix():
    assert analyze_text("10:15:32.123 [4412] WARN socket timeout while fetching data\n")["errors"] == []


def test_hosts_sharing_a_pid_are_not_merged_unless_the_prefix_looks_clipped():
    r = analyze_text("dgx-a100-1:1:1 [0] NCCL INFO Using network IB\na100-1:1:1 [0] NCCL INFO Using network Socket\n")
    assert r["processes"] == 2 and r["mismatch"]


def test_every_cuda_failure_gets_a_cuda_meaning():
    category, meaning = classify_error("enqueue.cc:10 NCCL WARN Cuda failure 'invalid device ordinal'")
    assert category == "system" and "CUDA" in meaning
