"""verify: a launcher that fails is explained (its own error, the last lines of its output), its arguments are its
own, and ranks that ran alone are a failure, not a pass."""

from __future__ import annotations

import pytest

from fixtures_path import real_fixtures
from simhost import profile, tree
from simhost.tools import nccl_tests as nt
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import analyze_text
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import launcher_output, verify_nccl, verify_plan

CAPTURES = real_fixtures() / "perftest-nccl-tests"
HOSTS = [{"inventory_hostname": "roce-node01", "ansible_facts": {"hostname": "roce-node01"}},
         {"inventory_hostname": "roce-node02", "ansible_facts": {"hostname": "roce-node02"}}]
NO_OUTPUT = {"per_host": {}, "findings": [], "errors": [], "busbw": {}, "evidence": {}, "ranks": None,
             "summary": "command timeout exited with code 255 and printed no NCCL output"}


def _capture(name):
    return (CAPTURES / name).read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------ the launcher's own error
def test_srun_refusing_mpiruns_option_is_the_cause_and_the_evidence():
    stderr = _capture("srun-unrecognized-option-01.txt")
    v = verify_nccl.test_verdict("all_reduce_perf", "roce", NO_OUTPUT, "", 255, HOSTS, stderr=stderr,
                                 launcher="srun", timeout=600)
    [f] = v["findings"]
    assert (f["host"], f["check"], f["found"]) == ("roce-node01", "nccl_tests_exit", "exit code 255")
    assert f["cause"].startswith("srun refused its arguments (unknown option --mca)")
    assert "verify_srun_args" in f["fix"]
    assert f["evidence"] == ["srun: unrecognized option '--mca'",
                             'stderr: Try "srun --help" for more information']


def test_srun_invalid_short_option():
    out = launcher_output.classify("srun", "", "srun: invalid option -- 'H'\n", 1)
    assert out["kind"] == "unknown_option" and "invalid option -H" in out["cause"]


def test_an_option_error_of_the_other_launcher_does_not_apply():
    # mpirun's wording is not srun's: a run under srun that prints it falls through to the generic cause
    out = launcher_output.classify("srun", "", 'mpirun: Error: unknown option "--mpi=pmix"\n', 1)
    assert out["kind"] == "exit_code"
    out = launcher_output.classify("mpirun", "", 'mpirun: Error: unknown option "--mpi=pmix"\n', 1)
    assert out["kind"] == "unknown_option" and "unknown option --mpi=pmix" in out["cause"]


@pytest.mark.parametrize("capture, rc, launcher, kind, words", [
    ("srun-pmix-timeout-01.txt", 124, "srun", "pmix_timeout", "srun's PMIx plugin timed out"),
    ("mpirun-orte-daemons-01.txt", 1, "mpirun", "daemons_failed",
     "ssh said Could not resolve hostname node02.nccl-tests.default.svc: Name or service not known"),
    ("mpirun-prte-lost-daemon-01.txt", 1, "mpirun", "daemons_failed",
     "ssh said connect to host (worker_ip) port 22: Connection refused"),
    ("mpirun-not-enough-slots-01.txt", 1, "mpirun", "not_enough_slots", "not enough slots for the 16 ranks"),
    # Open MPI 4.1 under srun without PMIx does not run alone: it aborts in MPI_Init
    ("srun-ompi-no-pmi-01.txt", 1, "srun", "no_pmi", "srun did not wire the ranks together: it started them without PMIx"),
])
def test_real_launcher_failures(capture, rc, launcher, kind, words):
    out = launcher_output.classify(launcher, "", _capture(capture), rc, 600)
    assert out["kind"] == kind
    assert words in out["cause"]
    assert out["evidence"] and len(out["evidence"]) <= 4 + 2 * launcher_output.EVIDENCE_LINES


@pytest.mark.parametrize("stderr, launcher, kind, words", [
    ("srun: error: Unable to allocate resources: Invalid partition name specified\n", "srun", "no_allocation",
     "Slurm gave srun no allocation: Invalid partition name specified"),
    ("srun: Required node not available (down, drained or reserved)\nsrun: job 7 queued and waiting for resources\n",
     "srun", "node_unavailable", "Required node not available (down, drained or reserved)"),
    ("slurmstepd: error: execve(): /opt/nccl-tests/build/all_reduce_perf: No such file or directory\n"
     "srun: error: roce-node02: task 1: Exited with exit code 2\n", "srun", "program_missing",
     "cannot execute /opt/nccl-tests/build/all_reduce_perf: No such file or directory"),
    ("timeout: failed to run command 'srun': No such file or directory\n", "srun", "launcher_missing",
     "the launcher srun could not be started"),
])
def test_slurm_failures_by_srun_s_wording(stderr, launcher, kind, words):
    out = launcher_output.classify(launcher, "", stderr, 1)
    assert out["kind"] == kind and words in out["cause"], out


