# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``sysfs.facts.read``: the one read of the RDMA facts (sysfs, the management link, the port roles), and its three
users (module ``rdma_facts``, the health role's step, the health check) reading through it.

The host is a simhost tree (profile cx7_roce_400g_2x: mlx5_0 port 1 is enp12s0np0, mlx5_1 port 1 enp140s0np0)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import facts
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import PortRoleError
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError
from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

REPO = Path(__file__).resolve().parents[5]
ROUTE_HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"
DEFAULT_ROUTE = "{iface}\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0"


@pytest.fixture(name="host")
def fixture_host(tmp_path):
    """``(sys, proc)`` of a two-port RoCE host whose default route goes through mlx5_0's netdev."""
    tree.build_tree(profile.load("cx7_roce_400g_2x"), tmp_path / "sys", host_index=1)
    (tmp_path / "proc" / "net").mkdir(parents=True)
    (tmp_path / "proc" / "net" / "route").write_text(
        ROUTE_HEADER + "\n" + DEFAULT_ROUTE.format(iface="enp12s0np0").ljust(127) + "\n", encoding="utf-8")
    return str(tmp_path / "sys"), str(tmp_path / "proc")


def _roles(rdma):
    return dict((name, dict((num, port["role"]) for num, port in dev["ports"].items()))
                for name, dev in rdma["devices"].items())


def test_the_default_route_netdev_is_the_management_link_when_none_is_given(host):
    root, proc = host
    rdma = facts.read(root, None, ["roce"], proc_root=proc)
    assert rdma["sysfs_root"] == root
    assert _roles(rdma) == {"mlx5_0": {"1": "management"}, "mlx5_1": {"1": "compute"}}
    assert rdma["ports_by_role"]["compute"] == ["mlx5_1:1"]
    assert rdma["devices"]["mlx5_1"]["ports"]["1"]["rail"] == 0


def test_given_management_netdevs_replace_the_default_routes(host):
    root, proc = host
    rdma = facts.read(root, None, ["roce"], management_netdevs=[], proc_root=proc)
    assert rdma["ports_by_role"]["compute"] == ["mlx5_0:1", "mlx5_1:1"]


def test_port_roles_may_be_a_function_of_the_facts_read(host):
    root, proc = host
    seen = []

    def entries(rdma):
        seen.append(sorted(rdma["devices"]))
        assert "ports_by_role" not in rdma  # called before the roles are written
        return [{"role": "storage", "devices": ["mlx5_1"]}]
    rdma = facts.read(root, entries, ["roce"], management_netdevs=[], proc_root=proc)
    assert seen == [["mlx5_0", "mlx5_1"]]
    assert _roles(rdma) == {"mlx5_0": {"1": "compute"}, "mlx5_1": {"1": "storage"}}


def test_counters_and_every_netdev_are_read_only_when_asked(host):
    root, proc = host
    plain = facts.read(root, None, ["roce"], [], proc_root=proc)
    counted = facts.read(root, None, ["roce"], [], gather_counters=True, proc_root=proc)
    assert "counters" not in plain["devices"]["mlx5_0"]["ports"]["1"]
    assert "port_rcv_data" in counted["devices"]["mlx5_0"]["ports"]["1"]["counters"]


def test_a_malformed_route_file_and_roles_that_do_not_fit_raise_their_errors(host, tmp_path):
    root, proc = host
    (tmp_path / "proc" / "net" / "route").write_text(ROUTE_HEADER + "\neth0\tZZ\n", encoding="utf-8")
    with pytest.raises(SysfsError, match=r"net/route: line 2"):
        facts.read(root, None, ["roce"], proc_root=proc)
    with pytest.raises(PortRoleError):
        facts.read(root, [{"role": "compute", "devices": ["mlx5_9"]}], ["roce"], [], proc_root=proc)


@pytest.mark.parametrize("path", ["plugins/modules/rdma_facts.py", "plugins/module_utils/health/deploy.py",
                                  "plugins/module_utils/health/health_check.py"])
def test_the_facts_are_composed_in_one_place(path):
    """No user of the facts composes the read again: none calls gather_rdma_sysfs or annotate itself."""
    text = (REPO / path).read_text(encoding="utf-8")
    assert "facts.read(" in text
    assert not re.search(r"\b(gather_rdma_sysfs|annotate)\(", text), path
