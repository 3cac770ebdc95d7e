#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: rdma_verify
short_description: Compare every host's RDMA facts with the fabric spec and return findings with cause and fix
version_added: "0.6.0"
description:
  - "Read-only spec checks of an RDMA fabric, without traffic. Runs once, on the controller
    (C(delegate_to: localhost), C(run_once: true)), with the data of every host, because several checks compare hosts
    (rates, firmware, GID indexes, SM per subnet)."
  - "Checks, per host (each one C(pass), C(fail) or C(skip) in RV(hosts)):
    C(port_state) (every expected HCA and port exists and is ACTIVE/LinkUp);
    C(link_layer) (compute ports: InfiniBand in the infiniband group, Ethernet in roce; storage ports: the most
    common link layer of the group's storage ports, a warning);
    C(rate) (O(spec.expected_rate_gbps), or the most common rate of the group's compute ports; storage ports
    O(spec.expected_storage_rate_gbps), or the most common rate of the group's storage ports);
    C(width) (O(spec.min_width) for the compute ports, or the most common width of the port's role in the group);
    C(mtu) (the netdev MTU of the RoCE / IPoIB ports is C(expect.mtu) in O(hosts) (storage ports
    C(expect.storage_mtu)), or the most common MTU of the same rail, or storage port, in the group);
    C(firmware) (O(spec.expected_fw_ver), or the most common version of the same board in the group);
    C(gid_index) (RoCE: the RoCE v2 IPv4 GID index exists and is the same on every RoCE host, rail by rail);
    C(roce_qos) (RoCE: the QoS state is the declared roce profile);
    C(subnet_manager) (InfiniBand: every ACTIVE port has a LID and an SM LID; a rail where no port sees an SM is one
    finding for the whole fabric, with host C(fabric));
    C(ipoib) (the expected IPoIB netdevs are up); C(memlock) (RLIMIT_MEMLOCK); C(kernel_modules) (mlx5_core,
    mlx5_ib, ib_core, ib_uverbs, rdma_cm, and ib_ipoib on InfiniBand hosts that expect IPoIB);
    C(gdr) (nvidia_peermem where GPUDirect RDMA is expected)."
  - Each port is checked by its role (C(ansible_facts.rdma.ports_by_role) of M(hpcnet.rdma.rdma_facts); facts read
    without roles get the defaults of the host's group). A host's compute ports (its rails) are C(expect.devices) in
    O(hosts) in the order given, or its ports of the role C(compute) in rail order (PCI order, whatever the devices
    are called). The I(rail) of a port is its position in that list; on InfiniBand a rail is a subnet. Its storage
    ports (role C(storage)) are checked against the group's storage ports; management and unused ports are not
    checked. C(gid_index) and C(subnet_manager) look at the compute ports.
  - Where the spec is silent the reference is the most common value in the group; a tie goes to the higher rate,
    width, MTU or firmware version and to the lower GID index. A difference from a declared value is an error; an
    odd one out against the group's most common MTU, firmware or SM LID is a warning, and so is a port faster than
    expected.
  - The module never fails because of findings; it fails only on bad input, naming the field.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  hosts:
    description:
      - Every host to check, keyed by inventory name. Each value is a dict with the keys below.
      - C(group) (str, required) is V(infiniband) or V(roce).
      - C(rdma) (dict, required) is that host's C(ansible_facts.rdma) from M(hpcnet.rdma.rdma_facts) (devices, ports
        with state, phys_state, link_layer, rate_gbps, width, lid, sm_lid, netdev, roce_v2_ipv4_gid_index; netdevs
        with mtu and operstate; kernel_modules; memlock).
      - "C(roce_qos) (dict, optional) is the registered result of M(hpcnet.rdma.roce_qos) run in check mode against
        the declared roce profile (C({changed, diff, msg}); C(changed=true) means the QoS state differs), or its
        per-netdev form C({changed, diff: {netdev: {before, after}}}), or a loop's C(results). Absent or null skips
        the C(roce_qos) check."
      - "C(expect) (dict, optional) holds C(devices) (list of HCA names such as C(mlx5_0), or C(mlx5_0:1) for one
        port: the rails in rail order; omitted or empty = the host's compute ports), C(gdr) (bool, default V(false):
        nvidia_peermem expected), C(ipoib) (list of netdevs that must be up, default none), C(mtu) (int, bytes:
        the netdev MTU expected on the compute ports' RoCE netdevs or IPoIB netdevs; null = the most common MTU of
        the same rail in the group), C(storage_mtu) (the same for the storage ports' netdevs) and C(memlock)
        (V(unlimited), the default, or a minimum in bytes)."
      - "C(sminfo) (dict, optional, InfiniBand) maps C(<hca>:<port>) to the output of C(sminfo -C <hca> -P <port>):
        the SMInfo of the SM at that port's SM LID, which must say C(SMINFO_MASTER). An answer from an SM in
        another state (a stale SM LID, as opensm can leave the ports of a rail after a handover) is an error of
        the C(subnet_manager) check; a failed query is not judged."
      - "C(roce_declared_qos) (dict, optional, RoCE) is the roce role's C(roce_declared_qos) (C({netdev: roce_qos
        parameters})): the profile each RoCE link's switch must agree with (C(switch_pfc), C(switch_app),
        C(switch_mtu), C(switch_dcbx) of the C(links) check). Null compares no switch."
      - "The C(links) check reads each port's C(peer) in C(rdma) (M(hpcnet.rdma.rdma_facts) with C(peers=true)):
        the rail map, C(peer_missing), C(rail_map), C(ib_link_width) and the switch agreement; it is skipped for
        facts read without peers."
      - "The C(pcie) check reads each RDMA device's C(pcie_path), C(gpu_affinity) and C(max_read_req), C(gpus) and
        C(iommu) in C(rdma) (M(hpcnet.rdma.rdma_facts) with C(pcie=true)): C(pcie_link), C(gpu_affinity),
        C(pcie_max_read_req) on every host, C(pcie_acs) and C(iommu) where C(expect.gdr) is true; it is skipped for
        facts read without the PCIe path."
    type: dict
    required: true
  spec:
    description: What the fabric must offer, for every host. Null values take the group's most common value.
    type: dict
    default: {}
    suboptions:
      expected_rate_gbps:
        description:
          - Port rate every expected ACTIVE port must run at, in Gb/s, as C(ansible_facts.rdma) rate_gbps
            (C(400 Gb/sec (4X NDR)) is V(400)). Fed by the playbook variable C(verify_expected_rate_gbps).
          - Null takes the most common rate of the compute ports of the host's group.
        type: float
      expected_storage_rate_gbps:
        description:
          - Port rate every ACTIVE storage port must run at, in Gb/s. Fed by C(verify_expected_storage_rate_gbps).
          - Null takes the most common rate of the storage ports of the host's group.
        type: float
      min_width:
        description:
          - Fewest lanes an ACTIVE compute port may have, one of C(1X), C(2X), C(4X), C(8X), C(12X) (as
            C(ansible_facts.rdma) width). Null takes the most common width of the compute ports of the host's group.
            Storage ports are compared with the most common width of the group's storage ports.
        type: str
      expected_fw_ver:
        description:
          - Firmware version every HCA must run (C(28.41.1000)), or a dict from board_id (PSID, C(MT_0000000838))
            or hca_type (C(MT4129)) to a version. Null takes, per board, the most common version of the group.
        type: raw
      rail_switches:
        description:
          - The switch group of each rail (C(rdma_rail_switches)), a list with one item per rail, rail 0 first; an
            item is a glob on the switch's LLDP system name or node description (C(leaf-r0-*)), or a list of globs.
          - Null infers each rail's switches (the switch most of a rail's ports reach); a fabric whose hosts put two
            rails on one switch is then not checked as rail-optimised.
        type: raw
