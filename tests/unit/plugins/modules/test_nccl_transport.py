# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module tests for hpcnet.rdma.nccl_transport: every input mode and every expectation failure."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.hpcnet.rdma.plugins.modules import nccl_transport
from fixtures_path import real_fixtures

LOGS = real_fixtures() / "nccl-logs"

ROCE_LOG = "\n".join([
    "node01:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "NCCL version 2.19.3+cuda12.3",
    "node01:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
    "node01:1:1 [0] NCCL INFO Using network IB",
    "node01:1:1 [0] NCCL INFO NET/IB: Dev 0 Port 1 qpn 58 mtu 3 GID 0 (80FE/E05BC4FFFE3A1B2C)",
    "node01:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0",
    "node01:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
    "node02:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
    "node02:2:2 [0] NCCL INFO NET/IB : No device found.",
    "node02:2:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>",
    "node02:2:2 [0] NCCL INFO Using network Socket",
])


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

    monkeypatch.setattr(nccl_transport.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(nccl_transport.AnsibleModule, "fail_json", fail_json)

    def _run(args, check_mode=False):
        if check_mode:
            args = dict(args, _ansible_check_mode=True)
        with patch_module_args(args):
            try:
                nccl_transport.main()
            except (Exit, Fail) as exc:
                return isinstance(exc, Fail), exc.args[0]
        raise AssertionError("module returned without exit_json/fail_json")
    return _run


def test_log_path_mode_reports_without_expectations(run):
    failed, res = run({"log_path": str(LOGS / "18-nccl2.18-roce-gid-index-3-init-complete.log")})
    assert not failed
    assert res["changed"] is False
    assert res["net_transport"] == "IB"
    assert res["ib_devices"] == [{"name": "mlx5_4", "port": 1, "link_layer": "RoCE"}]
    assert res["findings"] == []


def test_log_path_mode_works_in_check_mode(run):
    failed, res = run({"log_path": str(LOGS / "15-nccl2.11-forced-socket-dgx-a100.log")}, check_mode=True)
    assert not failed and res["changed"] is False and res["net_transport"] == "Socket"


def test_log_text_mode(run):
    failed, res = run({"log_text": "node01:1:1 [0] NCCL INFO Using network IB\n"})
    assert not failed and res["net_transport"] == "IB"


def test_missing_file_is_a_clear_error(run, tmp_path):
    failed, res = run({"log_path": str(tmp_path / "nope.log")})
    assert failed and "log_path" in res["msg"] and "no such file" in res["msg"]


def test_empty_log_is_a_clear_error(run, tmp_path):
    p = tmp_path / "empty.log"
    p.write_text("")
    failed, res = run({"log_path": str(p)})
    assert failed and "empty" in res["msg"] and "NCCL_DEBUG=INFO" in res["msg"]


def test_log_without_nccl_lines_is_a_clear_error(run):
    failed, res = run({"log_text": "hello\nworld\n"})
    assert failed and "no NCCL output" in res["msg"]


def test_modes_are_mutually_exclusive(run):
    failed, res = run({"log_text": "x", "log_path": "/tmp/x"})
    assert failed and "mutually exclusive" in res["msg"]


def test_expect_link_layer_choices_are_enforced(run):
    failed, res = run({"log_text": "x", "expect_link_layer": "Ethernet"})
    assert failed and "expect_link_layer" in res["msg"] and "RoCE" in res["msg"]


def test_expect_transport_failure_quotes_evidence_and_cause(run):
    failed, res = run({"log_text": ROCE_LOG, "expect_transport": "IB"})
    assert failed
    assert "expected transport IB but NCCL selected Socket on node02:2" in res["msg"]
    assert "Using network Socket" in res["msg"] or "NET/Socket" in res["msg"]
    assert "No device found" in res["msg"]
    assert res["changed"] is False


def test_expect_transport_plugin_name_matches_versioned_name(run):
    failed, res = run({"log_path": str(LOGS / "33-ibext-v8-64-ranks-nvls-tree-multinode.log"), "expect_transport": "IBext"})
    assert not failed, res.get("msg")
    failed, res = run({"log_path": str(LOGS / "33-ibext-v8-64-ranks-nvls-tree-multinode.log"), "expect_transport": "IB"})
    assert failed and "plugin:IBext_v8" in res["msg"] and "NCCL_NET" in res["msg"]


def test_expect_link_layer_failure(run):
    failed, res = run({"log_path": str(LOGS / "16-nccl2.12-mixed-ib-roce-ports-nvml-warn.log"), "expect_link_layer": "IB"})
    assert failed and "mlx5_2:1/RoCE" in res["msg"] and "NCCL_IB_HCA" in res["msg"]


def test_expect_gdr_failure_says_load_nvidia_peermem(run):
    failed, res = run({"log_path": str(LOGS / "27-roce-gpu-direct-rdma-disabled.log"), "expect_gdr": True})
    assert failed
    assert "GPUDirect RDMA disabled: load nvidia_peermem" in res["msg"]
    assert "GPU Direct RDMA Disabled for HCA 0 'mlx5_0'" in res["msg"]


def test_expect_gdr_met(run):
    failed, res = run({"log_path": str(LOGS / "34-ibext-v8-gdrdma-collnet-watchdog-timeout.log"), "expect_gdr": True})
    assert not failed


def test_expect_hcas_failure(run):
    failed, res = run({"log_path": str(LOGS / "18-nccl2.18-roce-gid-index-3-init-complete.log"), "expect_hcas": ["mlx5_0", "mlx5_4"]})
    assert failed and "expected HCAs mlx5_0" in res["msg"] and "mlx5_4" in res["msg"]


def test_forbid_fallback_failure_quotes_probe_line(run):
    failed, res = run({"log_path": str(LOGS / "10-nccl2.5-single-node-docker-lo-no-ib-device.log"), "forbid_fallback": True})
    assert failed and "fell back to sockets" in res["msg"] and "NET/IB : No device found." in res["msg"]


def test_gid_index_hint_on_link_local_roce_gid(run, tmp_path):
    ports = tmp_path / "class/infiniband/mlx5_0/ports/1"
    (ports / "gid_attrs/types").mkdir(parents=True)
    (ports / "gids").mkdir()
    for idx, kind, gid in ((0, "IB/RoCE v1", "fe80:0000:0000:0000:e25b:c4ff:fe3a:1b2c"),
                           (1, "RoCE v2", "fe80:0000:0000:0000:e25b:c4ff:fe3a:1b2c"),
                           (2, "IB/RoCE v1", "0000:0000:0000:0000:0000:ffff:0a00:0001"),
                           (3, "RoCE v2", "0000:0000:0000:0000:0000:ffff:0a00:0001")):
        (ports / "gid_attrs/types" / str(idx)).write_text(kind + "\n")
        (ports / "gids" / str(idx)).write_text(gid + "\n")
    failed, res = run({"log_text": ROCE_LOG, "expect_transport": "IB", "sysfs_root": str(tmp_path)})
    assert failed
    assert ("NCCL_IB_GID_INDEX=0 selects a link-local RoCE v1 GID (fe80::, line 5); "
            "the RoCE v2 IPv4 GID on mlx5_0 port 1 is index 3") in res["msg"]


def test_all_expectations_met(run):
    failed, res = run({"log_path": str(LOGS / "18-nccl2.18-roce-gid-index-3-init-complete.log"), "expect_transport": "IB",
                       "expect_link_layer": "RoCE", "expect_hcas": ["mlx5_4"], "forbid_fallback": True})
    assert not failed, res.get("msg")


def _script(tmp_path, body, interpreter=sys.executable):
    """An executable script in tmp_path: Python by default, or e.g. /bin/sh."""
    p = tmp_path / ("job.sh" if interpreter == "/bin/sh" else "fake_perf.py")
    p.write_text("#!%s\n%s\n" % (interpreter, body))
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


FAKE_PERF = r'''
import os, sys
print("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor)")
print("node01:7:7 [0] NCCL INFO NCCL_DEBUG=%s HCA=%s" % (os.environ.get("NCCL_DEBUG"), os.environ.get("NCCL_IB_HCA")))
print("node01:7:7 [0] NCCL INFO NET/IB : Using [0]%s:1/IB ; OOB ib0:10.0.0.1<0>" % os.environ.get("NCCL_IB_HCA", "mlx5_0"))
sys.stderr.write("node01:7:7 [0] NCCL INFO Using network IB\n")
print("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)")
print("     1048576        262144     float     sum      -1    50.10   20.93   39.24      0    49.80   21.05   39.48      0")
print("# Avg bus bandwidth    : 39.36 ")
'''


def test_command_mode_runs_with_nccl_debug_and_keeps_busbw(run, tmp_path):
    cmd = _script(tmp_path, FAKE_PERF)
    failed, res = run({"command": [cmd], "env": {"NCCL_IB_HCA": "mlx5_7"}, "expect_hcas": ["mlx5_7"]})
    assert not failed, res.get("msg")
    assert res["rc"] == 0
    assert res["net_transport"] == "IB"
    assert res["busbw"]["avg_busbw_gbps"] == pytest.approx(39.36)
    assert res["busbw"]["rows"][0]["in_place"]["busbw_gbps"] == pytest.approx(39.48)


def test_command_mode_also_runs_in_check_mode(run, tmp_path):
    failed, res = run({"command": [_script(tmp_path, FAKE_PERF)]}, check_mode=True)
    assert not failed and res["changed"] is False and res["net_transport"] == "IB"


def test_command_not_found_is_a_clear_error(run, tmp_path):
    failed, res = run({"command": [str(tmp_path / "no_such_binary")]})
    assert failed and "cannot run it" in res["msg"] and "no_such_binary" in res["msg"]


def test_command_timeout_kills_a_hung_job(run, tmp_path):
    cmd = _script(tmp_path, "import time, sys\nprint('node01:7:7 [0] NCCL INFO Using network IB', flush=True)\ntime.sleep(60)\n")
    failed, res = run({"command": [cmd], "timeout": 1})
    assert failed and "timed out after 1 s" in res["msg"]
    assert res["net_transport"] == "IB"


def test_bad_timeout_is_rejected(run):
    failed, res = run({"command": ["true"], "timeout": 0})
    assert failed and "timeout" in res["msg"]


def test_result_is_json_serialisable(run):
    failed, res = run({"log_path": str(LOGS / "25-hpcx-ibext-sharp-plugin-collnet-plugin-loaded.log")})
    json.dumps(res)


def test_summary_says_what_nccl_did_in_one_line(run):
    failed, res = run({"log_path": str(LOGS / "18-nccl2.18-roce-gid-index-3-init-complete.log")})
    assert not failed
    assert res["msg"] == res["summary"] == "NCCL 2.18.5; used IB over RoCE (mlx5_4:1); multi-node"


def test_summary_warns_about_a_socket_fallback(run):
    failed, res = run({"log_path": str(LOGS / "10-nccl2.5-single-node-docker-lo-no-ib-device.log")})
    assert not failed
    assert "used Socket" in res["summary"] and "WARNING: fell back from IB to TCP sockets" in res["summary"]


@pytest.mark.parametrize("value, advice", [
    ("RoCE", "use expect_transport=IB expect_link_layer=RoCE"),
    ("tcp", "use expect_transport=Socket"),
    ("InfiniBand", "use expect_transport=IB"),
])
def test_expect_transport_that_names_a_link_layer_gets_the_right_advice(run, value, advice):
    failed, res = run({"log_text": ROCE_LOG, "expect_transport": value})
    assert failed and advice in res["msg"] and "allowed: IB, Socket" in res["msg"]


def test_directory_log_path_is_named_as_a_directory(run, tmp_path):
    failed, res = run({"log_path": str(tmp_path)})
    assert failed and res["msg"] == "log_path %s is a directory; give the log file" % tmp_path


def test_failing_command_without_nccl_output_reports_its_exit_code(run):
    failed, res = run({"command": ["/bin/false"]})
    assert failed and res["msg"] == "command /bin/false exited with code 1 and printed no NCCL output"




def test_expect_link_layer_advice_lists_the_ports_to_keep(run):
    failed, res = run({"log_path": str(LOGS / "16-nccl2.12-mixed-ib-roce-ports-nvml-warn.log"), "expect_link_layer": "RoCE"})
    assert failed
    assert 'NCCL_IB_HCA="=mlx5_2:1' in res["msg"]
    assert "mlx5_0:1/IB" in res["msg"]


def test_expect_link_layer_with_no_port_of_that_layer_says_so(run):
    failed, res = run({"log_path": str(LOGS / "19-nccl2.19-roce-two-ports-ring-tree-topology.log"), "expect_link_layer": "IB"})
    assert failed and "no port NCCL listed is IB" in res["msg"]


def test_link_local_roce_gid_fails_expect_link_layer_roce_and_is_in_the_summary(run):
    failed, res = run({"log_text": ROCE_LOG, "expect_link_layer": "RoCE", "sysfs_root": "/nonexistent"})
    assert failed and "NCCL_IB_GID_INDEX=0 selects a link-local RoCE v1 GID" in res["msg"]
    assert "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/" in res["msg"]
    ok, res = run({"log_text": ROCE_LOG})
    assert "link-local RoCE v1 GID" in res["summary"]


def test_tcp_provider_of_aws_ofi_nccl_is_a_fallback(run):
    log = str(LOGS / "03-nccl2.4-ofi-plugin-tcp-provider-aws.log")
    failed, res = run({"log_path": log, "forbid_fallback": True})
    assert failed and "tcp;ofi_rxm" in res["msg"] and "not EFA" in res["msg"]
    failed, res = run({"log_path": log})
    assert not failed and "is TCP, not EFA/RDMA" in res["summary"]


def test_ib_disabled_by_environment_is_named_as_the_cause(run):
    failed, res = run({"log_path": str(LOGS / "20-ib-disable-1-socket-over-ipoib.log"), "expect_transport": "IB"})
    assert failed and "NCCL_IB_DISABLE=1 is set" in res["msg"]


@pytest.mark.parametrize("hcas", [["mlx5_4:1"], ["=mlx5_4"], ["mlx5_4:1,mlx5_4"]])
def test_expect_hcas_accepts_nccl_ib_hca_forms(run, hcas):
    failed, res = run({"log_path": str(LOGS / "18-nccl2.18-roce-gid-index-3-init-complete.log"), "expect_hcas": hcas})
    assert not failed, res["msg"]


def test_log_text_accepts_a_list_of_lines(run):
    failed, res = run({"log_text": ROCE_LOG.split("\n")})
    assert not failed and res["net_transport"] == "IB"


@pytest.mark.parametrize("env, word", [({"NCCL_IB_DISABLE": True}, "env.NCCL_IB_DISABLE"), ({"A=B": "1"}, "'A=B'"),
                                       ({"X": None}, "env.X"), ({"X": [1]}, "env.X")])
def test_env_values_must_be_strings_or_numbers(run, env, word):
    failed, res = run({"command": ["/bin/true"], "env": env})
    assert failed and word in res["msg"]


def test_command_given_as_one_string_is_explained(run):
    failed, res = run({"command": "cat x.log"})
    assert failed and "give an argv list" in res["msg"] and "[cat, x.log]" in res["msg"]


def test_env_without_command_is_rejected(run):
    failed, res = run({"log_text": ROCE_LOG, "env": {"A": "1"}})
    assert failed and res["msg"] == "env applies to command only; it was given with log_text"


def test_log_path_kinds_get_their_own_message(run, tmp_path):
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "gone.log")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    gz = tmp_path / "run.log.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00rest")
    assert "symbolic link to a missing file" in run({"log_path": str(link)})[1]["msg"]
    assert "not a regular file" in run({"log_path": str(fifo)})[1]["msg"]
    assert "gzip-compressed" in run({"log_path": str(gz)})[1]["msg"]


