"""perftest stand-ins of the simulated host (ib_write_bw, ib_write_lat, ...) and the declared fabric model.

Server and client run as real processes on localhost, each on its own simulated host (tree), and meet over TCP on a
free port. Their output is read with the product's parser (plugins/module_utils/verify/perftest_output.py) and
compared in layout with the real captures in tests/fixtures/real/perftest-nccl-tests; the numbers are checked against
the model (simhost/fabric_model.py) and the counters of both hosts against what the run moved."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import perftest_output as parser
from fixtures_path import real_fixtures

KIT = Path(__file__).resolve().parents[2] / "simhost"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import fabric_model  # noqa: E402  pylint: disable=wrong-import-position

CAPTURES = real_fixtures() / "perftest-nccl-tests"
ROCE = "cx7_roce_400g_2x"
IB = "cx7_ib_ndr_8x"
IF0 = "enp12s0np0"


# ------------------------------------------------------------------------------------------------ helpers
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def env_for(root: Path, **extra) -> dict:
    return {**os.environ, "SIMHOST_SYSFS_ROOT": str(root), "LC_ALL": "C", **extra}


def tool(root: Path, name: str, *args: str, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", str(KIT / "bin" / name), *args], capture_output=True, text=True,
                          env=env_for(root, **extra), check=False, timeout=90)


class Side:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    @property
    def text(self):
        return self.out + self.err


def start_server(root: Path, name: str, port: int, args, tmp: Path, **extra):
    sout, serr = tmp / ("srv-%d.out" % port), tmp / ("srv-%d.err" % port)
    with open(sout, "w", encoding="utf-8") as fo, open(serr, "w", encoding="utf-8") as fe:
        proc = subprocess.Popen([sys.executable, "-S", str(KIT / "bin" / name), *args, "-p", str(port)],
                                stdout=fo, stderr=fe, env=env_for(root, **extra))
    deadline = time.time() + 30
    while time.time() < deadline and proc.poll() is None and "Waiting for client" not in sout.read_text():
        time.sleep(0.05)
    return proc, sout, serr


def finish(proc, sout: Path, serr: Path) -> Side:
    rc = proc.wait(timeout=90)
    return Side(rc, sout.read_text(), serr.read_text())


def run_pair(srv_root: Path, cli_root: Path, tmp: Path, name="ib_write_bw", srv_args=(), cli_args=()):
    port = free_port()
    proc, sout, serr = start_server(srv_root, name, port, list(srv_args), tmp)
    cli = tool(cli_root, name, *cli_args, "-p", str(port), "127.0.0.1")
    return finish(proc, sout, serr), Side(cli.returncode, cli.stdout, cli.stderr)


def pfc_on(root: Path, prio: int = 0) -> None:
    res = tool(root, "dcb", "pfc", "set", "dev", IF0, "prio-pfc", "%d:on" % prio)
    assert res.returncode == 0, res.stderr


def counter(root: Path, rel: str, dev="mlx5_0") -> int:
    return int((root / "class/infiniband" / dev / "ports/1" / rel).read_text())


def ethtool_stats(root: Path) -> dict:
    res = tool(root, "ethtool", "-S", IF0)
    assert res.returncode == 0, res.stderr
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(\S+): (\d+)$", res.stdout, re.M)}


def layout(line: str) -> str:
    """A header line with its values blanked: labels, blanks and (expanded) tabs stay."""
    return re.sub(r"(:\s)\S+", r"\1V", line.expandtabs())


def token_starts(line: str) -> list:
    return [m.start() for m in re.finditer(r"\S+", line.expandtabs())]


def header_block(text: str) -> list:
    lines = text.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    second = next(i for i in range(first + 1, len(lines)) if lines[i].startswith("---"))
    return lines[first:second + 1]


# ------------------------------------------------------------------------------------------------ trees
@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """Booted trees, built once: RoCE hosts 0/1, IB hosts 0/1, a host without RDMA device."""
    top = tmp_path_factory.mktemp("perftest-trees")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIMHOST_PERSIST_DIR", str(top / "persist"))
        for key, prof, idx in (("roce0", ROCE, 0), ("roce1", ROCE, 1), ("ib0", IB, 0), ("ib1", IB, 1),
                               ("none", "no_rdma", 0)):
            simhost.build_tree(simhost.load(prof), top / key, host_index=idx)
            out[key] = top / key
    return out


@pytest.fixture
def hosts(base, tmp_path):
    """Fresh copies (a test changes PFC, MTU, port state and counters)."""
    def get(*keys):
        res = []
        for key in keys:
            dest = tmp_path / ("host-" + key)
            if not dest.exists():
                shutil.copytree(base[key], dest, symlinks=True)
            res.append(dest)
        return res
    return get


@pytest.fixture(scope="module")
def lossless(base, tmp_path_factory):
    """Two RoCE hosts with PFC on priority 0 (the priority ToS 0 takes under trust pcp), shared read-only."""
    top = tmp_path_factory.mktemp("lossless")
    roots = []
    for key in ("roce0", "roce1"):
        dest = top / key
        shutil.copytree(base[key], dest, symlinks=True)
        pfc_on(dest)
        roots.append(dest)
    return roots


# --------------------------------------------------------------------------------------------- the model
def test_port_view_reads_the_hosts_own_state(base):
    view = fabric_model.port_view(base["roce0"], "mlx5_0", 1)
    assert view["exists"] and view["link_layer"] == "Ethernet" and view["state"] == "ACTIVE"
    assert view["rate_gbps"] == 400.0 and view["netdev"] == IF0 and view["netdev_mtu"] == 9000
    assert view["active_mtu"] == 4096
    assert view["trust"] == "pcp" and view["pfc_enabled"] == [] and view["dscp2prio"][46] == 5
    assert view["global_tclass"] is None
    assert [(g["index"], g["type"]) for g in view["gids"]] == [
        (0, "IB/RoCE v1"), (1, "RoCE v2"), (2, "IB/RoCE v1"), (3, "RoCE v2")]
    assert fabric_model.default_gid_index(view) == 3
    ib = fabric_model.port_view(base["ib0"], "mlx5_0", 1)
    assert ib["link_layer"] == "InfiniBand" and ib["lid"] == 0x1a and "trust" not in ib
    assert not fabric_model.port_view(base["roce0"], "mlx5_9", 1)["exists"]


def test_model_numbers_declared():
    assert fabric_model.iboe_mtu(9000) == 4096 and fabric_model.iboe_mtu(1500) == 1024
    assert fabric_model.mtu_efficiency("Ethernet", 4096) == pytest.approx(0.96)
    assert fabric_model.mtu_efficiency("InfiniBand", 4096) == pytest.approx(0.97)
    assert fabric_model.mtu_efficiency("Ethernet", 1024) == pytest.approx(0.9066, abs=1e-3)
    assert fabric_model.jitter("a|b", 1) == fabric_model.jitter("a|b", 1)
    assert abs(fabric_model.jitter("a|b", 1) - 1) <= fabric_model.JITTER


def test_pair_bandwidth_lossless_lossy_and_dscp(base, lossless):
    a, b = (fabric_model.port_view(r, "mlx5_0", 1) for r in lossless)
    pair = fabric_model.pair_bandwidth(a, b, 0)
    assert pair["lossless"] and pair["priority"] == 0 and pair["gbps"] == pytest.approx(384.0)
    assert pair["line_rate_gbps"] == 400.0 and pair["path_mtu"] == 4096 and pair["ecn"]
    lossy = fabric_model.pair_bandwidth(*(fabric_model.port_view(base[k], "mlx5_0", 1) for k in ("roce0", "roce1")))
    assert not lossy["lossless"] and lossy["gbps"] == pytest.approx(40.0)
    assert any("no PFC on priority 0" in r for r in lossy["reasons"])
    # trust dscp: ToS 106 -> DSCP 26 -> priority 3 through the default map; PFC only on 0 -> lossy
    dscp = dict(a, trust="dscp")
    assert fabric_model.traffic_priority(dscp, 106)[0] == 3
    pair = fabric_model.pair_bandwidth(dscp, dict(b, trust="dscp"), 106)
    assert pair["priority"] == 3 and not pair["lossless"]
    pair = fabric_model.pair_bandwidth(dict(dscp, pfc_enabled=[3]), dict(b, trust="dscp", pfc_enabled=[3]), 106)
    assert pair["lossless"] and pair["priority"] == 3
    # a down port or another link layer: nothing flows
    assert fabric_model.pair_bandwidth(dict(a, state="DOWN"), b)["gbps"] == 0
    ib = fabric_model.port_view(base["ib0"], "mlx5_0", 1)
    assert not fabric_model.pair_bandwidth(a, ib)["usable"]


# ---------------------------------------------------------------------------------------------- success
def test_write_bw_healthy_roce_near_line_rate_and_parsed(lossless, tmp_path):
    srv, cli = run_pair(lossless[0], lossless[1], tmp_path, cli_args=["--report_gbits"])
    assert (srv.rc, cli.rc) == (0, 0), (srv.text, cli.text)
    parsed = parser.parse_output(cli.out)
    hdr = parsed["header"]
    assert (hdr["device"], hdr["link_type"], hdr["gid_index"], hdr["mtu"], hdr["qps"]) == \
        ("mlx5_0", "Ethernet", 3, 4096, 1)
    row = parsed["results"][-1]
    assert (row["bytes"], row["iterations"]) == (65536, 5000)
    assert 382.0 < row["bw_avg_gbps"] < 386.0 and row["bw_peak_gbps"] >= row["bw_avg_gbps"]
    assert row["msg_rate_mpps"] == pytest.approx(row["bw_avg_gbps"] * 1e9 / (65536 * 8) / 1e6, rel=1e-4)
    assert parsed["local"][0]["gid_ipv4"] == "10.0.1.12" and parsed["remote"][0]["gid_ipv4"] == "10.0.1.11"
    # the half-duplex server: the client's report under its own (MB/sec) header, as perftest prints it
    sparsed = parser.parse_output(srv.out)
    assert sparsed["role"] == "server" and sparsed["unit"] == "MB/sec"
    assert sparsed["results"][-1]["bw_avg_gbps"] == row["bw_avg_gbps"]
    assert srv.err == "" and cli.err == ""


def test_header_addresses_and_rows_have_the_layout_of_the_real_capture(lossless, tmp_path):
    capture = (CAPTURES / "ib_write_bw-client-rocev2-01.txt").read_text()
    srv, cli = run_pair(lossless[0], lossless[1], tmp_path, cli_args=["-a", "-F", "--report_gbits", "-q", "1"])
    assert cli.rc == 0 and srv.rc == 0
    assert [layout(x) for x in header_block(cli.out)] == [layout(x) for x in header_block(capture)]
    assert "\t\tDevice         : mlx5_0\n" in cli.out and " rdma_cm QPs\t : OFF\n" in cli.out   # the real TABs

    def addr_shape(text):
        return [re.sub(r"0x[0-9a-f]+|\b\d+\b", "N", ln) for ln in text.splitlines() if "address:" in ln or "GID:" in ln]
    assert addr_shape(cli.out) == addr_shape(capture)
    table = [ln for ln in cli.out.splitlines() if re.match(r" \d+ ", ln)]
    cap_table = [ln for ln in capture.splitlines() if re.match(r" \d+ ", ln)]
    assert [ln.split()[0] for ln in table] == [ln.split()[0] for ln in cap_table]     # 2 B .. 8 MiB
    for mine, real in zip(table, cap_table):
        assert token_starts(mine) == token_starts(real), (mine, real)
    assert " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n" in cli.out
    assert cli.out.endswith("-" * 87 + "\n")


def test_pfc_off_on_the_traffic_priority_is_lossy(hosts, tmp_path):
    srv_root, cli_root = hosts("roce0", "roce1")
    srv, cli = run_pair(srv_root, cli_root, tmp_path, cli_args=["--report_gbits"])
    assert (srv.rc, cli.rc) == (0, 0)
    bw = parser.parse_output(cli.out)["results"][-1]["bw_avg_gbps"]
    assert 39.5 < bw < 40.5
    # the loss shows on the receiver (the server of a write), no pause counters exist for priority 0
    stats = ethtool_stats(srv_root)
    assert stats["rx_discards_phy"] == 800          # 5000 x 16 packets of 4096 B, 1% lost
    assert "tx_prio0_pause" not in stats
    assert counter(srv_root, "hw_counters/out_of_buffer") == 80
    assert counter(cli_root, "hw_counters/packet_seq_err") == 800


def test_mtu_mismatch_lowers_bandwidth(hosts, tmp_path):
    srv_root, cli_root = hosts("roce0", "roce1")
    for root in (srv_root, cli_root):
        pfc_on(root)
    (cli_root / "class/net" / IF0 / "mtu").write_text("1500\n")
    srv, cli = run_pair(srv_root, cli_root, tmp_path, cli_args=["--report_gbits"])
    assert (srv.rc, cli.rc) == (0, 0)
    for side in (srv, cli):
        assert parser.parse_output(side.out)["header"]["mtu"] == 1024
    bw = parser.parse_output(cli.out)["results"][-1]["bw_avg_gbps"]
    assert 360.0 < bw < 365.0                        # 400 x 0.907 at path MTU 1024, not 384


def test_counters_move_with_the_traffic(hosts, tmp_path):
    srv_root, cli_root = hosts("roce0", "roce1")
    for root in (srv_root, cli_root):
        pfc_on(root)
    before = ethtool_stats(srv_root)
    assert before["tx_prio0_pause"] == 0 and before["rx_bytes_phy"] == 0
    srv, cli = run_pair(srv_root, cli_root, tmp_path, cli_args=["-n", "10000"])
    assert (srv.rc, cli.rc) == (0, 0)
    payload = 65536 * 10000
    packets = 16 * 10000
    wire = payload + packets * fabric_model.HEADER_BYTES["Ethernet"]
    assert counter(cli_root, "counters/port_xmit_data") == wire // 4
    assert counter(srv_root, "counters/port_rcv_data") == wire // 4
    assert counter(srv_root, "counters/port_xmit_data") == 0
    gb = payload / 1e9
    marked = round(100 * gb)
    assert counter(srv_root, "hw_counters/np_ecn_marked_roce_packets") == marked
    assert counter(srv_root, "hw_counters/np_cnp_sent") == round(marked / 2)
    assert counter(cli_root, "hw_counters/rp_cnp_handled") == round(marked / 2)
    srv_stats, cli_stats = ethtool_stats(srv_root), ethtool_stats(cli_root)
    assert srv_stats["tx_prio0_pause"] == round(20 * gb) == cli_stats["rx_prio0_pause"]
    assert srv_stats["rx_prio0_bytes"] == wire and cli_stats["tx_bytes_phy"] == wire
    assert srv_stats["rx_discards_phy"] == 0
    # dcb shows the same pause counters (one model for every view)
    res = tool(srv_root, "dcb", "-s", "pfc", "show", "dev", IF0, "requests")
    assert res.stdout.split()[:3] == ["requests", "0:%d" % round(20 * gb), "1:0"]


def test_repeated_runs_print_the_same_numbers(lossless, tmp_path):
    rows = []
    for _ in range(2):
        srv, cli = run_pair(lossless[0], lossless[1], tmp_path, cli_args=["--report_gbits"])
        assert cli.rc == 0
        rows.append([ln for ln in cli.out.splitlines() if ln.startswith(" 65536")])
    assert rows[0] == rows[1]


def test_infiniband_pair_uses_lids(hosts, tmp_path):
    srv_root, cli_root = hosts("ib0", "ib1")
    srv, cli = run_pair(srv_root, cli_root, tmp_path, cli_args=["--report_gbits"])
    assert (srv.rc, cli.rc) == (0, 0)
    parsed = parser.parse_output(cli.out)
    assert parsed["header"]["link_type"] == "IB" and parsed["header"]["gid_index"] is None
    assert " GID index" not in cli.out and " GID:" not in cli.out
    assert re.search(r"^ local address: LID 0x2a QPN 0x[0-9a-f]{4} ", cli.out, re.M)
    assert re.search(r"^ remote address: LID 0x1a ", cli.out, re.M)
    assert 386.0 < parsed["results"][-1]["bw_avg_gbps"] < 390.0       # 400 x 0.97
    assert counter(srv_root, "counters/port_rcv_data") > 0


def test_write_lat_both_sides_print_latency(lossless, tmp_path):
    srv, cli = run_pair(lossless[0], lossless[1], tmp_path, name="ib_write_lat")
    assert (srv.rc, cli.rc) == (0, 0)
    for side in (srv, cli):
        parsed = parser.parse_output(side.out)
        assert parsed["kind"] == "lat" and parsed["header"]["max_inline_bytes"] == 220
        row = parsed["results"][0]
        assert row["bytes"] == 2 and row["iterations"] == 1000
    assert " TX depth        : 1\n" in cli.out and " TX depth" not in srv.out
    typical = [ln for ln in cli.out.splitlines() if ln.startswith(" 2 ")][0].split()[4]
    assert 1.39 < float(typical) < 1.42                 # RoCE write base latency 1.40 us + serialisation


def test_read_lat_server_prints_no_table_and_send_bw_server_does(lossless, tmp_path):
    srv, cli = run_pair(lossless[0], lossless[1], tmp_path, name="ib_read_lat")
    assert (srv.rc, cli.rc) == (0, 0)
    assert "#bytes" not in srv.out and " OUT 0x10 RKey " in srv.out
    real = (CAPTURES / "ib_read_lat-server-ib-01.txt").read_text()
    assert srv.out.splitlines()[-1] == real.splitlines()[-1] == "-" * 87
    srv, cli = run_pair(lossless[0], lossless[1], tmp_path, name="ib_send_bw", cli_args=["-n", "30000"],
                        srv_args=["-n", "30000"])
    assert (srv.rc, cli.rc) == (0, 0)
    assert srv.out.startswith(" WARNING: BW peak won't be measured in this run.\n\n****")
    assert " RX depth        : 512\n" in srv.out
    for side in (srv, cli):
        row = parser.parse_output(side.out)["results"][0]
        assert row["bw_peak_gbps"] == 0.0 and row["iterations"] == 30000


# ---------------------------------------------------------------------------------------------- failures
def test_client_without_server_fails_like_perftest(base, tmp_path):
    port = free_port()
    res = tool(base["roce1"], "ib_write_bw", "-d", "mlx5_0", "-p", str(port), "127.0.0.1")
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == ("Couldn't connect to 127.0.0.1:%d\nUnable to open file descriptor for socket connection\n"
                          " Unable to init the socket connection\n" % port)
    real = (CAPTURES / "ib_write_bw-error-connect-01.txt").read_text()
    mine = res.stderr.replace("127.0.0.1:%d" % port, "10.0.0.11:18515")
    mine = mine.replace("connection\n Unable", "connection Unable")
    assert mine == real                               # the capture is the pre-PR-#228 one-line form
    assert parser.classify_failure(res.stdout + res.stderr, res.returncode)["kind"] == "server_not_listening"


def test_no_device_and_unknown_device(base):
    res = tool(base["none"], "ib_write_bw")
    assert res.returncode == 1
    assert res.stderr == (CAPTURES / "ib_write_bw-error-nodevice-01.txt").read_text()
    res = tool(base["roce0"], "ib_write_bw", "-d", "mlx5_9")
    assert (res.returncode, res.stderr) == (
        1, "IB device mlx5_9 not found\n Unable to find the Infiniband/RoCE device\n")
    assert parser.classify_failure(res.stderr, 1)["kind"] == "device_not_found"


def test_port_down_fails_before_listening(hosts, tmp_path):
    (root,) = hosts("roce0")
    (root / "class/infiniband/mlx5_0/ports/1/state").write_text("1: DOWN\n")
    port = free_port()
    res = tool(root, "ib_write_bw", "-p", str(port))
    assert res.returncode == 1 and res.stdout == ""       # no "Waiting for client" box: it never listened
    assert res.stderr == (" Port number 1 state is Down\n Couldn't set the link layer\n"
                          " Couldn't get context for the device\n")
    assert parser.classify_failure(res.stderr, 1)["kind"] == "port_not_active"


def test_gid_index_on_an_empty_entry_is_incompatible_with_an_ipv4_peer(lossless, tmp_path):
    srv, cli = run_pair(lossless[0], lossless[1], tmp_path, cli_args=["-x", "7"])
    expected = "\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n\n"
    assert (srv.rc, srv.err, cli.rc, cli.err) == (1, expected, 1, expected)
    assert " GID index       : 7\n" in cli.out and " GID index       : 3\n" in srv.out
    assert parser.classify_failure(cli.text, 1)["kind"] == "gid_type_mismatch"


def test_zero_gid_against_link_local_fails_modify_qp_to_rtr(lossless, tmp_path):
    srv, cli = run_pair(lossless[0], lossless[1], tmp_path, srv_args=["-x", "9"], cli_args=["-x", "1"])
    real = (CAPTURES / "ib_write_bw-error-rtr-01.txt").read_text().splitlines()[:2]
    for side in (srv, cli):
        assert side.rc == 1
        lines = side.err.splitlines()
        assert re.fullmatch(r"Failed to modify QP \d+ to RTR", lines[0]) and lines[1] == real[1]
        assert re.fullmatch(r"Failed to modify QP \d+ to RTR", real[0])
        assert parser.classify_failure(side.text, 1)["kind"] == "qp_connect_failed"


def test_roce_v1_against_v2_times_out_in_transport(lossless, tmp_path):
    srv, cli = run_pair(lossless[0], lossless[1], tmp_path, cli_args=["-x", "2"])
    assert cli.rc == 1 and srv.rc == 1
    assert cli.err == (" Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\nscnt=128, ccnt=0\n"
                       " Failed to complete run_iter_bw function successfully\n")
    assert srv.err == ("ethernet_read_keys: Couldn't read remote address\n Unable to read to socket/rdma_cm\n"
                       " Failed to exchange data between server and clients\n")
    assert parser.classify_failure(cli.text, 1)["kind"] == "completion_error"


def test_gid_index_beyond_the_table_fails_setup(hosts, tmp_path):
    srv_root, cli_root = hosts("ib0", "ib1")
    srv, cli = run_pair(srv_root, cli_root, tmp_path, cli_args=["-x", "20"])
    assert (cli.rc, cli.out, cli.err) == (1, "", " Unable to set up socket connection\n")
    assert srv.rc == 1 and "RDMA_Write BW Test" in srv.out
    assert srv.err.endswith(" Failed to exchange data between server and clients\n")


def test_link_layer_mismatch(hosts, tmp_path):
    ib_root, roce_root = hosts("ib0", "roce1")
    srv, cli = run_pair(ib_root, roce_root, tmp_path)
    assert srv.rc == 1 and cli.rc == 1
    assert " Link type       : IB\n" in srv.out and " Link type       : Ethernet\n" in cli.out
    assert cli.err.startswith("ethernet_read_keys: Couldn't read remote address\n Unable to read from socket")
    assert " local address: LID 0x1a " in srv.out and "remote address" not in srv.out
    assert parser.classify_failure(srv.text, 1)["kind"] == "exchange_failed"


def test_server_gives_up_without_a_client(base, tmp_path):
    port = free_port()
    proc, sout, serr = start_server(base["roce0"], "ib_write_bw", port, [], tmp_path,
                                    SIMHOST_PERFTEST_ACCEPT_TIMEOUT="1")
    side = finish(proc, sout, serr)
    assert side.rc == 1 and "* Waiting for client to connect... *" in side.out
    assert side.err == ("server accept: Connection timed out\naccept() failed\nUnable to open file descriptor for "
                        "socket connection\n Unable to init the socket connection\n")


def test_options(base):
    res = tool(base["roce0"], "ib_write_bw", "-T", "106", "127.0.0.1")
    assert (res.returncode, res.stdout) == (1, " TOS only valid for rdma_cm based QP and RawEth QP \n")
    res = tool(base["roce0"], "ib_write_bw", "-R", "127.0.0.1")
    assert res.returncode == 1 and "not simulated" in res.stderr
    res = tool(base["roce0"], "ib_write_bw", "--bogus")
    assert res.returncode == 1 and res.stderr.startswith("ib_write_bw: unrecognized option '--bogus'\n")
    assert parser.classify_failure(res.stderr, 1)["kind"] == "bad_arguments"


def test_launchers_are_executable_and_listed_for_install():
    names = ["ib_write_bw", "ib_write_lat", "ib_read_bw", "ib_read_lat", "ib_send_bw", "ib_send_lat"]
    for name in names:
        assert os.access(KIT / "bin" / name, os.X_OK)
    plays = yaml.safe_load((KIT / "install.yml").read_text())
    assert set(names) <= set(plays[0]["vars"]["__simhost_tools"])
    assert json.loads(json.dumps(fabric_model.CONGESTION_PER_GB))["pause_frames"] == 20
