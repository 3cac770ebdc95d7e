#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: rdma_health
short_description: Write a host's expected RDMA state and install the health check that compares the host with it
version_added: "0.9.0"
description:
  - Reads the host's RDMA ports as M(hpcnet.rdma.rdma_facts) does (roles and rails included) and writes the expected
    state to O(expected_path) (JSON) - every compute and storage port pinned to its role by PCI function, with its link
    layer, MTU and GID index; the spec the checks compare with; the declared RoCE QoS, the lossless
    priorities, the SM, P_Key and IPoIB expectations, the C(nccl.conf) content, memlock, GPUDirect RDMA and the
    thresholds.
  - The expected state comes from what is declared and from the fabric, never from what the host has on a bad day -
    rate and width per role from O(expected_rate_gbps) / O(expected_storage_rate_gbps), else O(fabric_reference)
    (the most common value among the group's hosts); P_Keys from O(pkeys); IPoIB netdevs from O(ipoib); MTUs from
    O(netdev_mtu), O(mtu) / O(storage_mtu), else O(fabric_reference). A port DOWN at install stays expected ACTIVE. A
    host that differs at install fails the one check run here (RV(health)) with a warning; its state is not taken as
    the expected one.
  - Installs C(<prefix>/sbin/hpcnet-rdma-health), which needs no Ansible at run time - Python's standard library and
    the collection's module_utils it imports, written to C(<prefix>/lib/hpcnet-rdma) from this module's own code, so
    the program runs the same checks as M(hpcnet.rdma.rdma_verify).
  - With the metrics on (O(metrics)), the program writes them for node_exporter's textfile collector when the systemd
    timer the health role writes runs it (every C(health_interval) seconds, in O(thresholds)); with them off, this
    module removes that timer and its service.
  - Runs one check in its own process against the new expected state and returns it in RV(health) (counter rates
    start with the program's first run).
author:
  - hpcnet.rdma contributors (@hpcnet)
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes
options:
  host:
    description: The host's inventory name (findings carry it).
    type: str
    required: true
  group:
    description: The host's fabric group.
    type: str
    required: true
    choices: [infiniband, roce]
  fabrics:
    description: The host's fabric groups (C(group_names)); the default port roles follow them.
    type: list
    elements: str
    default: []
  port_roles:
    description: The collection's C(rdma_port_roles) entries.
    type: list
    elements: raw
  management_netdevs:
    description: The management link's netdevs; the netdevs of the default routes when omitted.
    type: list
    elements: str
  expected_rate_gbps:
    description: The compute ports' rate; the fabric's (O(fabric_reference)) when omitted.
    type: float
  expected_storage_rate_gbps:
    description: The storage ports' rate; the fabric's (O(fabric_reference)) when omitted.
    type: float
  fabric_reference:
    description:
      - What the hosts of this host's fabric group have in common, as the P(hpcnet.rdma.health_fabric_reference#filter)
        filter computes it from their RDMA facts (verify's rule, the most common value of the role in the group) -
        C(rate_gbps) and C(width) by role (C(compute), C(storage)), C(mtu) by netdev of this host.
      - When omitted, the same rule over this host's ports alone.
    type: dict
  mtu:
    description: The compute netdevs' MTU (every one); each netdev's own (O(netdev_mtu), else the fabric's) when omitted.
    type: int
  storage_mtu:
    description: The storage netdevs' MTU (every one); each netdev's own (O(netdev_mtu), else the fabric's) when omitted.
    type: int
  netdev_mtu:
    description:
      - "The declared MTU of netdevs, C({netdev: bytes}) - the roce role's C(roce_declared_mtu) (C(roce_mtu) on the
        compute netdevs), the infiniband role's IPoIB netdevs (C(infiniband_declared.ipoib)). Other netdevs of the
        checked ports get the fabric's."
    type: dict
    default: {}
  pkeys:
    description:
      - "The P_Keys each InfiniBand port must hold, C({port GUID or device:port: [P_Key]}) - the infiniband role's
        C(infiniband_declared.pkeys) (what the SM gives each port from C(infiniband_partitions)). No P_Key is checked
        on a port it does not name."
    type: dict
    default: {}
  memlock:
    description:
      - The locked-memory limit the check expects of its own process (C(unlimited) or bytes), or C(unchecked) to leave
        the memlock check out.
    type: raw
    default: unlimited
  gdr:
    description: Whether GPUDirect RDMA (nvidia_peermem) is expected; C(auto) where the NVIDIA GPU driver is loaded.
    type: str
    choices: ["true", "false", auto]
    default: auto
  ipoib:
    description: The IPoIB netdevs expected up (the infiniband role's, C(infiniband_declared.ipoib)); none when omitted.
    type: list
    elements: str
  sm:
    description: Whether an InfiniBand host expects a master SM on each ACTIVE compute port (sminfo).
    type: bool
    default: false
  roce_qos:
    description: "The declared RoCE QoS, C({netdev: hpcnet.rdma.roce_qos parameters}) (the roce role's C(roce_declared_qos))."
    type: dict
    default: {}
  lossless_priorities:
    description: The priorities the RoCE profile makes lossless (PFC).
    type: list
    elements: int
    default: []
  nccl_conf_path:
    description: NCCL's configuration file whose content the check keeps; none when omitted.
    type: path
  thresholds:
    description:
      - The health role's C(health_*) thresholds and interval, by their variable names (see the role's argument spec for
        units and ranges). Checked here again, with the variable named in the message.
    type: dict
    default: {}
  slurm:
    description: Whether Slurm runs the check (C(HealthCheckProgram)); slurmd must be installed.
    type: bool
    default: false
  textfile_dir:
    description: node_exporter's textfile directory; no metrics when omitted.
    type: path
  metrics:
    description:
      - Write the metrics to O(textfile_dir) from a systemd timer. C(auto) where the directory exists (node_exporter
        is installed); C(true) requires it; C(false) writes none.
    type: str
    choices: ["true", "false", auto]
    default: auto
  timer:
    description:
      - The metrics timer is wanted (the health role writes its service and timer from its templates where the metrics
        are on). With V(false), or with the metrics off, the units an earlier run left in O(unit_dir) are removed and
        the timer is stopped.
    type: bool
    default: true
  expected_path:
    description: Where the expected state is written.
    type: path
    default: /etc/hpcnet/health.json
  prefix:
    description: Where the program (C(sbin/)) and its Python files (C(lib/hpcnet-rdma)) go.
    type: path
    default: /usr/local
  unit_dir:
    description: Where the metrics' systemd units are (the health role writes them there).
    type: path
    default: /etc/systemd/system
  validate_only:
    description: Only check what the host can tell about the inputs (textfile directory, slurmd); change nothing.
    type: bool
    default: false
notes:
  - A second run with the same inputs and the same host changes nothing.
'''

EXAMPLES = r'''
- name: Write the expected state and install the health check
  hpcnet.rdma.rdma_health:
    host: "{{ inventory_hostname }}"
    group: roce
    fabrics: "{{ group_names }}"
    roce_qos: "{{ roce_declared_qos }}"
    lossless_priorities: [3]
    nccl_conf_path: /etc/nccl.conf
    textfile_dir: /var/lib/prometheus/node-exporter
    thresholds:
      health_pfc_pause_percent_max: 10
'''

RETURN = r'''
expected:
  description: The expected state as written (null with O(validate_only)).
  type: dict
  returned: always
files:
  description: The files written (or, in check mode, that would be).
  type: list
  elements: str
  returned: always
health:
  description:
    - One check against the new expected state - C(ok), C(reason) (the first line of the program's output), C(findings).
    - A host that differs from the declared and the fabric's state at install fails it, with a warning.
  type: dict
  returned: always
'''

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.hpcnet.rdma.plugins.module_utils.health.deploy import DeployError, deploy  # noqa: E402
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner  # noqa: E402

ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    group=dict(type="str", required=True, choices=["infiniband", "roce"]),
    fabrics=dict(type="list", elements="str", default=[]),
    port_roles=dict(type="list", elements="raw"),
    management_netdevs=dict(type="list", elements="str"),
    sysfs_root=dict(type="path", default="/sys"),
    expected_rate_gbps=dict(type="float"),
    expected_storage_rate_gbps=dict(type="float"),
    fabric_reference=dict(type="dict"),
    mtu=dict(type="int"),
    storage_mtu=dict(type="int"),
    netdev_mtu=dict(type="dict", default={}),
    pkeys=dict(type="dict", default={}, no_log=False),  # P_Keys: InfiniBand partition keys, no secret
    memlock=dict(type="raw", default="unlimited"),
    gdr=dict(type="str", choices=["true", "false", "auto"], default="auto"),
    ipoib=dict(type="list", elements="str"),
    sm=dict(type="bool", default=False),
    roce_qos=dict(type="dict", default={}),
    lossless_priorities=dict(type="list", elements="int", default=[]),
    nccl_conf_path=dict(type="path"),
    thresholds=dict(type="dict", default={}),
    slurm=dict(type="bool", default=False),
    textfile_dir=dict(type="path"),
    metrics=dict(type="str", choices=["true", "false", "auto"], default="auto"),
    timer=dict(type="bool", default=True),
    expected_path=dict(type="path", default="/etc/hpcnet/health.json"),
    prefix=dict(type="path", default="/usr/local"),
    unit_dir=dict(type="path", default="/etc/systemd/system"),
    validate_only=dict(type="bool", default=False),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = deploy(module.params, ModuleRunner(module), module.check_mode)
    except DeployError as exc:
        module.fail_json(msg="rdma_health: %s" % exc, changed=False)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
