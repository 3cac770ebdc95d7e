# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes every module of the collection declares: check mode and diff mode (and facts where it returns
them). A module extends C(hpcnet.rdma.attributes) when it changes the host, C(hpcnet.rdma.attributes.read_only)
when it only reads or tests."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # A module that changes the host: it computes first, then applies behind one check-mode gate, and returns the
    # diff of what it changed (or would change).
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The module computes what it would change and changes nothing; C(changed) is that prediction.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
"""

    # A module that reads or tests and changes nothing on the host.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The module changes nothing on the host, so it runs the same in check mode and never reports C(changed).
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
"""

    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""
