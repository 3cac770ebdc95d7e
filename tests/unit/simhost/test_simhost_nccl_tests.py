"""simhost nccl-tests stand-in (all_reduce_perf, all_gather_perf, alltoall_perf): NCCL's choices on simulated hosts,
its log lines, nccl-tests' table, and the product's analyser reading both the stand-in's output and real captures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures_path import real_fixtures
from simhost import fabric_model, kmod, profile, qos, tree
from simhost.tools import nccl_tests as nt
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import analyze_text, check_expectations

KIT = Path(__file__).resolve().parents[2] / "simhost"
CAPTURES = real_fixtures() / "perftest-nccl-tests"
ARGS = ["-b", "8M", "-e", "128M", "-f", "2", "-g", "1"]
HOSTS = ("node01", "node02")


@pytest.fixture(autouse=True)
def _persist(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))


def build_hosts(tmp_path, name, peermem=False, down=()):
    """Two simulated hosts of profile ``name`` (host_index 0 and 1); ``down``: (host index, hca) ports set DOWN."""
    roots = []
    for i in range(2):
        root = tmp_path / ("h%d" % i)
        tree.build_tree(profile.load(name), root, host_index=i)
        if peermem:
            kmod.load(root, "nvidia_peermem")
        for host, hca in down:
            if host == i:
                pdir = root / "class/infiniband" / hca / "ports/1"
                (pdir / "state").write_text("1: DOWN\n", encoding="utf-8")
                (pdir / "phys_state").write_text("3: Disabled\n", encoding="utf-8")
        roots.append(root)
    return roots


def states_of(roots, env=None, confs=None):
    """The rank state of each host (one rank per host), as each rank computes it."""
    out = []
    for i, root in enumerate(roots):
        e = {"NCCL_DEBUG": "INFO"}
        e.update(env or {})
        conf = (confs or {}).get(i, "")
        out.append(nt.rank_state(root, e, conf, HOSTS[i], 0, proc=i, pid=4100 + i,
                                 ifaces=[("lo", "127.0.0.1"), ("eth0", "172.18.0.%d" % (11 + i))]))
    return out


def run(roots, test="all_reduce_perf", args=None, env=None, confs=None):
    states = states_of(roots, env, confs)
    text, rc = nt.render_job(test, list(args or ARGS), states)
    return text, rc, analyze_text(text)


def by_host(result):
    return {v["host"]: v for v in result["per_host"].values()}


# ------------------------------------------------------------------------------------------------ the verdicts
def test_ib_healthy_with_peermem_reads_as_ib_with_gdr(tmp_path):
    text, rc, res = run(build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu", peermem=True))
    assert rc == 0
    assert "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:172.18.0.11<0>" in text
    assert "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA" in text
    assert res["net_transport"] == "IB" and res["gdr"] is True and res["fallback_to_socket"] is False
    assert res["multi_node"] is True and res["hosts"] == ["node01", "node02"]
    assert [(d["name"], d["link_layer"]) for d in res["ib_devices"]] == [("mlx5_0", "IB"), ("mlx5_1", "IB")]
    hosts = by_host(res)
    assert sorted(hosts) == ["node01", "node02"]
    assert all(h["net_transport"] == "IB" and h["gdr"] is True for h in hosts.values())
    assert check_expectations(res, expect_transport="IB", expect_link_layer="IB", expect_gdr=True,
                              expect_hcas=["mlx5_0", "mlx5_1"], forbid_fallback=True) == []
    assert res["errors"] == []
    # 2 x NDR 400 Gb/s per host, GPUDirect RDMA: 2 x 400 / 8 x 0.97 (link) x 0.92 (NCCL) at the largest size
    assert res["busbw"]["peak_busbw_gbps"] == pytest.approx(2 * 400 / 8 * 0.97 * 0.92, rel=0.02)


def test_roce_healthy_reads_as_ib_over_roce_with_the_v2_gid(tmp_path):
    roots = build_hosts(tmp_path, "cx7_roce_400g_2x")
    states = states_of(roots)
    assert [(n["hca"], n["gid_index"], n["gid_problem"]) for n in states[1]["nics"]] == [("mlx5_0", 3, None), ("mlx5_1", 3, None)]
    text, rc, res = run(roots, env={"NCCL_DEBUG_SUBSYS": "INIT,ENV,NET"})
    assert rc == 0
    assert "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:172.18.0.12<0>" in text
    assert res["net_transport"] == "IB" and res["fallback_to_socket"] is False
    assert {d["link_layer"] for d in res["ib_devices"]} == {"RoCE"}
    # no GPU driver marker on this profile: no GPUDirect RDMA
    assert res["gdr"] is False
    assert {(g["host"], g["hca"], g["gid_index"], g["kind"]) for g in res["gid"]} == {
        (h, hca, 3, "ipv4-mapped") for h in HOSTS for hca in ("mlx5_0", "mlx5_1")}
    assert check_expectations(res, expect_transport="IB", expect_link_layer="RoCE", expect_gdr=False,
                              forbid_fallback=True) == []


def _pfc(root, priorities):
    for netdev in qos.roce_netdevs(root):
        st = qos.load(netdev, root)
        qos.setpfc(st, sum(1 << p for p in priorities))
        qos.save(netdev, st, root)


def test_roce_busbw_follows_pfc_through_the_fabric_model(tmp_path):
    roots = build_hosts(tmp_path, "cx7_roce_400g_2x")
    for root in roots:
        _pfc(root, [0])         # trust pcp, untagged RoCE at ToS 0: priority 0
    _text, rc, res = run(roots)
    lossless = res["busbw"]["peak_busbw_gbps"]
    # 2 x 400 GbE, RoCE at MTU 4096 (0.96), no GDR on this profile (host staging)
    assert rc == 0 and lossless == pytest.approx(2 * 400 * 0.96 / 8 * fabric_model.NCCL_EFFICIENCY["host"], rel=0.02)
    _pfc(roots[1], [3])         # PFC off on the traffic's priority at one host: lossy RoCE
    _text, rc, res = run(roots)
    assert rc == 0 and res["net_transport"] == "IB"
    assert res["busbw"]["peak_busbw_gbps"] == pytest.approx(lossless * fabric_model.LOSSY_FRACTION / 0.96, rel=0.02)


def test_ib_to_roce_connection_is_refused_as_ncclss_connect_does(tmp_path):
    roots = []
    for i in range(2):
        root = tmp_path / ("h%d" % i)
        tree.build_tree(profile.load("mixed_ib_roce_down"), root, host_index=i)
        roots.append(root)
    states = states_of(roots)
    assert [(n["hca"], n["link_layer"]) for n in states[0]["nics"]] == [("mlx5_0", "InfiniBand"), ("mlx5_1", "Ethernet")]
    text, rc, res = run(roots, confs={1: "NCCL_IB_HCA=mlx5_1\n"})
    assert rc == nt.TEST_NCCL_ERROR
    assert ("node01:4100:4117 [0] transport/net_ib.cc:1151 NCCL WARN NET/IB : Remote RoCE device is incompatible with the "
            "local [0]mlx5_0:1/IB. Try selecting NICs of only one link type using NCCL_IB_HCA") in text
    assert "node01: Test NCCL failure common.cu:392 'internal error - please report this issue to the NCCL developers / '" in text
    assert {d["link_layer"] for d in res["ib_devices"]} == {"IB", "RoCE"}


def test_without_nvidia_peermem_ib_runs_without_gdr(tmp_path):
    text, rc, res = run(build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu"))
    assert rc == 0
    assert "via NET/IB/0\n" in text and "GDRDMA" not in text
    assert res["net_transport"] == "IB" and res["gdr"] is False
    assert all(h["gdr"] is False for h in by_host(res).values())
    findings = check_expectations(res, expect_transport="IB", expect_link_layer="IB", expect_gdr=True, forbid_fallback=True)
    assert len(findings) == 1 and "nvidia_peermem" in findings[0]
    # slower than with GPUDirect RDMA (data staged through host memory)
    assert res["busbw"]["peak_busbw_gbps"] == pytest.approx(2 * 400 / 8 * 0.97 * 0.70, rel=0.02)


def test_peermem_on_one_host_only_is_gdr_on_that_host_only(tmp_path):
    roots = build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu")
    kmod.load(roots[0], "nvidia_peermem")
    _text, _rc, res = run(roots)
    assert {h: v["gdr"] for h, v in by_host(res).items()} == {"node01": True, "node02": False}
    assert res["gdr"] is False


def test_ib_disable_falls_back_to_sockets_with_ncclss_lines(tmp_path):
    text, rc, res = run(build_hosts(tmp_path, "cx7_roce_400g_2x"), env={"NCCL_IB_DISABLE": "1"})
    assert rc == 0
    assert "node01:4100:4114 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n" in text
    assert "NCCL INFO NET/Socket : Using [0]eth0:172.18.0.11<0>\n" in text
    assert "NET/IB" not in text.replace("NCCL_IB_DISABLE", "")
    assert text.count("NCCL INFO Using network Socket\n") == 2
    assert res["net_transport"] == "Socket" and res["ib_disabled_by_env"] is True and res["ib_devices"] == []
    assert all(h["net_transport"] == "Socket" for h in by_host(res).values())
    findings = check_expectations(res, expect_transport="IB", forbid_fallback=True)
    assert any("NCCL_IB_DISABLE=1" in f for f in findings)
    assert res["busbw"]["peak_busbw_gbps"] < 2.0


def test_no_active_port_is_the_socket_fallback(tmp_path):
    roots = build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu", down=[(1, "mlx5_0"), (1, "mlx5_1")])
    text, rc, res = run(roots)
    assert rc == 0
    lines = [line for line in text.splitlines() if line.startswith("node02:")]
    i = next(k for k, line in enumerate(lines) if line.endswith("NCCL INFO NET/IB : No device found."))
    assert lines[i + 1].endswith("NCCL INFO NET/Socket : Using [0]eth0:172.18.0.12<0>")
    assert lines[i + 2].endswith("NCCL INFO Using network Socket")
    hosts = by_host(res)
    assert hosts["node02"]["net_transport"] == "Socket" and hosts["node01"]["net_transport"] == "IB"
    assert res["fallback_to_socket"] is True and res["mismatch"] is True


def test_ib_hca_naming_a_down_port(tmp_path):
    roots = build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu", peermem=True, down=[(1, "mlx5_1")])
    # only the down port: that host has no device and falls back to sockets
    text, rc, res = run(roots, env={"NCCL_IB_HCA": "mlx5_1"})
    assert "node02:4101:4115 [0] NCCL INFO NCCL_IB_HCA set to mlx5_1\n" in text
    assert "node02:4101:4115 [0] NCCL INFO NET/IB : No device found.\n" in text
    assert "node01:4100:4114 [0] NCCL INFO NET/IB : Using [0]mlx5_1:1/IB [RO]; OOB eth0:172.18.0.11<0>\n" in text
    hosts = by_host(res)
    assert (hosts["node01"]["net_transport"], hosts["node02"]["net_transport"]) == ("IB", "Socket")
    assert res["fallback_to_socket"] is True
    assert any("fell back to sockets" in f for f in check_expectations(res, expect_transport="IB", forbid_fallback=True))
    # a list with the down port in it: NCCL uses the other one; the expected-HCA check names the missing port
    text, rc, res = run(roots, env={"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"})
    assert rc == 0
    assert "node02:4101:4115 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:172.18.0.12<0>\n" in text
    assert by_host(res)["node02"]["ib_devices"] == [{"name": "mlx5_0", "port": 1, "link_layer": "IB"}]
    findings = check_expectations(res, expect_transport="IB", expect_hcas=["mlx5_0", "mlx5_1"])
    assert res["net_transport"] == "IB" and findings == []      # mlx5_1 is listed by node01
    assert len(by_host(res)["node01"]["ib_devices"]) == 2


def test_gid_index_of_a_link_local_gid_fails_the_job_on_both_ends(tmp_path):
    roots = build_hosts(tmp_path, "cx7_roce_400g_2x")
    # host 1's /etc/nccl.conf points at GID 0 (fe80::, RoCE v1); host 0 picks its RoCE v2 IPv4 GID itself
    text, rc, res = run(roots, env={"NCCL_DEBUG_SUBSYS": "INIT,ENV,NET"}, confs={1: "NCCL_IB_GID_INDEX=0\n"})
    assert rc == nt.TEST_NCCL_ERROR
    assert "node02:4101:4118 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 0.\n" in text
    assert "node01:4100:4118 [0] NCCL INFO NCCL_IB_GID_INDEX" not in text
    warns = [line for line in text.splitlines() if "NCCL WARN" in line]
    assert len(warns) == 2 and all("with status=12 " in w for w in warns)
    assert "localGid fe80::" in [w for w in warns if w.startswith("node02:")][0]
    assert "localGid ::ffff:10.0.1.11 remoteGidsfe80::" in [w for w in warns if w.startswith("node01:")][0]
    assert "node02: Test NCCL failure common.cu:392 'remote process exited or there was a network error / '\n" in text
    assert "# Avg bus bandwidth" not in text
    kinds = {(g["host"], g["kind"]) for g in res["gid"]}
    assert ("node02", "link-local") in kinds and ("node01", "ipv4-mapped") in kinds
    assert {e["category"] for e in res["errors"]} >= {"completion"}
    findings = check_expectations(res, expect_transport="IB", expect_link_layer="RoCE", sysfs_root=str(roots[1]))
    assert any(f.startswith("NCCL_IB_GID_INDEX=0 selects a link-local RoCE v1 GID") and "index 3" in f for f in findings)


def test_gid_index_of_a_roce_v1_gid_fails_too(tmp_path):
    _text, rc, res = run(build_hosts(tmp_path, "cx7_roce_400g_2x"), env={"NCCL_IB_GID_INDEX": "2"})
    assert rc == nt.TEST_NCCL_ERROR
    assert [e["category"] for e in res["errors"] if e["category"] == "completion"] == ["completion", "completion"]


def test_gid_index_of_an_empty_entry_fails_modify_qp_on_that_host(tmp_path):
    text, rc, res = run(build_hosts(tmp_path, "cx7_roce_400g_2x"), confs={0: "NCCL_IB_GID_INDEX = 7\n"})
    assert rc == nt.TEST_NCCL_ERROR
    warns = [line for line in text.splitlines() if "NCCL WARN" in line]
    assert warns == ["node01:4100:4117 [0] misc/ibvwrap.cc:309 NCCL WARN Call to ibv_modify_qp failed with 61 No data "
                     "available, on dev mlx5_0:1, curr state INIT, next state RTR, local GID index 7, local GID ::, "
                     "remote GID ::ffff:10.0.1.12"]
    assert "node01: Test NCCL failure common.cu:392 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '" in text
    assert "node02: Test NCCL failure" not in text
    assert any("ibv_modify_qp" in e["text"] and e.get("hosts") == ["node01"] for e in res["errors"])


def test_gid_index_on_ib_ports_is_ignored(tmp_path):
    _text, rc, res = run(build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu", peermem=True), env={"NCCL_IB_GID_INDEX": "5"})
    assert rc == 0 and res["net_transport"] == "IB" and res["errors"] == []


# ------------------------------------------------------------------------------------------------ the table and the analyser
def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_header_table_head_and_footer_are_the_captures_lines(tmp_path):
    text, _rc, _res = run(build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu", peermem=True),
                          args=["-b", "512M", "-e", "8G", "-f", "2", "-g", "1"])
    real = _lines(CAPTURES / "all_reduce_perf-multinode-01.txt")
    ours = text.splitlines()
    assert ours[0] == real[0].replace("maxBytes 8589934592", "maxBytes 8589934592")
    assert ours[1:3] == real[1:3]
    assert ours[3] == "#  Rank  0 Group  0 Pid   4100 on     node01 device  0 [0x19] NVIDIA H100 80GB HBM3"
    assert re.sub(r"Pid +\d+", "", ours[3]) == re.sub(r"Pid +\d+", "", real[3])
    head = [i for i, line in enumerate(ours) if line.startswith("#       size")][0]
    rhead = [i for i, line in enumerate(real) if line.startswith("#       size")][0]
    assert ours[head - 2:head + 2] == real[rhead - 2:rhead + 2]
    assert ours[-3] == "# Out of bounds values : 0 OK" == real[-3]
    assert re.fullmatch(r"# Avg bus bandwidth    : [0-9.]+ ", ours[-2]) and ours[-1] == "#"


def _row_layout(line):
    """Column end positions of a table row (the printf widths make them fixed)."""
    return [m.end() for m in re.finditer(r"\S+", line)]


def test_rows_have_the_captures_column_layout_and_the_analyser_reads_them_alike(tmp_path):
    text, _rc, res = run(build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu", peermem=True),
                         args=["-b", "512M", "-e", "8G", "-f", "2", "-g", "1"])
    real_text = (CAPTURES / "all_reduce_perf-multinode-01.txt").read_text(encoding="utf-8")
    real = analyze_text(real_text)
    ours_rows = [line for line in text.splitlines() if re.match(r"^\s+\d+\s+\d+\s+float", line)]
    real_rows = [line for line in real_text.splitlines() if re.match(r"^\s+\d+\s+\d+\s+float", line)]
    assert len(ours_rows) == len(real_rows) == 5
    for ours, theirs in zip(ours_rows, real_rows):
        assert _row_layout(ours) == _row_layout(theirs)
    assert [r["size"] for r in res["busbw"]["rows"]] == [r["size"] for r in real["busbw"]["rows"]]
    for ours, theirs in zip(res["busbw"]["rows"], real["busbw"]["rows"]):
        assert set(ours) == set(theirs)
        assert set(ours["out_of_place"]) == set(theirs["out_of_place"]) == {"time_us", "algbw_gbps", "busbw_gbps", "wrong"}
        assert ours["count"] == ours["size"] // 4 and ours["type"] == "float" and ours["redop"] == "sum"
    # the footer's average is the mean of every busbw printed (out-of-place and in-place), as in the capture
    for result in (res, real):
        vals = [r[s]["busbw_gbps"] for r in result["busbw"]["rows"] for s in ("out_of_place", "in_place")]
        assert result["busbw"]["avg_busbw_gbps"] == pytest.approx(sum(vals) / len(vals), abs=0.01)
    assert res["busbw"]["peak_busbw_gbps"] == max(r["in_place"]["busbw_gbps"] for r in res["busbw"]["rows"])


def test_all_gather_and_alltoall_counts_redop_and_factor(tmp_path):
    roots = build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu", peermem=True)
    for test in ("all_gather_perf", "alltoall_perf"):
        text, rc, res = run(roots, test=test, args=["-b", "1K", "-e", "4K", "-f", "2"])
        assert rc == 0
        rows = [line.split() for line in text.splitlines() if re.match(r"^\s+\d+\s+\d+\s+float", line)]
        expected = [("1024", "128", "none", "-1"), ("2048", "256", "none", "-1"), ("4096", "512", "none", "-1")]
        assert [(r[0], r[1], r[3], r[4]) for r in rows] == expected
        # (n-1)/n with 2 ranks: busbw = algbw / 2
        for r in res["busbw"]["rows"]:
            assert r["out_of_place"]["busbw_gbps"] == pytest.approx(r["out_of_place"]["algbw_gbps"] / 2, abs=0.01)
        wrong_in_place = {r[-1] for r in rows}
        assert wrong_in_place == ({"N/A"} if test == "alltoall_perf" else {"0"})
    capture = analyze_text((CAPTURES / "alltoall_perf-single-01.txt").read_text(encoding="utf-8"))
    assert capture["busbw"]["rows"][0]["in_place"]["wrong"] == "N/A"


def test_min_bw_check_sets_the_footer_and_the_status(tmp_path):
    roots = build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu", peermem=True)
    states = states_of(roots)
    text, rc = nt.render_job("all_reduce_perf", ARGS, states, env={"NCCL_TESTS_MIN_BW": "500"})
    assert rc == 1 and re.search(r"^# Avg bus bandwidth    : [0-9.]+ FAILED$", text, re.M)
    text, rc = nt.render_job("all_reduce_perf", ARGS, states, env={"NCCL_TESTS_MIN_BW": "10"})
    assert rc == 0 and re.search(r"^# Avg bus bandwidth    : [0-9.]+ OK$", text, re.M)


def test_ncclss_debug_levels(tmp_path):
    roots = build_hosts(tmp_path, "cx7_ib_ndr_2x_gpu", peermem=True)
    text, _rc, _res = run(roots, env={"NCCL_DEBUG": "VERSION"})
    assert [line for line in text.splitlines() if "NCCL" in line] == ["NCCL version 2.25.1+cuda12.8"]
    text, _rc, _res = run(roots, env={"NCCL_DEBUG": "WARN"})
    assert "NCCL INFO" not in text and "NCCL version" not in text
    # the QP trace is NCCL_NET: not in the default INIT,BOOTSTRAP,ENV mask
    text, _rc, _res = run(roots)
    assert "qpn" not in text
    text, _rc, _res = run(roots, env={"NCCL_DEBUG_SUBSYS": "INIT,NET"})
    assert re.search(r"NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn \d+ mtu 5 LID 42 subnet-prefix 33022  FLID 0 ", text)


# ------------------------------------------------------------------------------------------------ NCCL's own rules
@pytest.mark.parametrize("spec,name,port,expected", [
    ("", "mlx5_3", 1, True),
    ("mlx5", "mlx5_10", 1, True),
    ("=mlx5_1", "mlx5_10", 1, False),
    ("=mlx5_1", "mlx5_1", 1, True),
    ("mlx5_0:1,mlx5_1:2", "mlx5_1", 1, False),
    ("mlx5_0:1,mlx5_1:2", "mlx5_1", 2, True),
    ("^mlx5_0", "mlx5_0", 1, False),
    ("^mlx5_0", "mlx5_1", 1, True),
    ("^=mlx5_1", "mlx5_10", 1, True),
])
def test_ib_hca_grammar(spec, name, port, expected):
    exclude, exact, items = nt.parse_if_list(spec)
    assert (nt.match_if_list(name, port, items, exact) ^ exclude) is expected


def test_configuration_precedence_env_then_conf_file_then_etc(tmp_path):
    user = tmp_path / "user.conf"
    user.write_text("NCCL_IB_HCA=mlx5_1\nNCCL_IB_TC=106\n", encoding="utf-8")
    etc = tmp_path / "nccl.conf"
    etc.write_text("# site\nNCCL_IB_HCA=mlx5_0\nNCCL_IB_GID_INDEX=3\nnot a setting\n", encoding="utf-8")
    env = {"NCCL_CONF_FILE": str(user), "NCCL_IB_TC": "41"}
    merged = nt.nccl_env(env, nt.conf_texts(env, etc=str(etc)))
    assert (merged["NCCL_IB_HCA"], merged["NCCL_IB_TC"], merged["NCCL_IB_GID_INDEX"]) == ("mlx5_1", "41", "3")
    assert "not a setting" not in merged


def test_sizes_and_options():
    assert nt.parse_size("8M") == 8 << 20 and nt.parse_size("1g") == 1 << 30 and nt.parse_size("512") == 512
    opts = nt.parse_args("all_reduce_perf", ["-b", "8M", "-e", "1G", "-f", "2", "-g", "1", "-n", "5", "-w", "1", "-c", "0"])
    assert nt.sizes(opts)[0] == 8 << 20 and nt.sizes(opts)[-1] == 1 << 30 and len(nt.sizes(opts)) == 8
    assert (opts["iters"], opts["warmup_iters"], opts["check"]) == (5, 1, 0)
    assert nt.sizes(nt.parse_args("x", ["-b", "1M", "-e", "3M", "-i", "1048576"])) == [1 << 20, 2 << 20, 3 << 20]
    assert nt.parse_args("x", ["-i", "1M"])["stepbytes"] == 1        # -i is strtol'd: no size suffix
    with pytest.raises(nt.UsageError) as err:
        nt.parse_args("all_reduce_perf", ["-b", "2G", "-e", "1G"])
    assert err.value.message == "invalid sizes for 'minbytes' and 'maxbytes': 2147483648 > 1073741824\n"
    assert err.value.code == 255


def test_launcher_runs_one_rank_without_mpi(tmp_path):
    root = tmp_path / "sys"
    tree.build_tree(profile.load("cx7_ib_ndr_2x_gpu"), root, host_index=0)
    env = dict(os.environ, SIMHOST_SYSFS_ROOT=str(root), NCCL_DEBUG="INFO", HOME=str(tmp_path))
    env.pop("OMPI_COMM_WORLD_SIZE", None)
    for tool in ("all_reduce_perf", "alltoall_perf"):
        proc = subprocess.run([sys.executable, str(KIT / "bin" / tool), "-b", "1M", "-e", "2M", "-f", "2"],
                              capture_output=True, text=True, env=env, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        res = analyze_text(proc.stdout)
        assert res["ranks"] == 1 and len(res["busbw"]["rows"]) == 2
        # one rank: no network, and nccl-tests' bus bandwidth factor is 0
        assert res["busbw"]["avg_busbw_gbps"] == 0
    bad = subprocess.run([sys.executable, str(KIT / "bin/all_reduce_perf"), "-x"], capture_output=True, text=True,
                         env=env, timeout=60, check=False)
    assert bad.returncode == 0 and bad.stderr == "all_reduce_perf: invalid option -- 'x'\n"
    assert bad.stdout.startswith("invalid option '?'\nUSAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n")


def test_launcher_refuses_a_multi_rank_job_without_mpi4py(tmp_path):
    env = dict(os.environ, SIMHOST_SYSFS_ROOT=str(tmp_path), OMPI_COMM_WORLD_SIZE="2")
    proc = subprocess.run([sys.executable, "-S", str(KIT / "bin/all_reduce_perf")], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    try:
        import mpi4py  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        assert proc.returncode == 1 and "mpi4py is missing" in proc.stderr


class _OneRankComm:
    """mpi4py's COMM_WORLD of a one-rank job: what the glue calls, recorded."""

    def __init__(self):
        self.calls = []

    def Get_rank(self):  # noqa: N802  pylint: disable=invalid-name
        self.calls.append("rank")
        return 0

    def allgather(self, obj):
        self.calls.append("allgather")
        return [obj]

    def bcast(self, obj, root=0):
        self.calls.append("bcast:%d" % root)
        return obj

    def Barrier(self):  # noqa: N802  pylint: disable=invalid-name
        self.calls.append("barrier")


