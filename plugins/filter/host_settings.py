# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Jinja2 filters of the rdma_host role: memlock forms, modprobe.d params, nvidia_peermem failure reasons."""

from __future__ import annotations

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils.host.host_settings import (
    HostSettingsError,
    memlock_setting,
    peermem_failure,
    profile,
)


def rdma_host_memlock(value, name="rdma_host_memlock", on_error="raise"):
    """``{value, limits, systemd, kib}`` for a memlock limit; ``{error}`` with ``on_error='return'``."""
    if on_error not in ("raise", "return"):
        raise AnsibleFilterError("rdma_host_memlock: on_error must be raise or return; got %r" % (on_error,))
    try:
        result = memlock_setting(value, name)
    except HostSettingsError as exc:
        if on_error == "return":
            return {"error": str(exc)}
        raise AnsibleFilterError(str(exc)) from exc
    result["error"] = None
    return result


def rdma_host_profile(inputs, gpu_driver_present):
    """The role's ``rdma_host_*`` inputs + whether the GPU driver is loaded -> ``{memlock, modules, gdr, gpu_driver,
    peermem_wanted, gdr_state, errors}``."""
    return profile(inputs or {}, gpu_driver_present)


def rdma_host_peermem_failure(stderr, dmesg="", release=None, rebuild=None):
    """Reason and fix of a failed ``modprobe nvidia_peermem``: ``{cause, reason, fix, evidence, msg}``."""
    return peermem_failure(stderr, dmesg, release, rebuild)


class FilterModule:
    """hpcnet.rdma filters."""

    def filters(self):
        return {
            "rdma_host_memlock": rdma_host_memlock,
            "rdma_host_peermem_failure": rdma_host_peermem_failure,
            "rdma_host_profile": rdma_host_profile,
        }
