# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""perftest_output (parser, failure classifier, summary) and perftest_run (argv, run, verdict) on every real capture."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import perftest_output, perftest_run
from fixtures_path import real_fixtures

CAPTURES = real_fixtures() / "perftest-nccl-tests"
MIB = 8.0 * 1048576 / 1e9


def _text(name):
    return (CAPTURES / name).read_text(encoding="utf-8")


# One entry per real capture: what the parser must find. Numbers are the ones printed in the file.
EXPECTED = {
    "ib_write_bw-client-rocev2-01.txt": dict(
        test="RDMA_Write BW Test", kind="bw", role=None, unit="Gb/sec", values_unit="Gb/sec",
        header=dict(device="mlx5_0", link_type="Ethernet", gid_index=5, mtu=1024, qps=1, transport="IB",
                    connection_type="RC", tx_depth=128, cq_moderation=100, max_inline_bytes=0, rdma_cm=False,
                    data_exchange="Ethernet", pcie_relax_order=True, ibv_wr_api=True),
        local=1, remote=1, rows=23,
        first=dict(bytes=2, iterations=5000, bw_peak_gbps=0.11, bw_avg_gbps=0.11, msg_rate_mpps=6.897101),
        last=dict(bytes=8388608, iterations=5000, bw_peak_gbps=92.39, bw_avg_gbps=92.39, msg_rate_mpps=0.001377),
        warnings=[], errors=[], failure=None),
    "ib_write_bw-client-rocev2-cuda-01.txt": dict(
        test="RDMA_Write BW Test", kind="bw", role=None, unit="Gb/sec", values_unit="Gb/sec",
        header=dict(device="mlx5_3", link_type="Ethernet", gid_index=3, mtu=4096, qps=1, lock_free=False,
                    using_ddp=False, cqe_poll_batch=16, rdma_cm=False),
        local=1, remote=1, rows=23,
        first=dict(bytes=2, iterations=5000, bw_peak_gbps=0.05724, bw_avg_gbps=0.056633, msg_rate_mpps=3.53956),
        last=dict(bytes=8388608, bw_peak_gbps=140.55, bw_avg_gbps=140.4, msg_rate_mpps=0.002092),
        warnings=["Perftest doesn't supports CUDA tests with inline messages: inline size set to 0"], errors=[],
        failure=None),
    "ib_write_bw-server-rocev2-02.txt": dict(
        test="RDMA_Write BW Test", kind="bw", role="server", unit="MB/sec", values_unit="Gb/sec",
        header=dict(device="mlx5_3", link_type="Ethernet", gid_index=2, mtu=4096, qps=1, rdma_cm=False,
                    cq_moderation=100, dual_port=False),
        local=1, remote=1, rows=1,
        first=dict(bytes=65536, iterations=1101500, bw_peak_gbps=0.0, bw_avg=96.25, bw_avg_gbps=96.25,
                   msg_rate_mpps=0.183585),
        last=dict(bytes=65536),
        warnings=["the table is headed MB/sec but its numbers match the message rate only in Gb/sec"], errors=[],
        failure=None),
    "ib_write_bw-server-bidir-multiqp-rocev2-01.txt": dict(
        test="RDMA_Write Bidirectional BW Test", kind="bw", role="server", unit="Gb/sec", values_unit="Gb/sec",
        header=dict(device="ionic_7", link_type="Ethernet", gid_index=1, mtu=4096, qps=4, cpu_freq_mhz=3295),
        local=4, remote=4, rows=23,
        first=dict(bytes=2, iterations=20000, bw_peak_gbps=0.147331, bw_avg_gbps=0.146472, msg_rate_mpps=9.154486),
        last=dict(bytes=8388608, iterations=20000, bw_peak_gbps=779.21, bw_avg_gbps=779.21, msg_rate_mpps=0.011611),
        warnings=[], errors=[], failure=None),
    "ib_write_bw-client-bidir-multiqp-rocev2-01.txt": dict(
        test="RDMA_Write Bidirectional BW Test", kind="bw", role=None, unit="Gb/sec", values_unit="Gb/sec",
        header=dict(device="ionic_1", link_type="Ethernet", gid_index=1, qps=4, using_enhanced_reorder=False,
                    cqe_poll_batch="Dynamic"),
        local=4, remote=4, rows=23,
        first=dict(bytes=2, bw_avg_gbps=0.146472), last=dict(bytes=8388608, bw_avg_gbps=779.21),
        warnings=[], errors=[], failure=None),
    "ib_write_bw-client-multiqp-rdmacm-01.txt": dict(
        test="RDMA_Write BW Test", kind="bw", role=None, unit="Gb/sec", values_unit="Gb/sec",
        header=dict(device="rocep1s0f1", link_type="IB", gid_index=None, mtu=1024, qps=4, rdma_cm=True,
                    data_exchange="rdma_cm", cq_moderation=1),
        local=4, remote=4, rows=1,
        first=dict(bytes=65536, iterations=20000, bw_peak_gbps=111.72, bw_avg_gbps=111.71, msg_rate_mpps=0.21307),
        last=dict(bytes=65536), warnings=[], errors=[], failure=None),
    "ib_write_lat-client-rdmacm-01.txt": dict(
        test="RDMA_Write Latency Test", kind="lat", role=None, unit=None, values_unit=None,
        header=dict(device="rocep1s0f1", link_type="IB", tx_depth=1, mtu=1024, max_inline_bytes=220,
                    pcie_relax_order=False, rdma_cm=True, data_exchange="rdma_cm"),
        local=1, remote=1, rows=1,
        first=dict(bytes=2, iterations=1000, t_min_us=1.42, t_max_us=1.93, t_typical_us=1.47, t_avg_us=1.47,
                   t_stdev_us=0.0, p99_us=1.57, p99_9_us=1.93),
        last=dict(bytes=2), warnings=[], errors=[], failure=None),
    "ib_send_bw-server-ib-01.txt": dict(
        test="Send BW Test", kind="bw", role="server", unit="MiB/sec", values_unit="MiB/sec",
        header=dict(device="mlx5_ib0", link_type="IB", gid_index=None, mtu=4096, rx_depth=512, qps=1),
        local=1, remote=1, rows=14,
        first=dict(bytes=2, iterations=100000, bw_peak_gbps=0.0, bw_avg=9.29, bw_avg_gbps=round(9.29 * MIB, 6),
                   msg_rate_mpps=4.869852),
        last=dict(bytes=16384, bw_avg=23551.65, bw_avg_gbps=round(23551.65 * MIB, 6), msg_rate_mpps=1.507306),
        warnings=["WARNING: BW peak won't be measured in this run."], errors=[], failure=None),
    "ib_send_bw-client-ib-01.txt": dict(
        test="Send BW Test", kind="bw", role=None, unit="MiB/sec", values_unit="MiB/sec",
        header=dict(device="mlx5_ib0", link_type="IB", tx_depth=128, mtu=4096),
        local=1, remote=1, rows=14,
        first=dict(bytes=2, bw_avg_gbps=round(9.29 * MIB, 6), msg_rate_mpps=4.868276),
        last=dict(bytes=16384, bw_avg_gbps=round(23547.97 * MIB, 6), msg_rate_mpps=1.50707),
        warnings=["WARNING: BW peak won't be measured in this run."], errors=[], failure=None),
    "ib_send_lat-server-ib-01.txt": dict(
        test="Send Latency Test", kind="lat", role="server", unit=None, values_unit=None,
        header=dict(device="mlx5_ib0", link_type="IB", rx_depth=512, max_inline_bytes=236),
        local=1, remote=1, rows=14,
        first=dict(bytes=2, iterations=100000, t_min_us=1.55, t_max_us=7.16, t_typical_us=1.6, p99_9_us=3.49),
        last=dict(bytes=16384, t_typical_us=3.76, t_avg_us=3.77, p99_us=3.91, p99_9_us=5.57),
        warnings=[], errors=[], failure=None),
    "ib_read_lat-server-ib-01.txt": dict(
        test="RDMA_Read Latency Test", kind="lat", role="server", unit=None, values_unit=None,
        header=dict(device="mlx4_0", link_type="IB", mtu=2048, outstanding_reads=16, gid_index=None),
        local=1, remote=1, rows=0, first=None, last=None, warnings=[], errors=[], failure=None),
    "ib_read_lat-client-ib-01.txt": dict(
        test="RDMA_Read Latency Test", kind="lat", role=None, unit=None, values_unit=None,
        header=dict(device="mlx4_0", link_type="IB", tx_depth=1, outstanding_reads=16),
        local=1, remote=1, rows=1,
        first=dict(bytes=2, iterations=1000, t_min_us=1.76, t_max_us=6.12, t_typical_us=1.79, t_avg_us=1.8,
                   t_stdev_us=0.06, p99_us=1.88, p99_9_us=6.12),
        last=dict(bytes=2),
        warnings=["Conflicting CPU frequency values detected: 2400.000000 != 1873.463000. CPU Frequency is not max."],
        errors=[], failure=None),
    "ib_write_bw-error-connect-01.txt": dict(
        test=None, kind=None, role=None, unit=None, values_unit=None, header={}, local=0, remote=0, rows=0,
        first=None, last=None, warnings=[],
        errors=["Couldn't connect to 10.0.0.11:18515",
                "Unable to open file descriptor for socket connection Unable to init the socket connection"],
        failure="server_not_listening"),
    "ib_write_bw-error-nodevice-01.txt": dict(
        test=None, kind=None, role=None, unit=None, values_unit=None, header={}, local=0, remote=0, rows=0,
        first=None, last=None, warnings=[],
        errors=["Did not detect devices", "If device exists, check if driver is up",
                "Unable to find the Infiniband/RoCE device"],
        failure="no_device"),
    "ib_write_bw-error-rtr-01.txt": dict(
        test=None, kind=None, role=None, unit=None, values_unit=None, header={}, local=0, remote=0, rows=0,
        first=None, last=None, warnings=[],
        errors=["Failed to modify QP 122273 to RTR", "Unable to Connect the HCA's through the link",
                "Failed to modify QP 122272 to RTR", "Unable to Connect the HCA's through the link"],
        failure="qp_connect_failed"),
    "ib_write_bw-server-error-rdmacm-01.txt": dict(
        test=None, kind=None, role=None, unit=None, values_unit=None, header={}, local=0, remote=0, rows=0,
        first=None, last=None, warnings=[],
        errors=["ethernet_read_keys: Couldn't read remote address", "Unable to read to socket/rdma_cm",
                "Failed to exchange data between server and clients"],
        failure="exchange_failed"),
    "ib_write_bw-client-error-rdmacm-01.txt": dict(
        test=None, kind=None, role=None, unit=None, values_unit=None, header={}, local=0, remote=0, rows=0,
        first=None, last=None, warnings=[],
        errors=["Failed to modify QP to RTS", "Unable to Connect the HCA's through the link"],
        failure="qp_connect_failed"),
    "ib_write_bw-server-error-createqp-01.txt": dict(
        test=None, kind=None, role="server", unit=None, values_unit=None, header={}, local=0, remote=0, rows=0,
        first=None, last=None, warnings=[],
        errors=["Couldn't get device attributes", "Unable to create QP.", "Failed to create QP.",
                "Couldn't create IB resources"],
        failure="create_qp_failed"),
    "ib_write_bw-client-error-createqp-01.txt": dict(
        test=None, kind=None, role=None, unit=None, values_unit=None, header={}, local=0, remote=0, rows=0,
        first=None, last=None, warnings=[],
        errors=["Couldn't get device attributes", "Unable to create QP.", "Failed to create QP.",
                "Couldn't create IB resources"],
        failure="create_qp_failed"),
}