def test_a_timeout_names_the_timeout_and_keeps_the_last_lines():
    stdout = "".join("#  Rank %2d Group  0 Pid 1 on node01 device  0 [0x0c] NVIDIA H100\n" % i for i in range(40))
    out = launcher_output.classify("mpirun", stdout, "", 124, 600)
    assert out["kind"] == "timeout"
    assert "verify_nccl_timeout (600 s)" in out["cause"] and "exit code 124" in out["cause"]
    assert len(out["evidence"]) == launcher_output.EVIDENCE_LINES
    assert out["evidence"][-1].startswith("stdout: #  Rank 39")


def test_evidence_is_bounded_in_lines_and_width():
    long_line = "x" * 5000
    out = launcher_output.classify("srun", "\n".join([long_line] * 500), "\n".join(["e%d" % i for i in range(500)]), 3)
    assert len(out["evidence"]) <= 4 + 2 * launcher_output.EVIDENCE_LINES
    assert all(len(line) <= launcher_output.EVIDENCE_WIDTH + len("stdout: ") for line in out["evidence"])
    assert out["evidence"][:2] == ["stderr: e494", "stderr: e495"]


def test_a_zero_exit_is_no_failure():
    assert launcher_output.classify("srun", "", "srun: unrecognized option '--mca'", 0) is None


def test_nccl_errors_keep_their_finding_and_gain_the_evidence():
    analysis = dict(NO_OUTPUT, findings=["roce-node02: NCCL WARN NET/IB ..."], summary="NCCL 2.25.1; failed")
    stderr = "srun: error: roce-node02: task 1: Exited with exit code 3\n"
    v = verify_nccl.test_verdict("all_reduce_perf", "roce", analysis, "", 3, HOSTS, stderr=stderr, launcher="srun")
    assert [f["check"] for f in v["findings"]] == ["nccl_transport"]
    assert v["findings"][0]["evidence"][0] == "srun: error: roce-node02: task 1: Exited with exit code 3"


# ------------------------------------------------------------------------------------------------ arguments per launcher
def test_each_launcher_gets_its_own_arguments():
    assert verify_nccl.launcher_args("srun", ["--x"], []) == ["--x"]
    assert verify_nccl.launcher_args("srun", [], ["--mpi=pmix"]) == ["--mpi=pmix"]
    assert verify_nccl.launcher_args("mpirun", [], None) == []


def test_switching_the_launcher_does_not_hand_mpiruns_options_to_srun():
    inputs = {"verify_mpirun_args": ["--mca", "btl_tcp_if_include", "eth0"], "verify_srun_args": [],
              "verify_launcher_args": []}
    own = {"mpirun": inputs["verify_mpirun_args"], "srun": inputs["verify_srun_args"]}
    argv = verify_nccl.launcher_argv("srun", HOSTS, {}, verify_nccl.launcher_args("srun", [], own["srun"]),
                                     "all_reduce_perf", [], 60)
    assert "--mca" not in argv


# the verify role's inputs as its preflight hands them to input_errors, launcher lists empty
VERIFY_INPUTS = {"verify_launcher": "srun", "verify_launcher_args": [], "verify_mpirun_args": [],
                 "verify_srun_args": [],
                 "verify_min_bw_pct": 90, "verify_perftest_port": 18515, "verify_perftest_timeout": 60,
                 "verify_nccl_timeout": 600, "verify_perftest_size": 1048576, "verify_perftest_iterations": 5000,
                 "verify_nccl_ranks_per_host": 1}

def test_both_argument_lists_for_the_launcher_that_runs_are_refused():
    inputs = dict(VERIFY_INPUTS, verify_launcher_args=["--partition", "gpu"], verify_srun_args=["--mpi=pmix"])
    assert verify_plan.input_errors(inputs, []) == [
        "verify_launcher_args and verify_srun_args are both set for verify_launcher=srun: give the arguments once, "
        "in verify_srun_args (verify_launcher_args is for arguments of whichever launcher runs)."]
    # the other launcher's list is not in the way
    assert verify_plan.input_errors(dict(inputs, verify_launcher="mpirun"), []) == []


# ------------------------------------------------------------------------------------------------ ranks that ran alone
def _one_rank_jobs(tmp_path, monkeypatch):
    """What srun without PMIx prints: each task a whole one-rank nccl-tests job of its own (the stand-in's model of a
    process no launcher wired into an MPI job), one after the other on srun's stdout."""
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))
    text = ""
    for i, host in enumerate(h["inventory_hostname"] for h in HOSTS):
        root = tmp_path / host
        tree.build_tree(profile.load("cx7_roce_400g_2x"), root, host_index=i + 1)
        state = nt.rank_state(root, {"NCCL_DEBUG": "INFO"}, "", host, 0, proc=0, pid=4100 + i,
                              ifaces=[("lo", "127.0.0.1"), ("eth0", "172.18.0.%d" % (11 + i))])
        out, rc = nt.render_job("all_reduce_perf", ["-b", "8M", "-e", "128M", "-f", "2", "-g", "1"], [state])
        assert rc == 0
        text += out
    return text


