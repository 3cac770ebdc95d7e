# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runner the collection's pure module_utils take: ``which(name)`` and ``run(argv) -> (rc, out, err)``, backed by
an AnsibleModule (argv lists, never a shell; C locale, so tool output parses the same everywhere)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleRunner:
    def __init__(self, module):
        self.module = module

    def which(self, name):
        return self.module.get_bin_path(name, required=False)

    def run(self, argv):
        return self.module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"}, check_rc=False)