def test_every_perftest_capture_has_expectations():
    names = sorted(p.name for p in CAPTURES.glob("ib_*.txt"))
    assert names == sorted(EXPECTED), "a perftest capture was added or removed: update EXPECTED"
    assert len(names) == 19


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parser_on_real_capture(name):
    exp = EXPECTED[name]
    got = perftest_output.parse_output(_text(name))
    for key in ("test", "kind", "role", "unit", "values_unit"):
        assert got[key] == exp[key], key
    for key, value in exp["header"].items():
        assert got["header"][key] == value, key
    if not exp["header"]:
        assert got["header"] == {}
    assert len(got["local"]) == exp["local"] and len(got["remote"]) == exp["remote"]
    assert len(got["results"]) == exp["rows"]
    if exp["first"]:
        for key, value in exp["first"].items():
            assert got["results"][0][key] == pytest.approx(value), key
        for key, value in exp["last"].items():
            assert got["results"][-1][key] == pytest.approx(value), key
    assert len(got["warnings"]) == len(exp["warnings"])
    for want, have in zip(exp["warnings"], got["warnings"]):
        assert have.startswith(want)
    assert got["errors"] == exp["errors"]
    failure = perftest_output.classify_failure(_text(name), 1)
    if exp["failure"]:
        assert failure["kind"] == exp["failure"]
        assert failure["cause"] and failure["fix"] and failure["evidence"]
    else:
        assert failure["kind"] == "exit_code"       # a successful output with a non-zero exit: nothing it knows