def test_ranks_that_ran_alone_are_a_failure_naming_the_launcher_and_the_fix(tmp_path, monkeypatch):
    text = _one_rank_jobs(tmp_path, monkeypatch)
    analysis = analyze_text(text)
    assert analysis["ranks"] == 1 and analysis["busbw"]["avg_busbw_gbps"] == 0
    v = verify_nccl.test_verdict("all_reduce_perf", "roce", analysis, text, 0, HOSTS, launcher="srun")
    ranks = [f for f in v["findings"] if f["check"] == "nccl_ranks"]
    assert [f["host"] for f in ranks] == ["roce-node01", "roce-node02"]
    assert ranks[0]["severity"] == "error"
    assert ranks[0]["expected"] == "one communicator of 2 ranks (2 hosts x 1)"
    assert ranks[0]["found"] == "NCCL's communicator has 1 rank (nranks 1), on each of 2 hosts"
    assert ranks[0]["cause"].startswith("srun did not wire the ranks together: without PMIx")
    assert "MpiDefault=pmix" in ranks[0]["fix"] and "--mpi=pmix" in ranks[0]["fix"]


def test_ranks_alone_under_mpirun_points_at_the_mpi_build(tmp_path, monkeypatch):
    text = _one_rank_jobs(tmp_path, monkeypatch)
    v = verify_nccl.test_verdict("all_reduce_perf", "roce", analyze_text(text), text, 0, HOSTS, launcher="mpirun")
    [f, _g] = [f for f in v["findings"] if f["check"] == "nccl_ranks"]
    assert f["cause"].startswith("mpirun did not wire the ranks together") and "MPI=1" in f["fix"]


def test_a_wired_job_and_a_job_of_one_host_are_not_ranks_alone():
    wired = {"ranks": 2, "per_host": {}, "findings": [], "busbw": {}, "evidence": {}}
    assert verify_nccl.test_verdict("all_reduce_perf", "roce", wired, "", 0, HOSTS, launcher="srun")["findings"] == []
    alone = dict(wired, ranks=1)
    assert verify_nccl.test_verdict("all_reduce_perf", "roce", alone, "", 0, HOSTS[:1], launcher="srun")["findings"] == []
    # 2 hosts x 4 ranks: a communicator of 4 is half the job
    four = dict(wired, ranks=4)
    found = verify_nccl.test_verdict("all_reduce_perf", "roce", four, "", 0, HOSTS, launcher="srun", ranks_per_host=4)
    assert [f["check"] for f in found["findings"]] == ["nccl_ranks", "nccl_ranks"]


# ------------------------------------------------------------------------------------------------ in the report
def test_the_launchers_error_reaches_the_json_and_the_html_report():
    from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import fabric_report, verify_report
    from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.fabric_report_html import render_html
    verdict = verify_nccl.test_verdict("all_reduce_perf", "roce", NO_OUTPUT, "", 255, HOSTS,
                                       stderr=_capture("srun-unrecognized-option-01.txt"), launcher="srun")
    hosts = [{"inventory_hostname": h["inventory_hostname"], "verify_plan": {"group": "roce"}} for h in HOSTS]
    report = verify_report.assemble({"hosts": hosts, "spec": {}, "nccl": [verdict]}, 90)
    assert fabric_report.validate_report(report) == []
    [finding] = [f for f in report["findings"] if f["check"] == "nccl_tests_exit"]
    assert finding["evidence"][0] == "srun: unrecognized option '--mca'"
    assert report["verdict"] == "fail" and report["nccl"]["roce-node01"]["verdict"] == "fail"
    assert "srun: unrecognized option &#x27;--mca&#x27;" in render_html(report) \
        or "srun: unrecognized option &#39;--mca&#39;" in render_html(report)


def test_an_item_holding_several_arguments_is_refused_naming_the_list():
    """The launcher gets each item as one argument: "--partition gpu" (or a string given for the list, which Ansible
    makes a one-item list) would reach srun as one unknown option."""
    inputs = dict(VERIFY_INPUTS, verify_srun_args=["--mpi=pmix --exclusive"])
    assert verify_plan.input_errors(inputs, []) == [
        "verify_srun_args takes one argument per list item, as the launcher gets them (no shell splits them); got "
        "'--mpi=pmix --exclusive': write ['--mpi=pmix', '--exclusive']."]
    common = dict(inputs, verify_srun_args=[], verify_launcher_args=["--partition gpu"])
    assert verify_plan.input_errors(common, [])[0].startswith("verify_launcher_args takes one argument per list item")
    # one argument with a space in its value is one argument (an environment value), and the other launcher's list
    # is not checked for a run it does not make
    assert verify_nccl.launcher_args("srun", [], ["--comment=rail check"]) == ["--comment=rail check"]
    assert verify_plan.input_errors(dict(inputs, verify_launcher="mpirun"), []) == []
