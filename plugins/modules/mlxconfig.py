#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: mlxconfig
short_description: ConnectX firmware configuration (mlxconfig / mstconfig) as desired state
version_added: "0.3.0"
description:
  - Reads the non-volatile firmware configuration of a ConnectX device with C(<tool> -d <pci> -e q) and sets the
    parameters whose next-boot value differs from O(params), all in one C(<tool> -y -d <pci> set A=B C=D) call.
  - The firmware applies the new values at the next boot (or firmware reset). Until then the C(Current) column
    keeps the old value; the module reports the difference as RV(pending) and RV(reboot_required). A second run
    before the reboot changes nothing, because it compares against the next-boot value.
  - Check mode computes the same plan (RV(commands)) and changes nothing.
  - The firmware configuration belongs to the card; every PCI function of a multi-port card shows the whole
    card's parameters, with C(_P1), C(_P2) for its ports (PCI function N-1 drives port N).
options:
  device:
    description:
      - A PCI address (V(0000:0c:00.0) or V(0c:00.0)) or an RDMA device name (V(mlx5_0)), resolved to its PCI
        function through C(<sysfs_root>/class/infiniband/<dev>/device). The tool is always called with the PCI address.
    type: str
    required: true
  params:
    description:
      - Desired next-boot values by the names the tool prints (V(LINK_TYPE_P1), V(SRIOV_EN), V(NUM_OF_VFS),
        V(ATS_ENABLED), V(ROCE_CC_PRIO_MASK_P1), V(CNP_DSCP_P1), V(CNP_802P_PRIO_P1), V(NAME[3]) for an array entry).
      - Values are symbols as printed without the number (V(IB), V(ETH), V(True)), numbers, or booleans.
      - Empty (the default) only reads.
    type: dict
    default: {}
  tool:
    description:
      - V(auto) uses C(mlxconfig) (NVIDIA MFT) when installed, else C(mstconfig) (package mstflint).
    type: str
    choices: [auto, mlxconfig, mstconfig]
    default: auto
  reset:
    description:
      - Restore every parameter not in O(params) to its default (C(<tool> -y -d <pci> reset), then the set call).
    type: bool
    default: false
notes:
  - O(sysfs_root) is where an RDMA device name (C(mlx5_0)) is resolved to its PCI address.
  - Needs root. Each read runs the tool once (twice when O(params) names array entries the full query does not
    list, plus C(<tool> -d <pci> i) to check a symbol the device does not currently show).
author:
  - hpcnet.rdma contributors (@hpcnet)
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes
'''

EXAMPLES = r'''
- name: InfiniBand on port 1 of a VPI card
  hpcnet.rdma.mlxconfig:
    device: mlx5_0
    params:
      LINK_TYPE_P1: IB

- name: SR-IOV with 8 VFs, ATS off for bare-metal GPUDirect
  hpcnet.rdma.mlxconfig:
    device: "0000:0c:00.0"
    params:
      SRIOV_EN: true
      NUM_OF_VFS: 8
      ATS_ENABLED: false
  register: fw

- name: Read only
  hpcnet.rdma.mlxconfig:
    device: mlx5_0
  register: fw_now
'''

RETURN = r'''
device:
  description: PCI address the tool was called with.
  type: str
  returned: always
  sample: "0000:0c:00.0"
tool:
  description: The tool used (C(mlxconfig) or C(mstconfig)).
  type: str
  returned: always
device_info:
  description: The header of the query (C(Device type), C(Name) = part number with the C(_Ax) suffix, C(Description)).
  type: dict
  returned: always
  sample: {type: ConnectX7, name: MCX755106AS-HEAT_Ax, description: "NVIDIA ConnectX-7 ...", device: "0000:0c:00.0"}
config:
  description:
    - Every parameter of C(<tool> -e q) after the call, as C({default, current, next_boot}). A value printed as
      C(NAME(n)) is the integer n, a bare number stays a number, anything else is the printed string (C(Array[0..7])).
  type: dict
  returned: always
  sample: {LINK_TYPE_P1: {default: 1, current: 2, next_boot: 1}, NUM_OF_VFS: {default: 0, current: 8, next_boot: 8}}
pending:
  description:
    - The parameters whose next-boot value differs from the current one, after the call (in check mode, as they
      would be), as C({current, next_boot}) with normalized values and C(printed) as the tool prints them.
  type: dict
  returned: always
  sample: {LINK_TYPE_P1: {current: 2, next_boot: 1, printed: {current: ETH(2), next_boot: IB(1)}}}
reboot_required:
  description: True when RV(pending) is not empty after the call (a reboot or firmware reset applies it).
  type: bool
  returned: always
changes:
  description: What the call changes (or would, in check mode) in the next-boot configuration, C({before, after}) per parameter.
  type: dict
  returned: always
  sample: {LINK_TYPE_P1: {before: 2, after: 1}}
commands:
  description: The argv lists run (or, in check mode, that would run).
  type: list
  elements: list
  returned: always
  sample: [[mstconfig, -y, -d, "0000:0c:00.0", set, LINK_TYPE_P1=IB]]
'''

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware.mlxconfig import (  # noqa: E402
    Device, MlxconfigError, configure)
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner  # noqa: E402


ARGUMENT_SPEC = dict(
    device=dict(type="str", required=True),
    params=dict(type="dict", default={}),
    tool=dict(type="str", choices=["auto", "mlxconfig", "mstconfig"], default="auto"),
    reset=dict(type="bool", default=False),
    sysfs_root=dict(type="path", default="/sys"),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        result = configure(lambda pci: Device(ModuleRunner(module), pci, params["tool"]), params["device"],
                           params["params"], params["reset"], params["sysfs_root"], module.check_mode)
    except MlxconfigError as exc:
        module.fail_json(msg="mlxconfig %s: %s" % (params["device"], exc), changed=exc.changed)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