notes:
  - Read-only; always returns C(changed=false) and runs the same in check mode.
  - The memlock limit in the facts is the one of the Ansible connection's process, which can differ from what a
    batch job or a systemd service gets.
  - An SM master is inferred from the ports' SM LID (C(sm_lid) non-zero on ACTIVE ports); where C(sminfo) answers
    are given, the SM at each port's SM LID must be that master.
seealso:
  - module: hpcnet.rdma.rdma_facts
  - module: hpcnet.rdma.roce_qos
  - module: hpcnet.rdma.rdma_counters
extends_documentation_fragment:
  - hpcnet.rdma.attributes.read_only
'''

EXAMPLES = r'''
- name: Check the fabric against the spec (once, on the controller)
  hpcnet.rdma.rdma_verify:
    hosts: >-
      {{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars)
              | map(attribute='verify_spec_input'))) }}
    spec:
      expected_rate_gbps: "{{ verify_expected_rate_gbps }}"
      min_width: 4X
  delegate_to: localhost
  run_once: true
  register: spec_checks

- name: One host, written out
  hpcnet.rdma.rdma_verify:
    hosts:
      node01:
        group: roce
        rdma: "{{ hostvars['node01'].ansible_facts.rdma }}"
        roce_qos: "{{ hostvars['node01'].roce_qos_check }}"
        expect:
          devices: [mlx5_0, mlx5_1]
          gdr: true
          mtu: 9000
          memlock: unlimited
  delegate_to: localhost
  run_once: true

