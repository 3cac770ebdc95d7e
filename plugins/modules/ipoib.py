#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: ipoib
short_description: Set the IPoIB transport mode and create P_Key child interfaces through sysfs
version_added: "0.4.0"
description:
  - Reads each IPoIB netdev's transport mode from C(<sysfs_root>/class/net/<if>/mode), creates the P_Key child
    interfaces that do not exist by writing their P_Key to the parent's C(create_child) (the kernel names the child
    C(<parent>.<pkey>), for example C(ibp24s0.8002)), then writes the modes that differ. Nothing is written in check
    mode; the diff shows the modes and children before and after.
  - This is runtime state, lost at a reboot or a driver reload; the C(hpcnet.rdma.infiniband) role re-creates it
    at boot. MTU and addresses belong to the distribution's network configuration.
  - Enhanced IPoIB (mlx5 on MLNX_OFED / DOCA) supports datagram mode only; the kernel refuses C(connected) there and
    the module reports the kernel's error.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  interfaces:
    description: IPoIB netdevs, parents before their children.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Netdev name (a child is C(<parent>.<pkey>)).
        type: str
        required: true
      parent:
        description: Parent netdev of a P_Key child interface.
        type: str
      pkey:
        description: P_Key of a child, C(0x) and 4 hex digits with the full-membership bit (C(0x8002)).
        type: str
      mode:
        description: Transport mode; left as it is when omitted.
        type: str
        choices: [datagram, connected]
  timeout:
    description: Seconds to wait for a new child interface to appear before its mode is written.
    type: int
    default: 10
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes
'''

EXAMPLES = r'''
- name: Connected mode on ibp24s0 and a child for partition 0x8002
  hpcnet.rdma.ipoib:
    interfaces:
      - {name: ibp24s0, mode: connected}
      - {name: ibp24s0.8002, parent: ibp24s0, pkey: "0x8002", mode: connected}
'''

RETURN = r'''
interfaces:
  description: Each interface after the run (in check mode, as it would be), by name.
  returned: always
  type: dict
  contains:
    exists:
      description: Whether the netdev exists (C(class/net/<if>)).
      type: bool
    mode:
      description: Transport mode, from C(class/net/<if>/mode).
      type: str
  sample: {"ibp24s0": {"exists": true, "mode": "datagram"}, "ibp24s0.8002": {"exists": true, "mode": "datagram"}}
writes:
  description: The sysfs writes made (or, in check mode, that would be made), in order, as C(value > path).
  returned: always
  type: list
  elements: str
  sample: ["0x8002 > /sys/class/net/ibp24s0/create_child"]
'''

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import ipoib

ARGUMENT_SPEC = dict(
    interfaces=dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True), parent=dict(type="str"), pkey=dict(type="str", no_log=False),
        mode=dict(type="str", choices=list(ipoib.MODES)))),
    sysfs_root=dict(type="path", default="/sys"),
    timeout=dict(type="int", default=10),
)


def run(module):
    root, interfaces = module.params["sysfs_root"], module.params["interfaces"]
    errors = ipoib.check(interfaces)
    if errors:
        raise ipoib.IpoibError("; ".join(errors))
    before, after, steps = ipoib.plan(root, interfaces)
    writes = ["%s > %s" % (value, path) for path, value, _name in steps]
    if steps and not module.check_mode:
        def wait(name):
            deadline = time.time() + module.params["timeout"]
            while not os.path.isdir(ipoib.net_dir(root, name)):
                if time.time() > deadline:
                    raise ipoib.IpoibError("%s did not appear within %ds of create_child" % (
                        name, module.params["timeout"]))
                time.sleep(0.2)
        ipoib.apply(root, steps, wait)
    return {"changed": bool(steps), "interfaces": after, "writes": writes,
            "diff": {"before": before, "after": after}}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = run(module)
    except ipoib.IpoibError as exc:
        module.fail_json(msg="ipoib: %s" % exc, changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