def test_unmet_expectation_of_a_failing_command_names_its_exit_code(run, tmp_path):
    script = _sh_script(tmp_path, "cat %s\nexit 3" % (LOGS / "27-roce-gpu-direct-rdma-disabled.log"))
    failed, res = run({"command": [script], "expect_gdr": True})
    assert failed and "the command exited with code 3" in res["msg"]


@pytest.mark.parametrize("value, word", [("", "names no network"), ("plugin:", "names no network"),
                                         ("NET/IB", "(IB)"), ("NET/IBext_v8/0", "(IBext_v8)")])
def test_expect_transport_that_names_no_network_is_rejected(run, value, word):
    failed, res = run({"log_text": ROCE_LOG, "expect_transport": value})
    assert failed and word in res["msg"] and "allowed: IB, Socket" in res["msg"]


def test_expect_socket_when_rdma_was_used_says_how_to_force_sockets(run):
    failed, res = run({"log_path": str(LOGS / "18-nccl2.18-roce-gid-index-3-init-complete.log"), "expect_transport": "Socket"})
    assert failed and "NCCL_NET=Socket" in res["msg"]


def _sh_script(tmp_path, body):
    return _script(tmp_path, body, interpreter="/bin/sh")


@pytest.mark.parametrize("tail, word", [("exit 3", "exited with code 3"), ("kill -SEGV $$", "killed by signal 11")])
def test_a_failing_command_fails_even_without_expectations(run, tmp_path, tail, word):
    failed, res = run({"command": [_sh_script(tmp_path, "cat %s\n%s" % (LOGS / "18-nccl2.18-roce-gid-index-3-init-complete.log", tail))]})
    assert failed and word in res["msg"] and word in " ".join(res["findings"])


