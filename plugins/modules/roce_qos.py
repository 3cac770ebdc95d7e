#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: roce_qos
short_description: Read and set the lossless RoCE v2 QoS of one netdev (trust, PFC, DSCP map, ECN, CNP, ToS, pause)
version_added: "0.2.0"
description:
  - Reads the whole QoS state of one RoCE netdev, computes the changes to the settings given, and applies them in
    an order that never leaves the port half-configured in a harmful way. Settings left out are neither compared
    nor changed. Called with no settings it is a pure read (C(changed=false)).
  - Trust, PFC and the DSCP-to-priority map go through C(mlnx_qos) (MLNX_OFED / DOCA mlnx-tools) or iproute2's
    C(dcb). ECN per priority, the CNP DSCP / priority and DCQCN parameters go to MLNX_OFED's
    C(class/net/<if>/ecn/) sysfs tree. The ToS goes to MLNX_OFED's C(class/infiniband/<dev>/tc/<port>/traffic_class)
    and RDMA-CM's configfs C(default_roce_tos); the RoCE mode to configfs C(default_roce_mode); link-level pause
    through C(ethtool -A).
  - Inbox kernels have no C(ecn/) tree. There ECN, CNP and DCQCN are firmware settings; the module reports them
    under RV(firmware) (by their mlxconfig names) and changes nothing for them.
  - These settings live in the driver and are lost at a driver reload or reboot; the C(hpcnet.rdma.roce) role
    re-applies them at boot.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  netdev:
    description: The RoCE netdev (an Ethernet port of an RDMA device), for example C(enp12s0np0).
    type: str
    required: true
  backend:
    description: C(mlnx_qos), C(dcb), or C(auto) (C(mlnx_qos) when installed, else C(dcb)).
    type: str
    choices: [auto, mlnx_qos, dcb]
    default: auto
  trust:
    description: Priority trust state.
    type: str
    choices: [dscp, pcp]
  pfc:
    description: Priorities (0-7) with PFC on; every other priority gets PFC off.
    type: list
    elements: int
  dscp2prio:
    description: DSCP (0-63) to priority (0-7) entries to set; other DSCPs keep their mapping.
    type: dict
  ecn:
    description: Priorities with ECN enabled at both the notification and the reaction point; others are left as they are.
    type: list
    elements: int
  cnp_dscp:
    description: DSCP (0-63) of the CNPs this port sends.
    type: int
  cnp_priority:
    description: 802.1p priority (0-7) of the CNPs this port sends.
    type: int
  dcqcn:
    description:
      - DCQCN parameters by their MLNX_OFED names (C(rpg_min_rate), C(rpg_ai_rate), C(min_time_between_cnps), ...),
        checked against NVIDIA's documented ranges; rates in Mb/s are bounded by the port's line rate.
    type: dict
  traffic_class:
    description: ToS byte (0-255) written to MLNX_OFED's C(tc/<port>/traffic_class); ignored where the stack has no such file.
    type: int
  roce_tos:
    description: ToS byte (0-255) RDMA-CM uses by default (configfs C(default_roce_tos)).
    type: int
  roce_mode:
    description: RDMA-CM's default RoCE mode (configfs C(default_roce_mode)).
    type: str
    choices: [v1, v2]
  global_pause:
    description: Link-level (802.3x) pause in both directions; must be false when PFC is on.
    type: bool
notes:
  - configfs (the RDMA-CM defaults) is read and written under C(<sysfs_root>/kernel/config).
  - Check mode computes the same plan and changes nothing; on a host where the RDMA-CM configfs directory of the
    device does not exist yet, check mode reports C(roce_mode) and C(roce_tos) as null.
  - Supports C(diff).
seealso:
  - module: hpcnet.rdma.rdma_facts
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes
'''

EXAMPLES = r'''
- name: Read the QoS state of a RoCE port
  hpcnet.rdma.roce_qos:
    netdev: enp12s0np0

- name: NVIDIA's lossless profile on one port
  hpcnet.rdma.roce_qos:
    netdev: enp12s0np0
    trust: dscp
    pfc: [3]
    ecn: [3]
    cnp_dscp: 48
    cnp_priority: 6
    traffic_class: 106
    roce_tos: 106
    roce_mode: v2
    global_pause: false
