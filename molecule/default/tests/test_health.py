"""The health check after a reboot: hpcnet-rdma-health, as an operator runs it, against the expected state site.yml
wrote (the test bed leaves memlock out: health_check_memlock, .config/molecule/config.yml)."""

import json

import pytest

PROGRAM = "/usr/local/sbin/hpcnet-rdma-health"


def test_the_expected_state_is_a_root_owned_file(host):
    state = host.file("/etc/hpcnet/health.json")
    assert state.exists and state.user == "root" and state.mode == 0o644
    doc = json.loads(state.content_string)
    assert doc["version"] == 1 and doc["host"] == host.backend.get_hostname()


@pytest.mark.usefixtures("rdma_host")
def test_the_health_check_passes_after_a_reboot(host, expected_ports):
    out = host.run(PROGRAM)
    assert out.rc == 0, out.stdout + out.stderr
    assert out.stdout.splitlines()[0] == "healthy: %d ports checked" % len(
        json.loads(host.file("/etc/hpcnet/health.json").content_string)["ports"]), out.stdout
    report = json.loads(host.run(PROGRAM + " --json").stdout)
    checked = {(row["device"], row["port"]) for row in report["checks"] if row["check"] == "port_state"}
    assert set(expected_ports) <= checked
    assert {row["check"] for row in report["checks"] if row["device"] is None} >= {"memlock", "kernel_modules"}
    assert all(row["ok"] for row in report["checks"]), [row for row in report["checks"] if not row["ok"]]


@pytest.mark.usefixtures("rdma_less_host")
def test_a_host_without_rdma_devices_has_nothing_to_check(host):
    out = host.run(PROGRAM)
    assert (out.rc, out.stdout.splitlines()[:1]) == (0, ["healthy: 0 ports checked"]), out.stdout + out.stderr
