# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the nccl role: NCCL's network settings from ``ansible_facts.rdma`` (module_utils/nccl/settings.py), and
the NCCL_IB_PKEY index of a partition."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import infiniband
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl import settings as _settings

__metaclass__ = type


def nccl_settings(rdma, *args, **kwargs):
    """The contents of /etc/nccl.conf for one host and every problem (see module_utils/nccl/settings.py)."""
    try:
        return _settings.nccl_settings(rdma, *args, **kwargs)
    except _settings.NcclSettingsError as exc:
        raise AnsibleFilterError(str(exc))


def nccl_ib_pkey(rdma, partitions, name, ports=None):
    """The NCCL_IB_PKEY value (a P_Key table index) of partition ``name`` on the ports NCCL uses (``[{device,
    port}]``, default every InfiniBand port): ``{index, pkey, error}``."""
    return infiniband.nccl_pkey(rdma, partitions, name, ports)


class FilterModule:
    """hpcnet.rdma filters."""

    def filters(self):
        return {"nccl_settings": nccl_settings, "nccl_ib_pkey": nccl_ib_pkey}