def test_real_tabs_in_header_and_old_report_format_are_read():
    text = _text("ib_write_bw-server-rocev2-02.txt")
    assert "\t" in text
    got = perftest_output.parse_output(text)
    assert got["header"]["device"] == "mlx5_3" and got["header"]["transport"] == "IB"
    assert got["header"]["srq"] is False and got["header"]["rdma_cm"] is False
    assert got["results"][0]["msg_rate_mpps"] == pytest.approx(0.183585)


def test_addresses_and_gids_are_decoded():
    got = perftest_output.parse_output(_text("ib_write_bw-client-rocev2-01.txt"))
    local, remote = got["local"][0], got["remote"][0]
    assert local == {"lid": 0, "qpn": 0x01ac, "psn": 0xc76db1, "out_reads": None, "rkey": "0x23beb2",
                     "vaddr": "0x007f26a2c8b000", "srqn": None, "gid": "0000:0000:0000:0000:0000:ffff:0a00:000b",
                     "gid_ipv4": "10.0.0.11", "gid_printed": "00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:11"}
    assert remote["qpn"] == 0x01a9 and remote["gid_ipv4"] == "10.0.0.12"
    bidir = perftest_output.parse_output(_text("ib_write_bw-client-bidir-multiqp-rocev2-01.txt"))
    assert [a["qpn"] for a in bidir["local"]] == [0x0800, 0x0002, 0x0801, 0x0003]
    assert bidir["remote"][1]["psn"] == 0x46d70
    assert bidir["local"][0]["gid"] == "fd93:0000:0000:0001:0000:0000:0000:01b0" and bidir["local"][0]["gid_ipv4"] is None
    ib = perftest_output.parse_output(_text("ib_read_lat-client-ib-01.txt"))
    assert ib["local"][0]["lid"] == 1 and ib["local"][0]["out_reads"] == 16 and ib["remote"][0]["lid"] == 4


