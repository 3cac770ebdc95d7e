# -*- coding: utf-8 -*-
"""IPoIB through sysfs: the plan creates missing children before it sets modes, writes nothing that already
holds, and refuses a parent that does not exist or is not IPoIB."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import ipoib


def _netdev(root, name, mode="datagram", kind="32", pkey="0xffff"):
    base = root / "class" / "net" / name
    base.mkdir(parents=True)
    (base / "mode").write_text(mode + "\n")
    (base / "type").write_text(kind + "\n")
    (base / "pkey").write_text(pkey + "\n")
    (base / "create_child").write_text("")
    return base


def test_children_first_then_modes_and_idempotent(tmp_path):
    _netdev(tmp_path, "ibp24s0")
    wanted = [{"name": "ibp24s0", "mode": "connected"},
              {"name": "ibp24s0.8002", "parent": "ibp24s0", "pkey": "0x8002", "mode": "connected"}]
    assert ipoib.check(wanted) == []
    before, after, steps = ipoib.plan(str(tmp_path), wanted)
    assert before == {"ibp24s0": {"exists": True, "mode": "datagram"}, "ibp24s0.8002": {"exists": False, "mode": None}}
    assert [(p.rsplit("/", 2)[-2:], v) for p, v, _n in steps] == [
        (["ibp24s0", "create_child"], "0x8002"), (["ibp24s0", "mode"], "connected"),
        (["ibp24s0.8002", "mode"], "connected")]

    def kernel(name):  # the kernel makes the child when create_child is written
        if not (tmp_path / "class" / "net" / name).exists():
            _netdev(tmp_path, name, pkey="0x8002")
    ipoib.apply(str(tmp_path), steps, kernel)
    assert (tmp_path / "class/net/ibp24s0/mode").read_text().strip() == "connected"
    assert ipoib.plan(str(tmp_path), wanted)[2] == []


@pytest.mark.parametrize("item,text", [
    ({"name": "ibp24s0.8002", "parent": "ibp24s0"}, "needs both parent and pkey"),
    ({"name": "ibp24s0.2", "parent": "ibp24s0", "pkey": "0x2"}, "must be 0x and 4 hex digits"),
    ({"name": "ib.8002", "parent": "ibp24s0", "pkey": "0x8002"}, "the kernel names the child of ibp24s0 for P_Key 0x8002 ibp24s0.8002"),
    ({"name": "ibp24s0", "mode": "cm"}, "mode 'cm'; allowed: datagram, connected"),
])
def test_bad_interfaces(item, text):
    assert any(text in e for e in ipoib.check([item]))


def test_missing_or_non_ipoib_parent(tmp_path):
    with pytest.raises(ipoib.IpoibError, match="parent ibp24s0 does not exist"):
        ipoib.plan(str(tmp_path), [{"name": "ibp24s0.8002", "parent": "ibp24s0", "pkey": "0x8002"}])
    _netdev(tmp_path, "enp1s0", kind="1")
    with pytest.raises(ipoib.IpoibError, match="not an IPoIB netdev"):
        ipoib.plan(str(tmp_path), [{"name": "enp1s0", "mode": "datagram"}])