def test_timeout_result_keeps_summary_and_findings(run, tmp_path):
    body = "cat %s\nsleep 30" % (LOGS / "18-nccl2.18-roce-gid-index-3-init-complete.log")
    failed, res = run({"command": [_sh_script(tmp_path, body)], "timeout": 2, "expect_transport": "Socket"})
    assert failed and "timed out" in res["msg"]
    assert res["summary"].startswith("NCCL 2.18.5") and res["findings"]


@pytest.mark.parametrize("args, word", [
    ({"command": ["/bin/true"], "chdir": "/nonexistent"}, "chdir '/nonexistent': no such directory"),
    ({"command": [""]}, "the program (first item) is empty"),
    ({"command": ["/bin/true"], "env": {"FOO": "a\x00b"}}, "env.FOO: the value contains a NUL byte"),
    ({"log_text": ROCE_LOG, "expect_hcas": ["^mlx5_1"]}, "exclude syntax"),
    ({"log_text": ROCE_LOG, "expect_hcas": [""]}, "give HCA names"),
    ({"log_text": ROCE_LOG, "expect_hcas": ["mlx5_4:x"]}, "give HCA names"),
    ({"log_text": ROCE_LOG, "expect_transport": "[IB]"}, "is not a network name"),
    ({"log_text": ROCE_LOG, "expect_transport": "plugin:IB"}, "use expect_transport=IB"),
])
def test_bad_values_name_their_field(run, args, word):
    failed, res = run(args)
    assert failed and word in res["msg"]


