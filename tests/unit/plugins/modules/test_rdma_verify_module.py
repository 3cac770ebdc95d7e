"""Tests of the hpcnet.rdma.rdma_verify module: arguments, exit and fail paths, check mode, and that its documentation
matches what it takes and returns."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

import module_docs  # tests/tools, on sys.path via tests/unit/conftest.py
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs
from ansible_collections.hpcnet.rdma.plugins.modules import rdma_verify

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "simhost"))
import simhost  # noqa: E402  pylint: disable=wrong-import-position


class Exit(Exception):
    pass


class Fail(Exception):
    pass


@pytest.fixture(autouse=True)
def exits(monkeypatch):
    def exit_json(self, **kwargs):  # pylint: disable=unused-argument
        raise Exit(kwargs)

    def fail_json(self, msg, **kwargs):  # pylint: disable=unused-argument
        raise Fail(dict(kwargs, msg=msg, failed=True))
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    """rdma facts of two simulated RoCE hosts (cx7_roce_400g_2x, host 1 and 2)."""
    out = {}
    for index in (1, 2):
        root = tmp_path_factory.mktemp("sys")
        simhost.build_tree(simhost.load("cx7_roce_400g_2x"), root, host_index=index)
        rdma = gather_rdma_sysfs(str(root))
        rdma.update(sysfs_root=str(root), memlock={"soft": "unlimited", "hard": "unlimited"}, stack=None)
        out["roce%02d" % index] = rdma
    return out


def run_module(args):
    with patch_module_args(args):
        with pytest.raises((Exit, Fail)) as info:
            rdma_verify.main()
    return info.type, info.value.args[0]


def hosts_of(facts, **expect):
    return dict((name, {"group": "roce", "rdma": copy.deepcopy(rdma), "expect": dict(expect)})
                for name, rdma in facts.items())


def test_healthy_hosts_pass_and_nothing_changes(facts):
    kind, result = run_module({"hosts": hosts_of(facts, mtu=9000), "spec": {"expected_rate_gbps": 400}})
    assert kind is Exit
    assert result["changed"] is False
    assert result["verdict"] == "pass" and result["findings"] == []
    assert result["msg"] == "rdma_verify: 2 host(s) pass the spec checks (0 warning(s))"
    assert [c["name"] for c in result["checks"]][:3] == ["port_state", "link_layer", "rate"]
    assert result["references"]["roce"]["rate_gbps"] == 400.0
    json.dumps(result)


def test_findings_do_not_fail_the_module_and_check_mode_is_the_same(facts):
    hosts = hosts_of(facts)
    port = hosts["roce02"]["rdma"]["devices"]["mlx5_1"]["ports"]["1"]
    port.update(state="DOWN", phys_state="Polling")
    hosts["roce02"]["roce_qos"] = {"changed": True, "diff": {"before": {"pfc": []}, "after": {"pfc": [3]}}, "msg": ""}
    kind, result = run_module({"hosts": hosts})
    kind_check, result_check = run_module({"hosts": hosts, "_ansible_check_mode": True})
    assert kind is Exit and kind_check is Exit
    assert result["findings"] == result_check["findings"]
    assert result["verdict"] == "fail" and result["changed"] is False
    assert [(f["host"], f["check"], f["device"], f["found"]) for f in result["findings"]] == [
        ("roce02", "port_state", "mlx5_1", "DOWN/Polling"), ("roce02", "roce_qos", None, "differs in pfc")]
    assert result["msg"] == "rdma_verify: 2 error(s), 0 warning(s); failing: roce02"
    assert result["summary"]["failed_hosts"] == ["roce02"]


@pytest.mark.parametrize("args,message", [
    ({"hosts": {"n1": {"group": "ib", "rdma": {"devices": {}}}}},
     "rdma_verify: hosts.n1.group must be one of infiniband, roce; got 'ib'"),
    ({"hosts": {"n1": {"group": "roce", "rdma": None}}}, "rdma_verify: hosts.n1.rdma must be the host's"),
    ({"hosts": {"n1": {"group": "roce", "rdma": {"devices": {}}, "expect": {"gpu": True}}}},
     "hosts.n1.expect: unknown key(s) gpu; allowed: devices, gdr, ipoib, mtu, memlock"),
    ({"hosts": {"n1": {"group": "roce", "rdma": {"devices": {}}}}, "spec": {"min_width": "3X"}}, "min_width"),
    ({"hosts": {"n1": {"group": "roce", "rdma": {"devices": {}}}}, "spec": {"expected_rate_gbps": "fast"}},
     "expected_rate_gbps"),
    ({"hosts": {"n1": {"group": "roce", "rdma": {"devices": {}}}}, "spec": {"rate": 400}}, "spec.rate"),
    ({"hosts": {"n1": {"group": "roce", "rdma": {"devices": {}}}}, "spec": {"expected_fw_ver": 28}},
     "spec.expected_fw_ver must be a version string"),
])
def test_bad_input_fails_with_the_field_named(args, message):
    kind, result = run_module(args)
    assert kind is Fail
    assert message in result["msg"]
    assert "Traceback" not in result["msg"]


def test_documented_options_are_the_argument_spec():
    doc = module_docs.documentation(rdma_verify)  # with its doc fragments
    assert set(doc["options"]) == set(rdma_verify.ARGUMENT_SPEC)
    spec_doc = doc["options"]["spec"]["suboptions"]
    spec_arg = rdma_verify.ARGUMENT_SPEC["spec"]["options"]
    assert set(spec_doc) == set(spec_arg)
    for name, arg in spec_arg.items():
        assert spec_doc[name]["type"] == arg["type"]
        assert spec_doc[name].get("choices") == arg.get("choices")
    yaml.safe_load(rdma_verify.EXAMPLES)


def test_documented_returns_are_what_the_module_returns(facts):
    _kind, result = run_module({"hosts": hosts_of(facts)})
    documented = set(yaml.safe_load(rdma_verify.RETURN))
    assert documented == set(result) - {"changed"}
    finding_doc = yaml.safe_load(rdma_verify.RETURN)["findings"]["contains"]
    assert tuple(finding_doc) == ("host", "severity", "check", "device", "port", "expected", "found", "cause", "fix")
