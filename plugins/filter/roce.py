# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the roce role: its inputs as one profile for one host, with every problem."""

from __future__ import absolute_import, division, print_function

from ansible_collections.hpcnet.rdma.plugins.module_utils import roce_profile as _profile

__metaclass__ = type


def roce_profile(inputs, rdma):
    """The role's ``roce_*`` inputs + ``ansible_facts.rdma`` -> ``{netdevs, ethernet_netdevs, pfc, ecn, dscp2prio,
    errors}``."""
    return _profile.profile(inputs or {}, rdma or {})


class FilterModule:
    """hpcnet.rdma roce filters."""

    def filters(self):
        return {"roce_profile": roce_profile}
