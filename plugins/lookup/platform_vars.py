# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: platform_vars
author: hpcnet.rdma contributors (@hpcnet)
version_added: "0.7.0"
short_description: A role's platform data, merged from its per-OS files
description:
  - Reads C(<directory>/<os_family>.yml), then C(<distribution>.yml), then C(<distribution>_<major version>.yml)
    (from C(ansible_facts)), each that exists, and returns their keys merged, a later file winning.
  - The collection's roles keep their package names and platform settings there and read them through a role
    variable, so that a role loads them without a task (an C(include_vars) loop costs one task result per host and
    role). Values are data, not templates.
  - Fails when C(ansible_facts) has no C(os_family) (facts not gathered).
options:
  _terms:
    description: Directories to read, usually C(role_path ~ '/vars').
    type: list
    elements: path
    required: true
'''

EXAMPLES = r'''
- name: The RoCE role's platform data on this host
  ansible.builtin.debug:
    msg: "{{ query('hpcnet.rdma.platform_vars', role_path ~ '/vars') | first }}"
'''

RETURN = r'''
_raw:
  description: One mapping per directory; empty when no file matches the host (an unsupported platform).
  type: list
  elements: dict
'''

import os

from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.lookup import LookupBase


def platform_names(facts):
    """The per-OS file names for these facts, most general first: os_family, distribution, distribution_major."""
    family, distribution = facts.get("os_family"), facts.get("distribution")
    major = facts.get("distribution_major_version")
    names = [family, distribution, "%s_%s" % (distribution, major) if distribution and major else None]
    return [str(n) for n in names if n]


def merged(loader, directory, names):
    """The keys of ``<directory>/<name>.yml`` for each name that exists, a later file winning (read with Ansible's
    loader: data, not templates)."""
    out = {}
    for name in names:
        path = os.path.join(directory, name + ".yml")
        if not os.path.isfile(path):
            continue
        try:
            data = loader.load_from_file(path) or {}
        except AnsibleError as exc:
            raise AnsibleLookupError("cannot read %s: %s" % (path, to_native(exc)))
        if not isinstance(data, dict):
            raise AnsibleLookupError("%s is not a mapping of platform settings" % path)
        out.update(data)
    return out


class LookupModule(LookupBase):
    """hpcnet.rdma.platform_vars"""

    def run(self, terms, variables=None, **kwargs):
        facts = (variables or {}).get("ansible_facts") or {}
        names = platform_names(facts)
        if not names:
            raise AnsibleLookupError("hpcnet.rdma.platform_vars needs ansible_facts.os_family to pick the platform's "
                                     "vars file: gather facts first (gather_facts: true, or ansible.builtin.setup)")
        return [merged(self._loader, str(term), names) for term in terms]