@pytest.mark.parametrize("log, expected", [("33-ibext-v8-64-ranks-nvls-tree-multinode.log", "ibext"),
                                           ("29-ofi-efa-p5en-using-network-libfabric.log", "AWS Libfabric")])
def test_plugin_expectation_ignores_case_and_the_aws_ofi_rename(run, log, expected):
    failed, res = run({"log_path": str(LOGS / log), "expect_transport": expected})
    assert not failed, res["msg"]


def test_expect_gdr_on_a_socket_run_says_fix_the_fallback_first(run):
    failed, res = run({"log_path": str(LOGS / "22-ib-disable-and-ibext-disable-socket-on-lo.log"), "expect_gdr": True})
    assert failed and "TCP sockets, which have no GPUDirect RDMA" in res["msg"] and "nvidia_peermem" not in res["msg"]


def test_gid_finding_is_not_repeated(run):
    failed, res = run({"log_text": ROCE_LOG, "expect_link_layer": "RoCE", "expect_transport": "IB", "sysfs_root": "/nonexistent"})
    gid = [f for f in res["findings"] if f.startswith("NCCL_IB_GID_INDEX=0")]
    assert failed and len(gid) == 1


def test_summary_names_differing_versions_and_partial_gdr(run):
    log = "\n".join(["n1:1:1 [0] NCCL INFO NCCL version 2.18.5+cuda12.2",
                     "n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
                     "n2:2:2 [0] NCCL INFO NCCL version 2.19.3+cuda12.3",
                     "n2:2:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/IB/0"])
    failed, res = run({"log_text": log})
    assert "NCCL versions 2.18.5, 2.19.3 (processes differ)" in res["summary"]
    assert "GPUDirect RDMA on some processes only" in res["summary"]


