#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: firmware_config
short_description: The firmware configuration of every ConnectX card of a host as desired state, in one call
version_added: "0.7.0"
description:
  - Reads every ConnectX card of the host first (C(<tool> -d <pci> -e q), one PCI function per card), matches
    O(entries) to the cards by their selectors, and sets on each card the parameters whose next-boot value differs,
    in one C(<tool> -y -d <pci> set A=B ...) call per card. This is what M(hpcnet.rdma.mlxconfig) does for one card,
    for the whole host, with the checks that span cards.
  - Before any card is written it refuses entries of the wrong shape and a parameter that a selected card does not
    have (so one card without it does not leave another one changed).
  - A card the tool refuses does not stop the others; it is returned in RV(refused) with what the other cards now
    have pending (RV(reboot_reasons)), and the task does not fail for it, so the caller can report first.
  - Check mode reads, plans and reports the commands a run would use (RV(commands)); it writes nothing.
  - The firmware applies new values at the next boot; until then they are pending (RV(reboot_reasons)).
options:
  entries:
    description:
      - The desired parameters, as the firmware role's C(firmware_mlxconfig) list of C({devices, params}); a
        selector in C(devices) is V(all), PCI addresses, RDMA device names, part numbers, PSIDs or V(role:<port role>)
        (V(role:compute), V(role:storage), V(role:management), V(role:unused) - a card with a port of that role, the
        ports' C(role) in O(devices)). Later entries win.
      - Empty reads nothing unless O(read_all).
    type: list
    elements: dict
    default: []
  devices:
    description:
      - The host's RDMA devices as C(ansible_facts.rdma.devices) (M(hpcnet.rdma.rdma_facts)), each port with its
        C(role) for V(role:) selectors.
    type: dict
    required: true
  fabrics:
    description:
      - The host's inventory groups (C(group_names)). With them, O(devices) read without port roles (hand-written
        facts) get the default roles (compute, storage, ...) for V(role:) selectors; devices that carry their roles
        keep them.
    type: list
    elements: str
  read_all:
    description: Read every card even with no O(entries) (what is pending for the next boot, after a reboot).
    type: bool
    default: false
  tool:
    description: V(auto) uses C(mlxconfig) (NVIDIA MFT) when installed, else C(mstconfig) (package mstflint).
    type: str
    choices: [auto, mlxconfig, mstconfig]
    default: auto
author:
  - hpcnet.rdma contributors (@hpcnet)
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes
'''

EXAMPLES = r'''
- name: InfiniBand on every port of the VPI cards, SR-IOV on one part number
  hpcnet.rdma.firmware_config:
    devices: "{{ ansible_facts['rdma']['devices'] }}"
    entries:
      - devices: all
        params: {LINK_TYPE_P1: IB}
      - devices: MCX755106AS-HEAT
        params: {SRIOV_EN: true, NUM_OF_VFS: 8}
  register: fw

- name: SR-IOV on the cards of the storage ports only
  hpcnet.rdma.firmware_config:
    devices: "{{ ansible_facts['rdma']['devices'] }}"
    fabrics: "{{ group_names }}"
    entries:
      - devices: [role:storage]
        params: {SRIOV_EN: true, NUM_OF_VFS: 8}

- name: What the firmware has pending for the next boot
  hpcnet.rdma.firmware_config:
    devices: "{{ ansible_facts['rdma']['devices'] }}"
    read_all: true
  register: fw_now
'''

RETURN = r'''
cards:
  description:
    - One result per card read, as M(hpcnet.rdma.mlxconfig) returns it (C(device) = the PCI address the tool was
      called with, C(device_info), C(config), C(pending), C(commands), C(diff)), with the card's RDMA C(devices) and
      the C(params) the entries asked of it.
  type: list
  elements: dict
  returned: always
unmatched:
  description: "The selectors that pick no card on this host, as C(firmware_mlxconfig[i].devices: X)."
  type: list
  elements: str
  returned: always
  sample: ["firmware_mlxconfig[1].devices: MCX75310AAS-NEAT"]
commands:
  description: The firmware commands run (in check mode, that a run would use), one line each.
  type: list
  elements: str
  returned: always
  sample: ["mstconfig -y -d 0000:0c:00.0 set LINK_TYPE_P1=IB"]
reboot_reasons:
  description:
    - Every parameter pending for the next boot, as C({device, pci, card, parameter, from, to}) (the shape of
      C(rdma_reboot_reasons)).
  type: list
  elements: dict
  returned: always
refused:
  description: The cards the tool refused, as C({pci, devices, changed, msg}).
  type: list
  elements: dict
  returned: always
'''

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware.firmware_apply import (  # noqa: E402
    FirmwareFailure, desired_state)
from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware.mlxconfig import Device  # noqa: E402
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner  # noqa: E402
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import planned  # noqa: E402

ARGUMENT_SPEC = dict(
    entries=dict(type="list", elements="dict", default=[]),
    devices=dict(type="dict", required=True),
    fabrics=dict(type="list", elements="str"),
    read_all=dict(type="bool", default=False),
    tool=dict(type="str", choices=["auto", "mlxconfig", "mstconfig"], default="auto"),
    sysfs_root=dict(type="path", default="/sys"),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    runner = ModuleRunner(module)
    devices = params["devices"]
    with_roles = any(isinstance(port, dict) and port.get("role") for dev in devices.values() if isinstance(dev, dict)
                     for port in (dev.get("ports") or {}).values())
    if params["fabrics"] is not None and not with_roles:
        # devices read without port roles: the default roles of the host's groups, for role: selectors
        devices = planned({"devices": devices}, params["fabrics"])["devices"]
    try:
        result = desired_state(lambda pci: Device(runner, pci, params["tool"]), devices, params["entries"],
                               params["sysfs_root"], module.check_mode, params["read_all"])
    except FirmwareFailure as exc:
        module.fail_json(msg=str(exc), changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
