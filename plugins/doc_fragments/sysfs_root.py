# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The O(sysfs_root) option of the modules that read the host's sysfs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  sysfs_root:
    description:
      - Root of the sysfs tree the module reads (C(/sys) on a host). The roles feed it from the collection-wide
        variable C(rdma_sysfs_root).
    type: path
    default: /sys
"""