def test_cuda_and_vendor_fork_lines_are_kept_aside_not_misread():
    cuda = perftest_output.parse_output(_text("ib_write_bw-client-rocev2-cuda-01.txt"))
    assert cuda["extra_lines"][0] == "initializing CUDA" and cuda["extra_lines"][-1] == "destroying current CUDA Ctx"
    fork = perftest_output.parse_output(_text("ib_write_bw-server-bidir-multiqp-rocev2-01.txt"))
    assert "Total run time: 187.693s" in fork["extra_lines"]
    assert fork["bidirectional"] is True


def test_mib_per_second_is_converted_with_two_to_the_twenty():
    got = perftest_output.parse_output(_text("ib_send_bw-client-ib-01.txt"))
    assert got["results"][-1]["bw_avg_gbps"] == pytest.approx(197.53469, abs=1e-5)    # HDR 200 Gb/s
    assert got["results"][-1]["bw_avg"] == 23547.97


MB_TABLE = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Link type       : Ethernet
 GID index       : 3
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      1000             10402.09            10401.68                  0.166427
---------------------------------------------------------------------------------------
"""


def test_mb_per_second_means_mebibytes_as_in_perftest_source():
    got = perftest_output.parse_output(MB_TABLE)
    assert got["unit"] == got["values_unit"] == "MB/sec" and got["warnings"] == []
    assert got["results"][0]["bw_avg_gbps"] == pytest.approx(10401.68 * 1048576 * 8 / 1e9, rel=1e-6)
    assert got["results"][0]["bw_avg_gbps"] == pytest.approx(87.255, abs=1e-3)


def test_client_in_mb_under_a_gbits_server_header_is_detected():
    text = MB_TABLE.replace("[MB/sec]", "[Gb/sec]")
    got = perftest_output.parse_output(text)
    assert got["unit"] == "Gb/sec" and got["values_unit"] == "MiB/sec"
    assert got["results"][0]["bw_avg_gbps"] == pytest.approx(87.255, abs=1e-3)
    assert "numbers match the message rate only in MiB/sec" in got["warnings"][0]


def test_latency_duration_per_port_and_cpu_util_columns():
    lat_dur = " #bytes        #iterations       t_avg[usec]  \t\n 2       1000            1.63\n"
    got = perftest_output.parse_output(lat_dur)
    assert got["kind"] == "lat" and got["results"] == [{"bytes": 2, "iterations": 1000, "t_avg_us": 1.63}]
    per_port = (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]   BW Port1[Gb/sec]"
                "   MsgRate Port1[Mpps]   BW Port2[Gb/sec]   MsgRate Port2[Mpps]    CPU_Util[%]\n"
                " 65536      5000           180.00             179.50\t\t   0.342369        90.00            0.171"
                "              89.50            0.170\t    12.50\n")
    row = perftest_output.parse_output(per_port)["results"][0]
    assert row["bw_port1_gbps"] == 90.0 and row["msg_rate_port2_mpps"] == 0.17 and row["cpu_util_pct"] == 12.5
    assert row["bw_avg_gbps"] == 179.5


def test_report_both_sections_go_to_local_and_remote_results():
    text = MB_TABLE.replace("[MB/sec]", "[Gb/sec]").replace("10402.09            10401.68", "87.26  87.25")
    text += " Local results: \n" + "-" * 87 + "\n" + text.splitlines()[5] + "\n 65536  1000  43.60  43.60  0.083\n"
    got = perftest_output.parse_output(text)
    assert len(got["results"]) == 1 and got["local_results"][0]["bw_avg_gbps"] == 43.6


# ------------------------------------------------------------------------------------------------ classify_failure
@pytest.mark.parametrize("text,kind,words", [
    ("IB device mlx5_9 not found\n Unable to find the Infiniband/RoCE device\n", "device_not_found", ["mlx5_9"]),
    (" Port number 1 state is Down\n Couldn't get context for the device\n", "port_not_active", ["port 1", "Down"]),
    (" Port number 2 state is Init\n", "port_not_active", ["Init", "SM"]),
    (" Unable to query port 3 attributes\n", "port_query_failed", ["port 3"]),
    ("Couldn't listen to port 18515\nUnable to open file descriptor for socket connection Unable to init the socket "
     "connection\n", "port_in_use", ["18515"]),
    ("Couldn't connect to fe80::1:18515\n", "server_not_listening", ["fe80::1 port 18515"]),
    ("\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n\n",
     "gid_type_mismatch", ["GID types"]),
    (" Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\nscnt=128, ccnt=0\n",
     "completion_error", ["12 IBV_WC_RETRY_EXC_ERR"]),
    ("rdma_resolve_addr failed\n Unable to perform rdma_client function\n", "rdma_cm_failed", ["rdma_cm"]),
    (" Parser function exited with Error\n", "bad_arguments", ["command line"]),
    (" Size should be between 1 and 8388608\n Parser function exited with Error\n", "bad_arguments", ["Size"]),
    ("Can't produce a report\n", "cpu_frequency", ["-F"]),
])
def test_classify_failure_names_cause_from_perftest_lines(text, kind, words):
    got = perftest_output.classify_failure(text, 1)
    assert got["kind"] == kind
    for word in words:
        assert word in got["cause"] + " " + got["fix"]


def test_classify_failure_exit_codes_and_timeouts():
    ok = _text("ib_write_bw-client-rocev2-01.txt")
    assert perftest_output.classify_failure(ok, 0) is None
    assert perftest_output.classify_failure(ok, None) is None                    # saved output without failure lines
    assert perftest_output.classify_failure(_text("ib_write_bw-error-rtr-01.txt"), None)["kind"] == "qp_connect_failed"
    assert perftest_output.classify_failure(ok, -9)["kind"] == "killed"
    timed = perftest_output.classify_failure(ok, -9, timed_out=True)
    assert timed["kind"] == "timeout" and "stalled" in timed["cause"]
    waiting = "\n************************************\n* Waiting for client to connect... *\n" + "*" * 36 + "\n"
    server = perftest_output.classify_failure(waiting, -9, timed_out=True)
    assert server["kind"] == "timeout" and "no client connected" in server["cause"]
    # perftest's own failure wins over the timeout that followed it
    assert perftest_output.classify_failure(_text("ib_write_bw-error-connect-01.txt"), -9, timed_out=True)["kind"] == \
        "server_not_listening"


def test_result_error_quotes_last_five_lines_and_the_cause():
    text = _text("ib_write_bw-error-rtr-01.txt")
    msg = perftest_run.result_error(text, 1, perftest_output.parse_output(text))
    assert msg.startswith("perftest printed no result row and exited with code 1; cause: the queue pair could not "
                          "move to RTR")
    assert msg.endswith("last lines: 'Failed to modify QP 122273 to RTR' | 'Unable to Connect the HCA's through the "
                        "link' | 'Failed to modify QP 122272 to RTR' | 'Unable to Connect the HCA's through the link'")
    server = _text("ib_write_bw-server-bidir-multiqp-rocev2-01.txt")
    cut = server.split(" #bytes")[0]
    msg = perftest_run.result_error(cut, None, perftest_output.parse_output(cut))
    assert "(RDMA_Write Bidirectional BW Test) printed no result row; cause: the output ends before the result table" \
        in msg
    assert msg.count("' | '") == 4                                   # five quoted lines


# ------------------------------------------------------------------------------------------------ argv / summary
def test_build_argv_client_with_every_option():
    argv = perftest_run.build_argv("ib_write_bw", "mlx5_0", 1, 3, "10.0.0.11", 18515, 1048576, 5000, None, 2, 106, True,
                         ["-a"])
    assert argv == ["ib_write_bw", "-d", "mlx5_0", "-i", "1", "-x", "3", "-p", "18515", "-s", "1048576", "-n",
                    "5000", "-q", "2", "--tclass=106", "--report_gbits", "-F", "-a", "10.0.0.11"]


def test_build_argv_server_latency_duration():
    argv = perftest_run.build_argv("ib_write_lat", "mlx5_1", 2, None, None, 20000, None, None, 10, None, None, True,
                                   None)
    assert argv == ["ib_write_lat", "-d", "mlx5_1", "-i", "2", "-p", "20000", "-D", "10", "-F"]


def test_summary_takes_the_largest_message_row():
    bw = perftest_output.parse_output(_text("ib_write_bw-client-rocev2-01.txt"))
    assert perftest_output.summary(bw) == {"bytes": 8388608, "bw_avg_gbps": 92.39, "bw_peak_gbps": 92.39,
                                           "msg_rate_mpps": 0.001377}
    lat = perftest_output.parse_output(_text("ib_send_lat-server-ib-01.txt"))
    assert perftest_output.summary(lat) == {"bytes": 16384, "t_typical_us": 3.76, "t_avg_us": 3.77, "p99_us": 3.91}
    assert perftest_output.summary(perftest_output.parse_output(_text("ib_read_lat-server-ib-01.txt"))) == {}


# ------------------------------------------------------------------------------------------------ validation / running
BASE = dict(test="ib_write_bw", device="mlx5_0", ib_port=1, gid_index=None, server=None, port=18515, size=None,
            iterations=None, duration=None, qps=1, tclass=None, timeout=60, extra_args=[], log_path=None,
            log_text=None)


@pytest.mark.parametrize("change,start", [
    (dict(device=None), "device: give the HCA to test"),
    (dict(device="mlx5_0 -a"), "device: an HCA name"),
    (dict(ib_port=0), "ib_port: must be 1-255"),
    (dict(gid_index=256), "gid_index: must be 0-255"),
    (dict(port=80), "port: must be 1024-65535"),
    (dict(port=70000), "port: must be 1024-65535"),
    (dict(size=0), "size: must be >= 1"),
    (dict(iterations=2), "iterations: must be 5-100000000"),
    (dict(iterations=10, duration=5), "iterations, duration: give one"),
    (dict(qps=0), "qps: must be 1-16384"),
    (dict(tclass=300), "tclass: must be 0-255"),
    (dict(timeout=0), "timeout: must be >= 1"),
    (dict(server="-x"), "server: the server side's address"),
    (dict(extra_args=["-d", "mlx5_1"]), "extra_args: -d is set by the module's device option"),
    (dict(extra_args=["--size=64"]), "extra_args: --size is set by the module's size option"),
    (dict(log_text="x", device="mlx5_0"), "device: applies to running perftest; log_text parses saved output"),
    (dict(log_path="/tmp/x", device=None, server="h", size=8), "server, size: apply to running perftest"),
])
def test_validate_names_field_and_allowed_values(change, start):
    assert perftest_run.validate(dict(BASE, **change)).startswith(start)


def test_validate_accepts_good_inputs():
    good = dict(BASE, gid_index=3, tclass=106, server="10.0.0.11", size=65536, iterations=5000)
    assert perftest_run.validate(good) is None
    assert perftest_run.validate(dict(BASE, device=None, log_text="...")) is None


def test_port_in_use_bind_test():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        assert perftest_run.port_in_use(port) == "TCP port %d is already in use on this host" % port
    finally:
        listener.close()
    assert perftest_run.port_in_use(port) is None


def test_run_kills_the_process_group_after_the_timeout(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import subprocess, sys, time\nprint('started', flush=True)\n"
                      "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\ntime.sleep(60)\n")
    start = time.monotonic()
    res = perftest_run.run([sys.executable, str(script)], 1)
    assert time.monotonic() - start < 10
    assert res["timed_out"] is True and res["rc"] == -9 and res["output"] == "started\n"


def test_run_reports_a_program_that_cannot_start(tmp_path):
    res = perftest_run.run([str(tmp_path / "ib_write_bw")], 5)
    assert res["rc"] == 127 and res["error"].startswith("cannot run ")


def test_evaluate_read_lat_server_without_table_is_success_and_other_servers_are_not():
    text = _text("ib_read_lat-server-ib-01.txt")
    failed, msg, res = perftest_run.evaluate(text, 0, tool="ib_read_lat", is_server=True)
    assert not failed and msg is None and res["rows"] == [] and res["failure"] is None and res["role"] == "server"
    failed, _msg, res = perftest_run.evaluate(text, None)                       # saved output: the banner tells
    assert not failed
    failed, msg, res = perftest_run.evaluate(text, 0, tool="ib_write_lat", is_server=True)
    assert failed and res["failure"]["kind"] == "no_result" and "printed no result row" in msg
    cut = text.split(" remote address")[0]                            # no client ever connected
    failed, _msg, res = perftest_run.evaluate(cut, 0, tool="ib_read_lat", is_server=True)
    assert failed
