"""verify's `pcie` check (module_utils/verify/verify_pcie.py): the GPUDirect path inside each host, on rdma_facts
output (``pcie: true``) of simulated 8-rail InfiniBand hosts whose cards sit in the DGX H100-like PCIe tree
(simhost pcie_tree.build_host): the healthy tree passes; ACS redirect between a GPU and its rail's NIC, a NIC trained
x8, the IOMMU translating and a NIC far from every GPU are each named; the report's `pcie` map and its HTML section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import facts as pcie_facts
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import facts
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import fabric_report as fr
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import rdma_verify as v
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.fabric_report_html import render_html
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_report import assemble
from simhost import pcie_tree

SCHEMA = Path(__file__).resolve().parents[5] / "docs" / "fabric-report.schema.json"
PCIE_CHECKS = ("pcie_link", "pcie_acs", "iommu", "gpu_affinity", "pcie_max_read_req")
GPU0, GPU4 = "0000:18:00.0", "0000:98:00.0"


def rdma_of(root, iommu="passthrough", nic_under=None, edit=None, layout=None):
    if layout is None:
        layout = pcie_tree.dgx_h100(nic_under)
        for pci, values in (edit or {}).items():
            layout[1][pci].update(values)
    pcie_tree.build_host(root, "cx7_ib_ndr_8x", layout, iommu=iommu)
    rdma = pcie_facts.attach(facts.read(str(root), None, ["infiniband"], []))
    rdma["memlock"] = {"soft": "unlimited", "hard": "unlimited"}
    return rdma


def entry(rdma, gdr=True):
    return {"group": "infiniband", "rdma": rdma, "expect": {"gdr": gdr}}


def pcie_findings(result, host=None):
    return [f for f in result["findings"] if f["check"] in PCIE_CHECKS and (host is None or f["host"] == host)]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    return rdma_of(tmp_path_factory.mktemp("sys"))


def test_the_healthy_tree_passes_and_maps_each_rail_to_the_gpu_under_its_switch(healthy):
    result = v.verify({"dgx01": entry(healthy), "dgx02": entry(healthy)}, {})
    assert pcie_findings(result) == []
    assert result["hosts"]["dgx01"]["checks"]["pcie"] == "pass"
    rail0 = result["pcie"]["dgx01"]["0"]
    assert (rail0["device"], rail0["gpu"], rail0["distance"]) == ("mlx5_0", GPU0, "PIX")
    assert [h["pci"] for h in rail0["path"]] == ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:19:00.0"]
    assert [h["pci"] for h in rail0["gpu_path"]][-1] == GPU0
    assert all(h["flags"] == [] for h in rail0["path"] + rail0["gpu_path"])
    assert sorted(result["pcie"]["dgx02"], key=int) == [str(r) for r in range(8)]


def test_acs_redirect_on_the_switch_port_between_a_gpu_and_its_rail_nic(tmp_path, healthy):
    faulty = rdma_of(tmp_path, edit={"0000:17:00.0": {"acs": pcie_tree.ACS_REDIRECT_ON}})
    result = v.verify({"dgx01": entry(faulty), "dgx02": entry(healthy)}, {})
    (f,) = pcie_findings(result)
    assert (f["host"], f["check"], f["severity"], f["device"], f["rail"]) == ("dgx01", "pcie_acs", "error", "mlx5_0", 0)
    assert "0000:17:00.0" in f["found"] and f["fix"].startswith("setpci -s 0000:17:00.0")
    assert result["hosts"]["dgx01"]["verdict"] == "fail" and result["hosts"]["dgx01"]["checks"]["pcie"] == "fail"
    assert result["hosts"]["dgx02"]["checks"]["pcie"] == "pass"
    hops = dict((h["pci"], h) for h in result["pcie"]["dgx01"]["0"]["gpu_path"])
    assert hops["0000:17:00.0"]["flags"] == ["pcie_acs"] and hops["0000:17:00.0"]["acs_redirect"] is True


def test_acs_redirect_is_not_a_finding_where_gpudirect_is_not_expected(tmp_path):
    faulty = rdma_of(tmp_path, iommu="translated", edit={"0000:17:00.0": {"acs": pcie_tree.ACS_REDIRECT_ON}})
    result = v.verify({"dgx01": entry(faulty, gdr=False)}, {})
    assert pcie_findings(result) == [] and result["hosts"]["dgx01"]["checks"]["pcie"] == "pass"


def test_a_nic_trained_x8_is_an_error_naming_its_link(tmp_path):
    result = v.verify({"dgx01": entry(rdma_of(tmp_path, edit={"0000:39:00.0": {"width": 8}}))}, {})
    (f,) = pcie_findings(result)
    assert (f["check"], f["device"], f["rail"], f["found"]) == ("pcie_link", "mlx5_1", 1, "32GT/s x8")
    assert "0000:37:01.0 -> 0000:39:00.0" in f["expected"]
    path = result["pcie"]["dgx01"]["1"]["path"]
    assert path[-1]["flags"] == ["pcie_link"] and path[-1]["width"] == 8


def test_the_iommu_translating_is_a_warning(tmp_path):
    result = v.verify({"dgx01": entry(rdma_of(tmp_path, iommu="translated"))}, {})
    assert [(f["check"], f["severity"]) for f in pcie_findings(result)] == [("iommu", "warning")]
    assert result["hosts"]["dgx01"]["checks"]["pcie"] == "fail"


def test_a_nic_under_another_pairs_switch_takes_that_gpu_and_its_acs(tmp_path):
    """Pair 0's card under GPU 4's switch: two rails (rails are in PCI order) have GPU 4 at PIX, none has GPU 0, and
    ACS redirect on GPU 4's switch port is named for both rails whose traffic crosses it."""
    faulty = rdma_of(tmp_path, nic_under={0: 4}, edit={"0000:97:00.0": {"acs": pcie_tree.ACS_REDIRECT_ON}})
    result = v.verify({"dgx01": entry(faulty)}, {})
    rails = result["pcie"]["dgx01"]
    on_gpu4 = sorted(int(r) for r, e in rails.items() if e["gpu"] == GPU4)
    assert len(on_gpu4) == 2 and all(rails[str(r)]["distance"] == "PIX" for r in on_gpu4)
    assert GPU0 not in [e["gpu"] for e in rails.values()]
    assert [(f["check"], f["rail"]) for f in pcie_findings(result)] == [("pcie_acs", r) for r in on_gpu4]