'''

RETURN = r'''
before:
  description:
    - The QoS state read before any change. Keys are fixed; null means this host cannot tell (no C(ecn/) tree, no
      ethtool, no RDMA-CM configfs).
    - C(trust) (dscp|pcp, from the backend tool); C(pfc) (priorities with PFC on); C(dscp2prio) (64 priorities,
      index = DSCP); C(ecn) (C({np, rp}) priorities, from C(ecn/roce_np|roce_rp/enable/<prio>)); C(cnp_dscp),
      C(cnp_priority) (C(ecn/roce_np/cnp_dscp|cnp_802p_prio)); C(dcqcn) (parameter files of C(ecn/)); C(traffic_class)
      (C(tc/<port>/traffic_class)); C(roce_tos), C(roce_mode) (configfs); C(global_pause) (C(ethtool -a), true when
      rx or tx pause is on).
  type: dict
  returned: always
after:
  description: The state after the call (read again after applying; the planned state in check mode). Same keys as RV(before).
  type: dict
  returned: always
commands:
  description: The steps run, in order; an argv list, or C([write, VALUE, PATH]) for a sysfs / configfs write.
  type: list
  elements: list
  returned: always
firmware:
  description:
    - Settings this stack keeps only in the firmware, by their mlxconfig names (C(ROCE_CC_PRIO_MASK_P1),
      C(CNP_DSCP_P1), C(CNP_802P_PRIO_P1), ...), with the value the desired state needs. Nothing is changed for them here.
  type: dict
  returned: always
backend:
  description: The backend used (mlnx_qos or dcb).
  type: str
  returned: always
rdma_device:
  description: The RDMA device and port of the netdev, as C(mlx5_0:1).
  type: str
  returned: always
boot:
  description:
    - What re-applies the settings given on a port fresh from a driver load (the same whatever the state now), for a
      boot-time unit. C(commands) are argv lists; C(writes) are C([path, value]) sysfs / configfs writes, a null
      value meaning a configfs directory to create.
  type: dict
  returned: always
'''

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_qos import (  # noqa: E402
    BACKENDS, SETTINGS, Port, QosApplyError, QosError, describe_step, validate)
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner  # noqa: E402


ARGUMENT_SPEC = dict(
    netdev=dict(type="str", required=True),
    backend=dict(type="str", choices=list(BACKENDS), default="auto"),
    sysfs_root=dict(type="path", default="/sys"),
    trust=dict(type="str", choices=["dscp", "pcp"]),
    pfc=dict(type="list", elements="int"),
    dscp2prio=dict(type="dict"),
    ecn=dict(type="list", elements="int"),
    cnp_dscp=dict(type="int"),
    cnp_priority=dict(type="int"),
    dcqcn=dict(type="dict"),
    traffic_class=dict(type="int"),
    roce_tos=dict(type="int"),
    roce_mode=dict(type="str", choices=["v1", "v2"]),
    global_pause=dict(type="bool"),
)


def run(module):
    params = module.params
    desired = dict((key, params[key]) for key in SETTINGS)
    port = Port(ModuleRunner(module), params["sysfs_root"], params["netdev"], params["backend"])
    errors = validate(desired, port.line_rate_mbps)
    if errors:
        raise QosError("; ".join(errors))
    before = port.read(create_cm=not module.check_mode)
    after, steps, firmware = port.plan(before, desired)
    boot_commands, boot_writes = port.boot_steps(desired)
    result = dict(changed=bool(steps), before=before, after=after, firmware=firmware, backend=port.backend,
                  boot=dict(commands=boot_commands, writes=boot_writes),
                  rdma_device="%s:%s" % (port.device, port.port), commands=[describe_step(s) for s in steps],
                  diff=dict(before=_changed(before, after), after=_changed(after, before)))
    if steps and not module.check_mode:
        try:
            port.apply(steps)
        except QosApplyError as exc:
            result["changed"] = bool(exc.applied)
            module.fail_json(msg="%s. Applied before the failure: %s. A re-run reads the state again and converges." % (
                exc, [describe_step(s) for s in exc.applied] or "nothing"), **result)
        result["after"] = port.read()
    return result


def _changed(state, other):
    return dict((key, value) for key, value in state.items() if other.get(key) != value)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = run(module)
    except QosError as exc:
        module.fail_json(msg="roce_qos %s: %s" % (module.params["netdev"], exc), changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
