# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module tests for hpcnet.rdma.perftest: saved output, a fake perftest on PATH, the timeout kill, bad inputs."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import time

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.hpcnet.rdma.plugins.modules import perftest as perftest_module
from fixtures_path import real_fixtures

CAPTURES = real_fixtures() / "perftest-nccl-tests"


class Exit(Exception):
    pass


class Fail(Exception):
    pass


@pytest.fixture
def run(monkeypatch):
    def exit_json(self, **kw):
        raise Exit(kw)

    def fail_json(self, **kw):
        raise Fail(kw)

    monkeypatch.setattr(perftest_module.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(perftest_module.AnsibleModule, "fail_json", fail_json)

    def _run(args, check_mode=False):
        if check_mode:
            args = dict(args, _ansible_check_mode=True)
        with patch_module_args(args):
            try:
                perftest_module.main()
            except (Exit, Fail) as exc:
                return isinstance(exc, Fail), exc.args[0]
        raise AssertionError("module returned without exit_json/fail_json")
    return _run


def _capture(name):
    return (CAPTURES / name).read_text(encoding="utf-8")


def _free_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def fake_tool(tmp_path, monkeypatch):
    """Write a fake perftest tool on PATH; it records its argv in argv.json, prints ``body`` and exits ``rc``."""
    def _make(name, capture=None, rc=0, sleep=0, extra=""):
        out = tmp_path / "out.txt"
        out.write_text(_capture(capture) if capture else "", encoding="utf-8")
        script = tmp_path / name
        script.write_text(
            "#!%s\nimport json, sys, time\n"
            "json.dump(sys.argv, open(%r, 'w'))\n"
            "sys.stdout.write(open(%r).read()); sys.stdout.flush()\n"
            "%s\n"
            "time.sleep(%d)\nsys.exit(%d)\n" % (sys.executable, str(tmp_path / "argv.json"), str(out), extra, sleep, rc))
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
        return script
    return _make


def _argv(tmp_path):
    return json.loads((tmp_path / "argv.json").read_text())


# ------------------------------------------------------------------------------------------------ saved output
def test_log_text_of_a_client_returns_header_rows_and_summary(run):
    failed, res = run({"log_text": _capture("ib_write_bw-client-rocev2-01.txt")})
    assert not failed and res["changed"] is False
    assert res["test"] == "RDMA_Write BW Test" and res["kind"] == "bw" and res["tool"] is None and res["cmd"] == []
    assert res["header"]["gid_index"] == 5 and res["header"]["mtu"] == 1024 and res["header"]["link_type"] == "Ethernet"
    assert len(res["rows"]) == 23 and res["unit"] == "Gb/sec"
    assert res["summary"] == {"bytes": 8388608, "bw_avg_gbps": 92.39, "bw_peak_gbps": 92.39, "msg_rate_mpps": 0.001377}
    assert res["failure"] is None and "rc" not in res and len(res["stdout_lines"]) == 40


def test_log_text_as_a_list_of_lines_and_check_mode(run):
    lines = _capture("ib_send_bw-client-ib-01.txt").splitlines()
    failed, res = run({"log_text": lines}, check_mode=True)
    assert not failed and res["changed"] is False
    assert res["perftest_warnings"] == ["WARNING: BW peak won't be measured in this run."]
    assert res["summary"]["bw_avg_gbps"] == pytest.approx(197.53469, abs=1e-5)


def test_log_path_of_the_half_duplex_server_in_mb(run):
    failed, res = run({"log_path": str(CAPTURES / "ib_write_bw-server-rocev2-02.txt")})
    assert not failed and res["role"] == "server"
    assert res["unit"] == "MB/sec" and res["values_unit"] == "Gb/sec" and res["summary"]["bw_avg_gbps"] == 96.25


def test_read_lat_server_without_table_is_success_with_no_rows(run):
    failed, res = run({"log_text": _capture("ib_read_lat-server-ib-01.txt")})
    assert not failed and res["rows"] == [] and res["summary"] == {} and res["kind"] == "lat"


@pytest.mark.parametrize("name,kind", [
    ("ib_write_bw-error-connect-01.txt", "server_not_listening"),
    ("ib_write_bw-error-nodevice-01.txt", "no_device"),
    ("ib_write_bw-error-rtr-01.txt", "qp_connect_failed"),
    ("ib_write_bw-server-error-rdmacm-01.txt", "exchange_failed"),
    ("ib_write_bw-client-error-rdmacm-01.txt", "qp_connect_failed"),
    ("ib_write_bw-server-error-createqp-01.txt", "create_qp_failed"),
    ("ib_write_bw-client-error-createqp-01.txt", "create_qp_failed"),
])
def test_error_captures_fail_with_quoted_lines_and_cause(run, name, kind):
    failed, res = run({"log_text": _capture(name)})
    assert failed and res["failure"]["kind"] == kind
    last = [ln.strip() for ln in _capture(name).splitlines() if ln.strip()][-1]
    assert "'%s'" % last in res["msg"] and res["failure"]["cause"] in res["msg"]
    assert res["rows"] == [] and res["changed"] is False


def test_missing_log_path_is_a_clear_error(run, tmp_path):
    failed, res = run({"log_path": str(tmp_path / "nope.txt")})
    assert failed and res["msg"] == "log_path %s: no such file" % (tmp_path / "nope.txt")


# ------------------------------------------------------------------------------------------------ bad inputs
@pytest.mark.parametrize("args,msg", [
    ({}, "device: give the HCA to test (for example mlx5_0), or log_path / log_text to parse saved perftest output"),
    ({"device": "mlx5_0", "gid_index": 300}, "gid_index: must be 0-255 (the GID table index, see show_gids), got 300"),
    ({"device": "mlx5_0", "port": 80}, "port: must be 1024-65535 (perftest's out-of-band TCP port), got 80"),
    ({"device": "mlx5_0", "tclass": -1}, "tclass: must be 0-255 (the ToS byte: DSCP << 2 | ECN), got -1"),
    ({"device": "mlx5_0", "size": 0}, "size: must be >= 1 (message size in bytes), got 0"),
    ({"device": "mlx5_0", "iterations": 100, "duration": 5},
     "iterations, duration: give one (perftest runs -n iterations or -D seconds, not both)"),
    ({"device": "mlx5_0", "extra_args": ["-q", "4"]}, "extra_args: -q is set by the module's qps option"),
    ({"log_text": "x", "server": "10.0.0.1"},
     "server: applies to running perftest; log_text parses saved output (give one or the other)"),
])
def test_bad_inputs_name_the_field_and_allowed_values(run, args, msg):
    failed, res = run(args)
    assert failed and res["msg"] == msg


def test_bad_test_choice_is_rejected(run):
    failed, res = run({"device": "mlx5_0", "test": "ib_atomic_bw"})
    assert failed and "value of test must be one of: ib_write_bw, ib_write_lat" in res["msg"]


def test_log_path_and_log_text_are_exclusive(run):
    failed, res = run({"log_path": "/tmp/a", "log_text": "b"})
    assert failed and "mutually exclusive: log_path|log_text" in res["msg"]


# ------------------------------------------------------------------------------------------------ running
def test_client_runs_fake_ib_write_bw_with_exact_argv(run, fake_tool, tmp_path):
    fake_tool("ib_write_bw", "ib_write_bw-client-rocev2-01.txt")
    failed, res = run({"device": "mlx5_0", "gid_index": 5, "server": "10.0.0.11", "size": 65536, "iterations": 5000,
                       "tclass": 106, "port": 18600})
    assert not failed, res.get("msg")
    expected = [str(tmp_path / "ib_write_bw"), "-d", "mlx5_0", "-i", "1", "-x", "5", "-p", "18600", "-s", "65536",
                "-n", "5000", "-q", "1", "--tclass=106", "--report_gbits", "-F", "10.0.0.11"]
    assert res["cmd"] == expected and _argv(tmp_path) == expected
    assert res["rc"] == 0 and res["role"] == "client" and res["tool"] == "ib_write_bw" and res["changed"] is False
    assert res["summary"]["bw_avg_gbps"] == 92.39 and res["failure"] is None


def test_read_lat_server_runs_and_succeeds_without_table(run, fake_tool, tmp_path):
    fake_tool("ib_read_lat", "ib_read_lat-server-ib-01.txt")
    port = _free_port()
    failed, res = run({"test": "ib_read_lat", "device": "mlx4_0", "port": port}, check_mode=True)
    assert not failed and res["rows"] == [] and res["role"] == "server"
    assert _argv(tmp_path)[1:] == ["-d", "mlx4_0", "-i", "1", "-p", str(port), "-q", "1", "-F"]


def test_server_fails_clearly_when_the_tcp_port_is_taken(run, fake_tool, tmp_path):
    fake_tool("ib_write_bw", "ib_write_bw-server-rocev2-02.txt")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        failed, res = run({"device": "mlx5_3", "port": port})
    finally:
        listener.close()
    assert failed and res["msg"].startswith("port: TCP port %d is already in use on this host" % port)
    assert res["failure"]["kind"] == "port_in_use" and not (tmp_path / "argv.json").exists()


def test_non_zero_exit_fails_with_the_classified_cause(run, fake_tool):
    fake_tool("ib_write_bw", "ib_write_bw-error-connect-01.txt", rc=1)
    failed, res = run({"device": "mlx5_0", "server": "10.0.0.11"})
    assert failed and res["rc"] == 1 and res["failure"]["kind"] == "server_not_listening"
    assert res["msg"].startswith("perftest printed no result row and exited with code 1; cause: no perftest server "
                                 "listens at 10.0.0.11 port 18515")


def test_non_zero_exit_after_results_still_fails(run, fake_tool):
    fake_tool("ib_write_bw", "ib_write_bw-client-rocev2-01.txt", rc=1,
              extra="sys.stderr.write('Failed to close connection between server and client\\n')")
    failed, res = run({"device": "mlx5_0", "server": "10.0.0.11"})
    assert failed and len(res["rows"]) == 23
    assert res["msg"].startswith("ib_write_bw exited with code 1 after printing results")
    assert "'Failed to close connection between server and client'" in res["msg"]


def test_timeout_kills_the_tool_and_fails(run, fake_tool):
    fake_tool("ib_write_bw", "ib_write_bw-server-error-createqp-01.txt", sleep=30)
    start = time.monotonic()
    failed, res = run({"device": "mlx5_0", "server": "10.0.0.11", "timeout": 1})
    assert time.monotonic() - start < 15
    assert failed and res["timed_out"] is True and res["rc"] == -9
    # perftest printed its own failure before hanging: that is the cause, not the timeout
    assert res["failure"]["kind"] == "create_qp_failed"
    assert "(killed after the 1 s timeout)" in res["msg"]


def test_timeout_of_a_server_nobody_connects_to(run, fake_tool):
    start = time.monotonic()
    fake_tool("ib_write_bw", None, sleep=30,
              extra="print('\\n' + '*' * 36 + '\\n* Waiting for client to connect... *\\n' + '*' * 36, flush=True)")
    failed, res = run({"device": "mlx5_0", "port": _free_port(), "timeout": 1})
    assert failed and res["timed_out"] is True and res["failure"]["kind"] == "timeout"
    assert "no client connected" in res["failure"]["cause"] and "(killed after the 1 s timeout)" in res["msg"]
    assert time.monotonic() - start < 15


def test_missing_tool_is_a_clear_error(run, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(perftest_module.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    failed, res = run({"device": "mlx5_0", "server": "10.0.0.11", "test": "ib_send_lat"})
    assert failed and res["msg"] == "ib_send_lat: not found on this host (install perftest)"
