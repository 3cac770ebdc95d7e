# -*- coding: utf-8 -*-
"""What a run of the ofed role comes to, from the probes it registered (module_utils/stack/ofed_outcome.py): settled
or not, the last probe of the run, the installed version, what waits for a reboot."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import ofed_outcome as oo

DRIVER = {"from": "inbox", "to": "25.10-1.7.1"}
NAMING = {"rules_file": "/etc/udev/rules.d/60-rdma-persistent-naming.rules", "from": "mlx5_0", "to": "ibp24s0"}
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def _probe(action="none", missing=(), dkms_error=None, driver_pending=None, naming_pending=None, rules_current=True,
           installed=None, packages=None):
    return {"action": action, "missing_packages": list(missing), "dkms_error": dkms_error,
            "driver_pending": driver_pending, "naming_pending": naming_pending, "naming": {"rules_current": rules_current},
            "installed": installed or {"doca_version": None, "version": None}, "packages": packages or {}}


@pytest.mark.parametrize("provider", ["inbox", "doca", "mlnx_ofed"])
def test_a_host_as_asked_is_settled(provider):
    result = oo.outcome(_probe(), provider, {}, "rdma-core")
    assert (result["stack_settled"], result["settled"], result["reboot_reasons"]) == (True, True, [])
    # the naming rule still to write: the stack is settled, the role is not
    assert oo.outcome(_probe(rules_current=False), provider, {}, "rdma-core")["settled"] is False


@pytest.mark.parametrize("probe", [_probe(action="install"), _probe(missing=["perftest"])])
def test_a_stack_to_install_is_not_settled(probe):
    assert oo.stack_settled(probe, "inbox", {}) is False


@pytest.mark.parametrize("probe,openib_conf", [(_probe(dkms_error="mlnx-ofa_kernel: build failed"), {}),
                                               (_probe(driver_pending=DRIVER), {}),
                                               (_probe(), {"RUN_SYSCTL": "no"})])
def test_a_vendor_stack_waits_for_its_modules_driver_and_openib_conf(probe, openib_conf):
    assert oo.stack_settled(probe, "doca", openib_conf) is False
    # the inbox stack has no DKMS modules, vendor driver or openib.conf
    assert oo.stack_settled(probe, "inbox", openib_conf) is True


def test_the_last_probe_of_the_run():
    probe = _probe(action="install")
    driver = _probe(installed={"doca_version": "3.2.0", "version": "25.10-1.7.1"})
    after = _probe(driver_pending=DRIVER, installed={"doca_version": "3.2.0", "version": "25.10-1.7.1"})
    # the activation's probe (the driver loaded again), else the one after the install, else the preflight's
    assert oo.last_probe(probe, "doca", {}, driver, after) is driver
    assert oo.last_probe(probe, "doca", {}, SKIPPED, after) is after
    assert oo.last_probe(probe, "doca", {}, None, None) is probe
    assert oo.last_probe(probe, "doca", {}, SKIPPED, SKIPPED) is None
    # the inbox stack, or nothing changed: the preflight's
    assert oo.last_probe(probe, "inbox", {}, driver, after) is probe
    assert oo.last_probe(_probe(), "doca", {}, driver, after) is not driver


def test_reboot_reasons_of_the_driver_and_the_device_names():
    assert oo.reboot_reasons(_probe(driver_pending=DRIVER, naming_pending=NAMING)) == [
        {"device": "mlx5_core", "pci": "kernel module", "card": None, "parameter": "version", "kind": "driver",
         "from": "inbox", "to": "25.10-1.7.1"},
        {"device": "udev", "pci": NAMING["rules_file"], "card": None, "parameter": "rdma_device_naming",
         "kind": "naming", "from": "mlx5_0", "to": "ibp24s0"}]
    assert oo.reboot_reasons(None) == []
    # the role reports the last probe's: the install left the driver waiting, the activation loaded it
    result = oo.outcome(_probe(action="install"), "doca", {}, "rdma-core", driver_probe=_probe(),
                        after=_probe(driver_pending=DRIVER))
    assert result["reboot_reasons"] == []
    assert oo.outcome(_probe(action="install"), "doca", {}, "rdma-core", driver_probe=SKIPPED,
                      after=_probe(driver_pending=DRIVER))["reboot_reasons"][0]["kind"] == "driver"


def test_installed_version():
    vendor = _probe(installed={"doca_version": "3.2.0", "version": "25.10-1.7.1"})
    assert oo.outcome(_probe(action="install"), "doca", {}, "rdma-core", after=vendor)["installed_version"] == "3.2.0"
    mlnx = _probe(installed={"doca_version": None, "version": "24.10-3.2.5.0"})
    assert oo.outcome(_probe(action="install"), "mlnx_ofed", {}, "rdma-core", after=mlnx)["installed_version"] == \
        "24.10-3.2.5.0"
    # inbox: the packages read after the install, or the preflight's where nothing changed
    before = _probe(action="install", packages={"rdma-core": None})
    after = {"packages": {"rdma-core": "44.0-2"}}
    assert oo.outcome(before, "inbox", {}, "rdma-core", inbox_after=after)["installed_version"] == "44.0-2"
    assert oo.outcome(before, "inbox", {}, "rdma-core")["installed_version"] is None
    assert oo.outcome(before, "inbox", {}, "rdma-core", inbox_after=SKIPPED)["installed_version"] is None
    settled = _probe(packages={"rdma-core": "44.0-2"})
    assert oo.outcome(settled, "inbox", {}, "rdma-core", inbox_after={"packages": {}})["installed_version"] == "44.0-2"
