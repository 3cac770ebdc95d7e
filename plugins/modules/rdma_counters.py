#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: rdma_counters
short_description: Snapshot the RDMA port counters (PFC pause, ECN/CNP, discards, IB errors) and their deltas
version_added: "0.6.0"
description:
  - Read-only. Reads, per RDMA port, the counters a fabric report needs, keyed C(<hca>/<port>) (C(mlx5_0/1)).
  - "From C(<sysfs_root>/class/infiniband/<hca>/ports/<port>/counters/) (IB PMA counters; mlx5 RoCE ports have the
    same files): C(symbol_error), C(link_error_recovery), C(link_downed), C(port_rcv_errors),
    C(port_rcv_remote_physical_errors), C(port_xmit_discards), C(local_link_integrity_errors),
    C(excessive_buffer_overrun_errors) (error counts, which stop at their maximum: 15, 255 or 65535), and
    C(port_xmit_data), C(port_rcv_data) (in 4-byte words: multiply by 4 for bytes)."
  - "From C(.../hw_counters/) (mlx5): C(out_of_buffer) (packets dropped because no receive buffer was posted),
    C(out_of_sequence), C(packet_seq_err), C(local_ack_timeout_err) (signs of loss and retransmission), and on RoCE
    ports C(np_ecn_marked_roce_packets) (ECN-marked packets received), C(np_cnp_sent) (CNPs sent),
    C(rp_cnp_handled) (CNPs received and acted on by DCQCN). All in packets or events."
  - "From C(ethtool -S <netdev>) for Ethernet (RoCE) ports: C(rx_prioN_pause) and C(tx_prioN_pause) (PFC pause
    frames per priority N; mlx5 lists them only for priorities with PFC on), C(rx_global_pause) and
    C(tx_global_pause) (link-level pause, listed only while it is on), C(rx_discards_phy), C(tx_discards_phy),
    C(rx_crc_errors_phy), C(rx_symbol_err_phy), C(link_down_events_phy), C(tx_pause_storm_warning_events),
    C(tx_pause_storm_error_events). The only command run, as an argv list with C(LC_ALL=C)."
  - With O(before) (the RV(counters) of an earlier run, for example before the traffic), also returns the deltas
    and the findings they lead to.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  devices:
    description:
      - The HCAs to read (C(mlx5_0)); all RDMA devices when omitted. A name that is not an RDMA device on the host
        gives a note in RV(notes), not a failure.
    type: list
    elements: str
  before:
    description:
      - The RV(counters) of an earlier run on this host (or that run's whole registered result). When given,
        RV(deltas), RV(delta_notes) and RV(findings) are returned.
    type: dict
  lossless_priorities:
    description:
      - The priorities (0-7) the roce profile declares lossless (with PFC), as C(roce_pfc_priorities). Used only for
        the findings. Empty means no lossless priority (InfiniBand, or RoCE without PFC).
    type: list
    elements: int
    default: []
  host:
    description: The name findings carry in their C(host) key (the inventory name); the system's host name when omitted.
    type: str
notes:
  - O(sysfs_root) must contain C(class/).
  - Read-only; always returns C(changed=false) and runs the same in check mode.
  - A counter that went back between the two runs was reset (driver reload, port reset, C(perfquery -R)); its delta is
    its value after the reset (a lower bound), and RV(delta_notes) says so. Deltas are never negative.
  - "Hardware-only: the counters move only with real traffic on real HCAs and switches."
seealso:
  - module: hpcnet.rdma.rdma_facts
  - module: hpcnet.rdma.rdma_verify
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes.read_only
'''

EXAMPLES = r'''
- name: Counters before the traffic
  hpcnet.rdma.rdma_counters:
    sysfs_root: "{{ verify_sysfs_root }}"
  register: counters_before

# ... perftest / nccl-tests ...

- name: Counters after the traffic, with deltas and findings
  hpcnet.rdma.rdma_counters:
    sysfs_root: "{{ verify_sysfs_root }}"
    before: "{{ counters_before.counters }}"
    lossless_priorities: "{{ roce_lossless_priorities | default([]) }}"
    host: "{{ inventory_hostname }}"
  register: counters_after

- name: Show the PFC pause frames of priority 3 on mlx5_0
  ansible.builtin.debug:
    msg: "{{ counters_after.deltas['mlx5_0/1'].rx_prio3_pause | default('no PFC on priority 3') }}"
'''

RETURN = r'''
counters:
  description:
    - Per port (C(<hca>/<port>)), counter name to its value now (an integer; units in the description above). Only the
      counters that exist on the port are listed.
  type: dict
  returned: always
  sample: {"mlx5_0/1": {"symbol_error": 0, "port_xmit_data": 10240, "out_of_buffer": 0, "np_cnp_sent": 0,
                        "rx_prio3_pause": 12, "tx_prio3_pause": 40, "rx_discards_phy": 0}}
sources:
  description: Per port, counter name to where it was read (a sysfs path, or C(ethtool -S <netdev>)).
  type: dict
  returned: always
  sample: {"mlx5_0/1": {"symbol_error": "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error",
                        "rx_prio3_pause": "ethtool -S enp12s0np0"}}
ports:
  description: Per port, C(link_layer) (C(InfiniBand) or C(Ethernet)), C(state) (C(ACTIVE), ...) and C(netdev) (or null).
  type: dict
  returned: always
  sample: {"mlx5_0/1": {"link_layer": "Ethernet", "state": "ACTIVE", "netdev": "enp12s0np0"}}
notes:
  description:
    - What could not be read, as C({port, kind, message}); C(kind) is C(absent_device) (a name of O(devices) that is
      not an RDMA device; port null), C(no_ethtool) or C(ethtool_failed) (no ethtool counters for that port).
  type: list
  elements: dict
  returned: always
deltas:
  description:
    - Per port, counter name to (now - O(before)), never negative; null for a counter that was not in O(before).
    - The ports and names of both runs; a port missing from one run is left out (see RV(delta_notes)).
  type: dict
  returned: when O(before) is given
  sample: {"mlx5_0/1": {"rx_prio3_pause": 1520, "rx_discards_phy": 0, "np_cnp_sent": 88}}
delta_notes:
  description:
    - C({port, counter, kind, before, after, message}) for every delta that is not a plain difference; C(kind) is
      C(reset) (the counter went back; the delta is its value now, a lower bound), C(saturated) (an IB error counter at
      its maximum; the delta is a lower bound), C(appeared) (delta null), C(disappeared) or C(port_missing).
  type: list
  elements: dict
  returned: when O(before) is given
findings:
  description:
    - What the deltas say, as C({host, severity, check, device, port, expected, found, cause, fix}) (the shape of
      M(hpcnet.rdma.rdma_verify)'s findings). C(check) is C(counter_discards) (drops on a RoCE port; error on a
      lossless one), C(counter_pfc) (PFC off on a declared lossless priority), C(counter_link_errors) (IB or Ethernet
      link error counters moving), C(counter_pause) (pause frames on a priority not declared lossless, or link-level
      pause), C(counter_pfc_storm), C(counter_retransmits) (loss on a lossless port) or C(counter_reset).
    - Zero ECN marks and zero pause frames on a lossless RoCE port is fine, not a finding.
  type: list
  elements: dict
  returned: when O(before) is given
'''

import socket  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.rdma_counters import (  # noqa: E402
    deltas, findings, normalise_before, snapshot)
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError  # noqa: E402
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner  # noqa: E402

ARGUMENT_SPEC = dict(
    sysfs_root=dict(type="path", default="/sys"),
    devices=dict(type="list", elements="str"),
    before=dict(type="dict"),
    lossless_priorities=dict(type="list", elements="int", default=[]),
    host=dict(type="str"),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    bad = [x for x in p["lossless_priorities"] if not 0 <= x <= 7]
    if bad:
        module.fail_json(msg="lossless_priorities: priorities are 0-7; got %s" % bad, changed=False)
    try:
        before = normalise_before(p["before"]) if p["before"] is not None else None
    except ValueError as exc:
        module.fail_json(msg="rdma_counters: %s" % exc, changed=False)
    try:
        result = snapshot(ModuleRunner(module), p["sysfs_root"], p["devices"])
    except SysfsError as exc:
        module.fail_json(msg="rdma_counters: %s" % exc, path=exc.path, changed=False)
    if before is not None:
        notes = []
        result["deltas"] = deltas(before, result["counters"], notes)
        result["delta_notes"] = notes
        link_layers = dict((port, info["link_layer"]) for port, info in result["ports"].items())
        netdevs = dict((port, info["netdev"]) for port, info in result["ports"].items())
        result["findings"] = findings(p["host"] or socket.gethostname(), result["deltas"], p["lossless_priorities"],
                                      link_layers, notes, netdevs)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
