"""The ofed_stack module's main(): what it returns for the packages it is asked about (the probe is stubbed; its
parsers are tested in tests/unit/plugins/module_utils/stack/test_ofed_stack.py)."""

from __future__ import annotations

from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import ofed_stack as logic
from ansible_collections.hpcnet.rdma.plugins.modules import ofed_stack

PROBED = {"installed": {"provider": "none"}, "kernel": {"running": "6.1.0-28-amd64", "installed": ["6.1.0-28-amd64"],
                                                        "newest": "6.1.0-28-amd64", "headers": True},
          "dkms": [], "driver": {"loaded": True, "loaded_version": None, "installed_version": None}}


def test_missing_packages_are_the_asked_ones_not_installed_in_order(run_module, monkeypatch):
    monkeypatch.setattr(logic, "probe", lambda runner, sysfs_root, doca_package: PROBED)
    monkeypatch.setattr(logic, "package_versions",
                        lambda runner, names: {name: {"rdma-core": "44.0-2"}.get(name) for name in names})
    result, failed = run_module(ofed_stack.main, {"provider": "inbox",
                                                  "packages": ["perftest", "rdma-core", "ibverbs-utils"]})
    assert not failed and not result["changed"]
    assert result["packages"] == {"perftest": None, "rdma-core": "44.0-2", "ibverbs-utils": None}
    assert result["missing_packages"] == ["perftest", "ibverbs-utils"]