def test_a_nic_with_no_gpu_under_its_switch_is_a_gpu_affinity_warning(tmp_path):
    """Rail 0's card on a root port of its own: every GPU is across the CPU (NODE)."""
    host_bridges, nodes = pcie_tree.dgx_h100()
    pair0 = host_bridges[0]["ports"][0]["children"][0]           # pair 0's switch: keep its GPU only
    nic = pair0["children"].pop(1)["children"][0]
    nic["pci"] = "0000:0b:00.0"
    nodes.pop("0000:19:00.0")
    nodes[nic["pci"]] = nic
    rp = {"pci": "0000:0a:01.0", "kind": "root_port", "max_speed": 32.0, "max_width": 16, "acs": 0, "children": [nic]}
    host_bridges.insert(0, {"name": "pci0000:0a", "numa_node": 0, "ports": [rp]})
    result = v.verify({"dgx01": entry(rdma_of(tmp_path, layout=(host_bridges, nodes)))}, {})
    (f,) = pcie_findings(result)
    assert (f["check"], f["severity"], f["device"], f["rail"]) == ("gpu_affinity", "warning", "mlx5_0", 0)
    assert "%s at NODE" % GPU0 in f["found"]
    assert result["pcie"]["dgx01"]["0"]["distance"] == "NODE"


def test_facts_read_without_the_pcie_path_skip_the_check(healthy):
    plain = dict((k, val) for k, val in healthy.items() if k not in ("gpus", "iommu"))
    result = v.verify({"dgx01": entry(plain), "dgx02": entry(healthy)}, {})
    assert result["hosts"]["dgx01"]["checks"]["pcie"] == "skip"
    assert "dgx01" not in result["pcie"] and "dgx02" in result["pcie"]


def test_the_report_carries_the_pcie_map_and_the_html_shows_each_path(tmp_path, healthy):
    faulty = rdma_of(tmp_path, edit={"0000:17:00.0": {"acs": pcie_tree.ACS_REDIRECT_ON}})
    hosts = {"dgx01": entry(faulty), "dgx02": entry(healthy)}
    spec = v.verify(hosts, {})
    hostvars = [{"inventory_hostname": h, "verify_plan": {"group": "infiniband"}} for h in hosts]
    report = assemble({"hosts": hostvars, "spec": spec}, 90)
    assert fr.validate_report(report) == []
    assert report["pcie"]["dgx01"]["0"]["gpu"] == GPU0 and list(report["pcie"]["dgx01"])[:3] == ["0", "1", "2"]
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    assert "pcie" in schema["properties"]
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(json.loads(json.dumps(report)))) == []
    html = render_html(report)
    assert 'id="pcie"' in html and "0000:17:00.0" in html
    assert '<span class="chip error" title="downstream_port">0000:17:00.0 32GT/s x16 ACS redirect [pcie_acs]' in html


@pytest.mark.parametrize("change, problem", [
    (lambda r: r["pcie"]["dgx01"]["0"].update(distance="FAR"), 'pcie["dgx01"]["0"].distance must be one of PIX'),
    (lambda r: r["pcie"]["dgx01"]["0"]["path"][0].pop("pci"), 'pcie["dgx01"]["0"].path[0].pci is missing'),
])
def test_a_bad_pcie_map_is_named_by_the_validator(healthy, change, problem):
    spec = v.verify({"dgx01": entry(healthy)}, {})
    report = assemble({"hosts": [{"inventory_hostname": "dgx01", "verify_plan": {"group": "infiniband"}}],
                       "spec": spec}, 90)
    change(report)
    assert any(p.startswith(problem) for p in fr.validate_report(report)), fr.validate_report(report)