- name: Show the findings
  ansible.builtin.debug:
    msg: "{{ item.host }} {{ item.check }} {{ item.device }}: {{ item.found }} ({{ item.cause }}) -> {{ item.fix }}"
  loop: "{{ spec_checks.findings }}"
'''

RETURN = r'''
verdict:
  description: C(pass) when no finding is an error, else C(fail).
  type: str
  returned: always
  sample: fail
hosts:
  description:
    - Per host (inventory name) the group, the outcome of every check, the host's verdict (C(fail) when it has an
      error finding, or sits on a rail with no SM) and its counts of error and warning findings.
    - C(checks) maps each check name (C(port_state), C(link_layer), C(rate), C(width), C(mtu), C(firmware),
      C(gid_index), C(roce_qos), C(subnet_manager), C(ipoib), C(memlock), C(kernel_modules), C(gdr), C(links),
      C(pcie)) to C(pass), C(fail) (at least one finding, error or warning) or C(skip) (nothing to check on this host).
  type: dict
  returned: always
  sample:
    node01:
      group: roce
      verdict: fail
      errors: 1
      warnings: 0
      checks: {port_state: pass, link_layer: pass, rate: pass, width: pass, mtu: pass, firmware: pass,
               gid_index: pass, roce_qos: fail, subnet_manager: skip, ipoib: skip, memlock: pass,
               kernel_modules: pass, gdr: skip}
findings:
  description:
    - Everything that differs from the spec, fabric-wide findings first, then host by host in check order.
  type: list
  elements: dict
  returned: always
  contains:
    host:
      description: Inventory name, or C(fabric) for a finding about the whole fabric (a rail with no SM).
      type: str
    severity:
      description: C(error) (the fabric does not work as specified) or C(warning) (works, but differs).
      type: str
    check:
      description: The check's name, as in RV(hosts) C(checks).
      type: str
    device:
      description: The HCA (C(mlx5_1)), or null when the finding is about the host.
      type: str
    port:
      description: The port number, or null.
      type: int
    expected:
      description: What the spec or the group's reference asked for, with where that came from.
      type: raw
      sample: "400 Gb/s (most common rate of the infiniband group)"
    found:
      description: What the facts show.
      type: raw
      sample: DOWN/Polling
    cause:
      description: The likely cause, in the operator's terms.
      type: str
      sample: "no link: cable, transceiver or the switch port is down"
    fix:
      description: What to do, with the commands to look further.
      type: str
      sample: "check the cable and the switch port; `ibstat mlx5_1 1` / `mlxlink -d mlx5_1 -p 1`"