def test_mpi_glue_gathers_broadcasts_and_prints_phase_by_phase(tmp_path, monkeypatch, capsys):
    root = tmp_path / "sys"
    tree.build_tree(profile.load("cx7_ib_ndr_2x_gpu"), root, host_index=0)
    comm = _OneRankComm()
    monkeypatch.setattr(nt, "_mpi_comm", lambda: comm)
    monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(root))
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert nt.main(["/usr/local/bin/all_gather_perf", "-b", "1M", "-e", "1M"]) == 0
    out = capsys.readouterr().out
    assert comm.calls == ["rank", "allgather", "allgather", "bcast:0"] + ["barrier"] * 5
    assert out.startswith("# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576 step: 1048576(bytes) ")
    assert "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]" in out and out.endswith("#\n")


def test_a_process_started_by_hand_does_not_load_mpi(monkeypatch):
    for name in nt.LAUNCHER_VARS:
        monkeypatch.delenv(name, raising=False)
    assert nt._mpi_comm() is None     # pylint: disable=protected-access


def _shape(line):
    """A line with its numbers, addresses and names blanked: what the printf format fixes."""
    line = re.sub(r"(?:::ffff:)?\d+\.\d+\.\d+\.\d+|fe80::[0-9a-f:]+|\bnode\d+|0x[0-9a-f]+", "H", line)
    return re.sub(r"\d+", "N", line)