@pytest.mark.parametrize("key, value, words", [
    ("command", ["all_reduce_perf", None], "command: every item must be a string (an argument is null)"),
    ("command", ["all_reduce_perf", {"g": 8}], "(an argument is dict)"),
    ("log_text", ["node01:1:1 [0] NCCL INFO Using network IB", 5, None], "log_text: every item must be a string"),
])
def test_list_items_that_are_not_strings_are_named(run, key, value, words):
    failed, res = run({key: value})
    assert failed and words in res["msg"]


def test_expect_transport_must_be_a_network_name(run):
    failed, res = run({"log_text": "node01:1:1 [0] NCCL INFO Using network IB\n", "expect_transport": "5"})
    assert failed and "not a network name" in res["msg"] and "allowed: IB, Socket" in res["msg"]


def test_relative_log_path_says_where_it_was_read_from(run):
    failed, res = run({"log_path": "no-such-run.log"})
    assert failed and "relative paths are read from %s" % os.getcwd() in res["msg"]


def test_summary_names_the_cause_of_a_fallback_and_a_crash(run):
    failed, res = run({"log_text": "h:1:2 [0] NCCL INFO Failed to open libibverbs.so[.1]\n"
                                   "h:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
                                   "h:1:2 [0] NCCL INFO Using network Socket\n"
                                   "[h:1] *** Process received signal ***\n"})
    assert not failed
    assert "fell back from IB to TCP sockets (libibverbs could not be loaded: install rdma-core)" in res["summary"]
    assert "WARNING: a process crashed" in res["summary"]


def test_summary_of_processes_on_different_transports_does_not_name_one(run):
    failed, res = run({"log_text": "a:1:2 [0] NCCL INFO Using network IB\nb:1:2 [0] NCCL INFO Using network Socket\n"})
    assert not failed and "processes used different network transports (IB, Socket" in res["summary"]