rail_map:
  description:
    - "Host -> rail (a string, C('0')) -> C({device, port, switch, switch_port}): the switch port each compute port
      reaches (its peer's system name and port id); C(switch) and C(switch_port) null for a port with no peer."
  type: dict
  returned: always
  sample: {node01: {"0": {device: mlx5_0, port: 1, switch: leaf-r0, switch_port: swp1}}}
rail_map_basis:
  description:
    - How each rail's switch group was found (C(basis) C(declared), C(inferred) or C(none)), in a line (C(note)),
      and the groups (C(rail_switches), rail -> switches).
  type: dict
  returned: always
  sample: {basis: inferred, note: each switch serves the rail most of its host ports are on, rail_switches: {"0": [leaf-r0]}}
pcie:
  description:
    - "Host -> rail (a string, C('0')) -> C({device, gpu, distance, path, gpu_path}): the rail's RDMA device, its
      nearest GPU and their distance in C(nvidia-smi topo -m) terms (C(PIX), C(PXB), C(PHB), C(NODE), C(SYS)), and
      the hops of the NIC's and the GPU's PCIe paths from their root ports (C(pci), C(type), C(speed), C(width),
      C(max_speed), C(max_width), C(acs_redirect), C(flags): the checks that name the hop). Hosts whose facts were
      read without the PCIe path are left out."
  type: dict
  returned: always
  sample: {node01: {"0": {device: mlx5_0, gpu: "0000:18:00.0", distance: PIX, path: [], gpu_path: []}}}
references:
  description:
    - What the checks compared with where the spec is silent, per group (C(infiniband), C(roce)) - of the compute
      ports C(rate_gbps), C(width), C(mtu) (bytes, every compute netdev), C(rail_mtu) (per rail, as a string),
      C(rails) (number of rails); C(fw_ver) (board_id to version); per rail (as a string) C(gid_index) (roce) or
      C(sm_lid) (infiniband); and, when the group has storage ports, C(storage) (C(ports), C(link_layer),
      C(rate_gbps), C(width), C(mtu) per storage port index). Values the spec gives are reported as given.
  type: dict
  returned: always
  sample:
    roce: {rate_gbps: 400.0, width: 4X, mtu: 9000, rail_mtu: {"0": 9000, "1": 9000}, fw_ver: {MT_0000000838: 28.41.1000},
           rails: 2, gid_index: {"0": 3, "1": 3},
           storage: {ports: 2, link_layer: Ethernet, rate_gbps: 200.0, width: 4X, mtu: {"0": 9000, "1": 9000}}}
summary:
  description: C(hosts) (number checked), C(errors), C(warnings) (numbers of findings) and C(failed_hosts) (names).
  type: dict
  returned: always
  sample: {hosts: 4, errors: 1, warnings: 0, failed_hosts: [node03]}
checks:
  description: The checks run, in order, with what each one verifies.
  type: list
  elements: dict
  returned: always
  sample: [{name: port_state, description: "Every expected HCA and port exists, and is ACTIVE/LinkUp."}]
msg:
  description: One line summing up the verdict.
  type: str
  returned: always
'''

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.rdma_verify import (  # noqa: E402
    CHECKS, summary_message, verify)
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_fabric import VerifyInputError  # noqa: E402

ARGUMENT_SPEC = dict(
    hosts=dict(type="dict", required=True),
    spec=dict(type="dict", default={}, options=dict(
        expected_rate_gbps=dict(type="float"),
        expected_storage_rate_gbps=dict(type="float"),
        min_width=dict(type="str"),
        expected_fw_ver=dict(type="raw"),
        rail_switches=dict(type="raw"),
    )),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = verify(module.params["hosts"], module.params["spec"])
    except VerifyInputError as exc:
        module.fail_json(msg="rdma_verify: %s" % exc, changed=False)
    result["checks"] = [dict(name=c.name, description=c.description) for c in CHECKS]
    module.exit_json(changed=False, msg=summary_message(result), **result)


if __name__ == "__main__":
    main()
