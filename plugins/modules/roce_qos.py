#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: roce_qos
short_description: Read and set the lossless RoCE v2 QoS of RoCE netdevs (trust, PFC, DSCP map, ECN, CNP, ToS, pause)
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
    description:
      - The RoCE netdev (an Ethernet port of an RDMA device), for example C(enp12s0np0).
      - One of O(netdev) and O(netdevs) is required.
    type: str
  netdevs:
    description:
      - Several RoCE netdevs in one call, each with its own settings (the same options as at the top; a setting left
        out of an entry is the top-level one). Every netdev is read and every setting checked before anything changes
        on any of them; then each is set in turn. An 8-rail host is one call, not eight.
      - The result keys of a single netdev are then under RV(netdevs), per netdev.
    type: list
    elements: dict
    suboptions:
      netdev:
        description: The RoCE netdev.
        type: str
        required: true
      trust:
        description: As O(trust).
        type: str
        choices: [dscp, pcp]
      pfc:
        description: As O(pfc).
        type: list
        elements: int
      dscp2prio:
        description: As O(dscp2prio).
        type: dict
      ecn:
        description: As O(ecn).
        type: list
        elements: int
      cnp_dscp:
        description: As O(cnp_dscp).
        type: int
      cnp_priority:
        description: As O(cnp_priority).
        type: int
      dcqcn:
        description: As O(dcqcn).
        type: dict
      traffic_class:
        description: As O(traffic_class).
        type: int
      roce_tos:
        description: As O(roce_tos).
        type: int
      roce_mode:
        description: As O(roce_mode).
        type: str
        choices: [v1, v2]
      global_pause:
        description: As O(global_pause).
        type: bool
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

- name: The same profile on two rails, PFC on priority 3 everywhere, the storage port's own DSCP map
  hpcnet.rdma.roce_qos:
    trust: dscp
    pfc: [3]
    netdevs:
      - netdev: enp12s0np0
        dscp2prio: {26: 3, 48: 6}
      - netdev: enp140s0np0
        dscp2prio: {24: 3, 48: 6}
'''

RETURN = r'''
netdevs:
  description:
    - With O(netdevs), one entry per netdev, in the order given, each with the keys a single netdev returns
      (RV(before), RV(after), RV(commands), RV(firmware), RV(backend), RV(rdma_device), RV(boot)) and its own
      C(changed). The top-level keys below are then left out.
  type: dict
  returned: with O(netdevs)
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
  returned: with O(netdev)
after:
  description: The state after the call (read again after applying; the planned state in check mode). Same keys as RV(before).
  type: dict
  returned: with O(netdev)
commands:
  description: The steps run, in order; an argv list, or C([write, VALUE, PATH]) for a sysfs / configfs write.
  type: list
  elements: list
  returned: with O(netdev)
firmware:
  description:
    - Settings this stack keeps only in the firmware, by their mlxconfig names (C(ROCE_CC_PRIO_MASK_P1),
      C(CNP_DSCP_P1), C(CNP_802P_PRIO_P1), ...), with the value the desired state needs. Nothing is changed for them here.
  type: dict
  returned: with O(netdev)
backend:
  description: The backend used (mlnx_qos or dcb).
  type: str
  returned: with O(netdev)
rdma_device:
  description: The RDMA device and port of the netdev, as C(mlx5_0:1).
  type: str
  returned: with O(netdev)
boot:
  description:
    - What re-applies the settings given on a port fresh from a driver load (the same whatever the state now), for a
      boot-time unit. C(commands) are argv lists; C(writes) are C([path, value]) sysfs / configfs writes, a null
      value meaning a configfs directory to create.
  type: dict
  returned: with O(netdev)
'''

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_qos import (  # noqa: E402
    BACKENDS, SETTINGS, Port, QosApplyError, QosError, describe_step, validate)
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner  # noqa: E402


SETTING_SPEC = dict(
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
ARGUMENT_SPEC = dict(
    netdev=dict(type="str"),
    netdevs=dict(type="list", elements="dict", options=dict(netdev=dict(type="str", required=True), **SETTING_SPEC)),
    backend=dict(type="str", choices=list(BACKENDS), default="auto"),
    sysfs_root=dict(type="path", default="/sys"),
    **SETTING_SPEC
)


def run(module):
    """Compute every netdev's plan first (each read, each setting checked), then apply behind the check-mode gate."""
    params = module.params
    common = dict((key, params[key]) for key in SETTINGS)
    entries = params["netdevs"] if params["netdevs"] is not None else [dict(netdev=params["netdev"])]
    names = [entry["netdev"] for entry in entries]
    if len(set(names)) != len(names):
        twice = sorted(set(name for name in names if names.count(name) > 1))
        raise QosError("netdevs names a netdev more than once: %s" % ", ".join(twice))
    runner = ModuleRunner(module)
    ports, errors = [], []
    for entry in entries:
        desired = dict((key, entry[key] if entry.get(key) is not None else common[key]) for key in SETTINGS)
        try:
            port = Port(runner, params["sysfs_root"], entry["netdev"], params["backend"])
        except QosError as exc:
            errors.append(_named(entry["netdev"], exc, params))
            continue
        errors.extend(_named(entry["netdev"], err, params) for err in validate(desired, port.line_rate_mbps))
        ports.append((port, desired))
    if errors:
        raise QosError("; ".join(errors))
    plans = [_plan(port, desired, module.check_mode) for port, desired in ports]
    if not module.check_mode:
        for index, (port, result, steps) in enumerate(plans):
            _apply(module, port, result, steps, [r for _p, r, _s in plans[:index]], params["netdevs"] is not None)
    if params["netdevs"] is None:
        return plans[0][1]
    results = dict((port.netdev, result) for port, result, _steps in plans)
    return dict(changed=any(r["changed"] for r in results.values()), netdevs=results,
                diff=[dict(r["diff"], before_header=name, after_header=name) for name, r in results.items()])


def _named(netdev, error, params):
    return "%s: %s" % (netdev, error) if params["netdevs"] is not None else str(error)


def _plan(port, desired, check_mode):
    before = port.read(create_cm=not check_mode)
    after, steps, firmware = port.plan(before, desired)
    boot_commands, boot_writes = port.boot_steps(desired)
    result = dict(changed=bool(steps), before=before, after=after, firmware=firmware, backend=port.backend,
                  boot=dict(commands=boot_commands, writes=boot_writes),
                  rdma_device="%s:%s" % (port.device, port.port), commands=[describe_step(s) for s in steps],
                  diff=dict(before=_changed(before, after), after=_changed(after, before)))
    return port, result, steps


def _apply(module, port, result, steps, done, many):
    if not steps:
        return
    try:
        port.apply(steps)
    except QosApplyError as exc:
        result["changed"] = bool(exc.applied)
        applied = [describe_step(s) for s in exc.applied] or "nothing"
        msg = "%s. Applied before the failure: %s. A re-run reads the state again and converges." % (exc, applied)
        if many:
            module.fail_json(msg="%s: %s Netdevs set before it: %s." % (
                port.netdev, msg, ", ".join(r["rdma_device"] for r in done if r["changed"]) or "none"),
                changed=result["changed"] or any(r["changed"] for r in done))
        module.fail_json(msg=msg, **result)
    result["after"] = port.read()


def _changed(state, other):
    return dict((key, value) for key, value in state.items() if other.get(key) != value)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           mutually_exclusive=[("netdev", "netdevs")], required_one_of=[("netdev", "netdevs")])
    try:
        result = run(module)
    except QosError as exc:
        module.fail_json(msg="roce_qos %s: %s" % (module.params["netdev"] or "netdevs", exc), changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