def test_failure_lines_have_the_captures_shapes(tmp_path):
    roots = build_hosts(tmp_path, "cx7_roce_400g_2x")
    text, _rc, _res = run(roots, env={"NCCL_IB_GID_INDEX": "0"})
    real = _lines(CAPTURES / "all_reduce_perf-fail-nccl-01.txt")
    theirs = [line for line in real if "Test " in line]
    ours = [line for line in text.splitlines() if line.startswith(("node01: Test", " .. node01"))]
    cuda = "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
    assert [_shape(line) for line in ours] == [_shape(line).replace(cuda, NCCL_RESULT_6) for line in theirs]
    warn = [line for line in text.splitlines() if "Got completion" in line][0]
    cap = [line for line in _lines(CAPTURES / "nccl-warn-ib-completion-2.27-01.txt") if "Got completion" in line][0]
    cap = re.sub(r"^\[[^]]+\] ", "", cap)      # NCCL >= 2.26 stamps WARN lines
    assert _shape(warn).split(" with status=")[0] == _shape(cap).split(" with status=")[0]
    assert _shape(warn).split(" (Send) ")[1] == _shape(cap).split(" (Send) ")[1]
    info = _lines(CAPTURES / "all_reduce_perf-fail-nccl-info-01.txt")
    for ours_line, prefix in (("Bootstrap: Using eth0", "Bootstrap: Using "), ("NET/Plugin: Could not", "NET/Plugin: Could not"),
                              ("Using network", "Using network"), ("nNodes", " nNodes ")):
        mine = [line for line in text.splitlines() if ours_line in line][0]
        cap = [line for line in info if prefix in line][0]
        assert _shape(mine).split(" NCCL INFO ")[0] == _shape(cap).split(" NCCL INFO ")[0]
        if ours_line != "Bootstrap: Using eth0":
            assert re.sub(r"(Socket|IB)$", "", _shape(mine).split(" NCCL INFO ")[1]) == \
                re.sub(r"(Socket|IB)$", "", _shape(cap).split(" NCCL INFO ")[1])


NCCL_RESULT_6 = "remote process exited or there was a network error"


def test_all_gather_rows_have_the_captures_layout(tmp_path):
    roots = build_hosts(tmp_path, "cx7_roce_400g_2x")
    text, _rc, res = run(roots, test="all_gather_perf", args=["-b", "1K", "-e", "8G", "-f", "2", "-g", "1"])
    real_text = (CAPTURES / "all_gather_perf-multinode-01.txt").read_text(encoding="utf-8")
    real = analyze_text(real_text)
    pattern = r"^\s+\d+\s+\d+\s+float\s+none"
    ours = [line for line in text.splitlines() if re.match(pattern, line)]
    theirs = [line for line in real_text.splitlines() if re.match(pattern, line)]
    assert len(ours) == len(theirs) == 24
    for mine, cap in zip(ours, theirs):
        assert _row_layout(mine)[:5] == _row_layout(cap)[:5]
    assert [r["count"] for r in res["busbw"]["rows"]] == [r["count"] for r in real["busbw"]["rows"]]
