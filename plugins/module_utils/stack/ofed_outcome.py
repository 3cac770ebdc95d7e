# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a run of the ofed role comes to, from the probes of the ``ofed_stack`` module it registered: whether the
host has nothing to change (the preflight's probe), which probe is the last of this run of the role, the version it
reports (``ofed_installed_version``) and what waits for a reboot (``ofed_reboot_reasons``: the installed vendor
driver that only a reboot loads, the device names the udev rule gives at the next boot).

The probes are registered results: a task that did not run registers ``{"skipped": true, ...}``, and a result
registered by another run of the role in the same playbook run is still there; only those of this run are read (the
preflight's ``probe``, the activation's ``driver_probe``, ``verify_vendor.yml``'s ``after``, the inbox stack's
``inbox_after`` read by ``verify.yml``). Pure Python.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

VENDOR_PROVIDERS = ("doca", "mlnx_ofed")


def _ran(result):
    return isinstance(result, dict) and "skipped" not in result


def stack_settled(probe, provider, openib_conf):
    """Nothing to do for the stack: the one asked for is installed with every package and, for a vendor stack, its
    modules are built for the running kernel, its driver is loaded and no openib.conf setting is asked for."""
    probe = probe or {}
    if probe.get("action") != "none" or probe.get("missing_packages"):
        return False
    if provider not in VENDOR_PROVIDERS:
        return True
    return probe.get("dkms_error") is None and probe.get("driver_pending") is None and not openib_conf


def last_probe(probe, provider, openib_conf, driver_probe=None, after=None):
    """The last probe of the stack in this run of the role: the preflight's where nothing changed (or the stack is
    inbox), else the one after the driver was loaded again (an openibd restart), else the one after the install; None
    when neither ran."""
    if stack_settled(probe, provider, openib_conf) or provider not in VENDOR_PROVIDERS:
        return probe
    for result in (driver_probe if driver_probe is not None else {"skipped": True},
                   after if after is not None else probe):
        if _ran(result):
            return result
    return None


def reboot_reasons(probe):
    """What of a probe waits for a reboot, in the shape of ``rdma_reboot_reasons`` (the firmware role merges it): the
    installed vendor driver (``mlx5_core (kernel module) version inbox -> 25.10-1.7.1``), then the RDMA device names
    the udev rule of ``rdma_device_naming`` gives at the next boot."""
    probe = probe or {}
    out = []
    driver = probe.get("driver_pending")
    if driver is not None:
        out.append({"device": "mlx5_core", "pci": "kernel module", "card": None, "parameter": "version",
                    "kind": "driver", "from": driver["from"], "to": driver["to"]})
    naming = probe.get("naming_pending")
    if naming is not None:
        out.append({"device": "udev", "pci": naming["rules_file"], "card": None, "parameter": "rdma_device_naming",
                    "kind": "naming", "from": naming["from"], "to": naming["to"]})
    return out


def installed_version(probe, provider, openib_conf, version_package, driver_probe=None, after=None,
                      inbox_after=None):
    """``ofed_installed_version``: the vendor stack's from the last probe (DOCA's version, else MLNX_OFED's), the
    inbox stack's ``version_package`` (rdma-core) from the packages read after the install (``inbox_after``), or the
    preflight's where nothing changed; None when it is not known."""
    if provider in VENDOR_PROVIDERS:
        installed = (last_probe(probe, provider, openib_conf, driver_probe, after) or {}).get("installed") or {}
        return installed.get("doca_version") or installed.get("version")
    read = probe if stack_settled(probe, provider, openib_conf) or inbox_after is None else inbox_after
    return ((read or {}).get("packages") or {}).get(version_package)


def outcome(probe, provider, openib_conf, version_package, driver_probe=None, after=None, inbox_after=None):
    """The role's decisions in one result: ``{stack_settled, settled, installed_version, reboot_reasons}``;
    ``settled`` also wants the udev naming rule of ``rdma_device_naming`` current (names still to change wait for the
    next boot)."""
    stack = stack_settled(probe, provider, openib_conf)
    last = last_probe(probe, provider, openib_conf, driver_probe, after)
    return {"stack_settled": stack,
            "settled": stack and bool((((probe or {}).get("naming") or {}).get("rules_current"))),
            "installed_version": installed_version(probe, provider, openib_conf, version_package, driver_probe,
                                                   after, inbox_after),
            "reboot_reasons": reboot_reasons(last)}
