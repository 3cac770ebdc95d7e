# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""host.nccl_hca: NCCL_IB_HCA written and read back in one grammar (NCCL's: ``^`` excludes, ``=`` exact names,
``device:port`` lists), and its two users, the nccl role's settings and verify's reading of /etc/nccl.conf."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.host.nccl_hca import (
    entry_devices, format_hca_list, parse_hca_list, selected_ports)
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import verify_plan

REPO = Path(__file__).resolve().parents[5]
# a host with more than ten HCAs: where a prefix tells mlx5_1 from mlx5_10 or not
PORTS = [("mlx5_%d" % i, 1) for i in range(12)] + [("mlx5_bond_0", 1), ("mlx5_bond_0", 2)]


@pytest.mark.parametrize("ports, exact, exclude, text", [
    ([("mlx5_0", 1), ("mlx5_1", 1)], True, False, "=mlx5_0:1,mlx5_1:1"),
    ([("mlx5_0", 1), ("mlx5_1", 1)], False, False, "mlx5_0:1,mlx5_1:1"),
    ([("mlx5", None)], False, False, "mlx5"),
    ([("mlx5_4", None), ("mlx5_1", 2)], True, True, "^=mlx5_4,mlx5_1:2"),
    ([("ibp24s0", None)], False, True, "^ibp24s0"),
    ([], True, False, "="),
])
def test_written_and_read_back_the_same(ports, exact, exclude, text):
    assert format_hca_list(ports, exact=exact, exclude=exclude) == text
    assert parse_hca_list(text) == (exclude, exact, ports)
    assert format_hca_list(parse_hca_list(text)[2], exact=exact, exclude=exclude) == text


@pytest.mark.parametrize("text, parsed", [
    (None, (False, False, [])),
    ("", (False, False, [])),
    (" =mlx5_0:1, mlx5_1:1 ", (False, True, [("mlx5_0", 1), ("mlx5_1", 1)])),
    ("mlx5_0:,mlx5_1:x", (False, False, [("mlx5_0", None), ("mlx5_1", None)])),  # no port number: every port
    ("=mlx5_0:1,,", (False, True, [("mlx5_0", 1)])),
])
def test_read_as_nccl_reads_it(text, parsed):
    assert parse_hca_list(text) == parsed


@pytest.mark.parametrize("value, chosen", [
    ("=mlx5_1:1", [("mlx5_1", 1)]),
    ("mlx5_1:1", [("mlx5_1", 1), ("mlx5_10", 1), ("mlx5_11", 1)]),      # a prefix also takes mlx5_10, mlx5_11
    ("=mlx5_bond_0:2", [("mlx5_bond_0", 2)]),
    ("=mlx5_bond_0", [("mlx5_bond_0", 1), ("mlx5_bond_0", 2)]),         # no port: every port of the device
    ("^=mlx5_0,mlx5_bond_0", [("mlx5_%d" % i, 1) for i in range(1, 12)]),
    ("^mlx5_1", [p for p in PORTS if not p[0].startswith("mlx5_1")]),
    ("", PORTS),
])
def test_the_ports_nccl_uses(value, chosen):
    assert selected_ports(value, PORTS) == chosen


def test_an_entry_selects_devices_in_device_order():
    names = ["mlx5_10", "mlx5_2", "mlx5_1"]
    assert entry_devices("mlx5_1", False, names) == ["mlx5_1", "mlx5_10"]
    assert entry_devices("mlx5_1", True, names) == ["mlx5_1"]
    assert entry_devices("mlx5_9", True, names) == []


def _facts(names, state="ACTIVE"):
    port = {"link_layer": "InfiniBand", "state": state, "phys_state": "LinkUp", "gids": []}
    return {"devices": dict((name, {"ports": {"1": dict(port)}}) for name in names)}


def test_verify_reads_a_prefix_as_nccl_does():
    """NCCL_IB_HCA=mlx5 (a prefix, as many sites write it) names every mlx5 port, not a device called mlx5."""
    facts = _facts(["mlx5_0", "mlx5_1"])
    assert verify_plan.nccl_conf_findings("h", {"NCCL_IB_HCA": "mlx5"}, facts, fabrics=["infiniband"]) == []
    down = _facts(["mlx5_0", "mlx5_1"], state="DOWN")
    findings = verify_plan.nccl_conf_findings("h", {"NCCL_IB_HCA": "mlx5"}, down, fabrics=["infiniband"])
    assert [(f["device"], f["port"], f["expected"]) for f in findings] == [("mlx5_0", 1, "ACTIVE"), ("mlx5_1", 1, "ACTIVE")]


def test_the_grammar_has_one_home():
    """nccl/ writes NCCL_IB_HCA and verify/ reads it only through host/nccl_hca.py."""
    settings = (REPO / "plugins/module_utils/nccl/settings.py").read_text(encoding="utf-8")
    plan = (REPO / "plugins/module_utils/verify/verify_plan.py").read_text(encoding="utf-8")
    assert "format_hca_list(" in settings and '("=" if hca_exact' not in settings
    assert "parse_hca_list(" in plan and 'lstrip("^")' not in plan
