#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

DOCUMENTATION = r"""
---
module: rdma_management_link
short_description: Tell whether the management link of a host rides on an RDMA device (ConnectX port)
version_added: "0.3.0"
description:
  - Reloading the RDMA driver (C(openibd restart), C(modprobe -r mlx5_core)) takes every ConnectX netdev down. On a
    host whose management network runs over a ConnectX port, that cuts the host off. Every task that reloads the
    RDMA driver must run this check first (the C(hpcnet.rdma.ofed) role's C(driver_restart_guard.yml) does).
  - "It finds the management interfaces: the interface holding each connection address (O(addresses)), and the
    interface of each default route: IPv4 from C(<proc_root>/net/route), IPv6 from C(<proc_root>/net/ipv6_route)."
  - It walks each one down through its upper devices (VLAN, bond, team, bridge, macvlan) to the physical netdevs,
    following C(<sysfs_root>/class/net/<if>/lower_*) links, C(brif/) and C(bonding/slaves), and tells whether one of
    them belongs to an RDMA device (in C(class/infiniband/<dev>/device/net/), the netdev of a port's GIDs, or with a
    C(class/net/<netdev>/device/infiniband/) entry). A netdev whose PCI driver (C(device/driver)) is C(mlx5_core) or
    C(mlx4_core) counts too when no RDMA device is registered on it (C(mlx5_ib) not loaded, second port of a RoCE
    LAG), since the driver restart takes it down all the same.
  - The only command run is C(ip -j addr show) (an argv list, C(LC_ALL=C)), and only when there are connection
    addresses to match. Without C(ip), IPv6 addresses are matched from C(<proc_root>/net/if_inet6) and IPv4 ones
    cannot be, with a warning.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  addresses:
    description:
      - The address(es) the controller connects to on this host, IPv4 or IPv6 (an IPv4-mapped IPv6 address counts
        as its IPv4 address; a zone such as C(fe80::1%eth0) names the interface).
      - When not given, the server address (third field) of C(SSH_CONNECTION) in the module's environment, or,
        since C(become) through sudo drops that variable, in the environment of the nearest parent process that
        has it (C(<proc_root>/<pid>/environ), up to the sshd session). None with a local connection outside SSH.
      - An empty list checks the default routes only.
    type: list
    elements: str
  proc_root:
    description:
      - Root of procfs, for tests. C(<proc_root>/net/) is the view of the module process's network namespace.
    type: path
    default: /proc
notes:
  - O(sysfs_root) must exist and contain C(class/), otherwise the module fails naming the path.
  - Read-only; always returns C(changed=false) and runs the same in check mode.
  - IPv4 default routes come from C(/proc/net/route), which shows only the main routing table and, for a multipath
    route, only its first next hop. A default route in another table (a management VRF) is not seen there; the
    connection address still finds the management interface in that case.
  - An interface named by the routes or addresses but missing from C(<sysfs_root>/class/net) (a sysfs tree from
    another network namespace) is reported with no lower device and a warning.
seealso:
  - module: hpcnet.rdma.rdma_facts
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes.read_only
"""

EXAMPLES = r"""
- name: Check that a driver restart does not cut the management link
  hpcnet.rdma.rdma_management_link:
    sysfs_root: "{{ rdma_sysfs_root | default('/sys') }}"
  register: __mgmt

- name: Refuse the restart otherwise
  ansible.builtin.assert:
    that: not __mgmt.on_rdma or (rdma_allow_driver_restart_on_management_link | default(false) | bool)
    fail_msg: "{{ __mgmt.message }}"
    quiet: true

- name: Check the interface holding a known management address (the default routes are checked as well)
  hpcnet.rdma.rdma_management_link:
    addresses: [192.0.2.10]
"""

RETURN = r"""
management_interfaces:
  description:
    - One entry per connection address and interface holding it, then one per default route interface and family
      (IPv4 first), in that order. Empty when the host has neither.
  type: list
  elements: dict
  returned: always
  contains:
    interface:
      description: The management interface, from C(ip -j addr show) (connection) or the C(Iface) column of
        C(/proc/net/route) / the device column of C(/proc/net/ipv6_route) (default route).
      type: str
      sample: bond0
    reason:
      description: C(connection) (it holds a connection address) or C(default_route).
      type: str
      sample: default_route
    address:
      description: The connection address it holds, normalised (IPv4-mapped IPv6 as IPv4). Only for C(connection).
      type: str
      returned: when reason is connection
      sample: 192.0.2.10
    gateway:
      description: Gateway of the default route (from the C(Gateway) / next hop column), or V(null) for a route
        without one. Only for C(default_route).
      type: str
      returned: when reason is default_route
      sample: 192.0.2.1
    family:
      description: C(ipv4) or C(ipv6), of the address or the route.
      type: str
      sample: ipv4
    lower:
      description: Every device under the interface, breadth first, from C(class/net/<if>/lower_*), C(brif/) and
        C(bonding/slaves) (the interface itself not included; empty for a physical netdev).
      type: list
      elements: str
      sample: [enp12s0np0]
    netdev:
      description: The first netdev (physical ones first, then the uppers) in the interface or under it that a
        driver restart takes down, or V(null) when there is none.
      type: str
      sample: enp12s0np0
    rdma_device:
      description: The RDMA device of RV(management_interfaces[].netdev), from sysfs C(class/infiniband/), or V(null).
      type: str
      sample: mlx5_0
    rdma_port:
      description: Its port number (from the GID netdevs, or C(class/net/<netdev>/dev_port) + 1), or V(null).
      type: int
      sample: 1
    driver:
      description: PCI driver of RV(management_interfaces[].netdev), the basename of C(class/net/<netdev>/device/driver),
        or V(null).
      type: str
      sample: mlx5_core
    rdma_netdevs:
      description: All the affected netdevs in or under the interface (a bond over two ConnectX ports has two), each
        with C(netdev), C(rdma_device), C(rdma_port), C(driver).
      type: list
      elements: dict
    via:
      description: The chain from the interface down to RV(management_interfaces[].netdev), both included (just the
        interface when nothing is affected).
      type: list
      elements: str
      sample: [bond0.100, bond0, enp12s0np0]
on_rdma:
  description: True when any management interface rides on an RDMA device (some entry has a
    RV(management_interfaces[].netdev)), that is when a driver restart would cut the management link.
  type: bool
  returned: always
unresolved_addresses:
  description:
    - Connection addresses that are on no interface of this host (behind NAT or a proxy), so the link that carries
      them cannot be checked. The ofed role's guard refuses a driver restart while this is not empty.
  type: list
  elements: str
  returned: always
message:
  description:
    - One sentence naming the interfaces and devices, one clause per affected management interface joined with
      C(; ). When RV(on_rdma), each clause names the interface, the chain under it (V(bond0 (over enp12s0np0\)))
      and the RDMA device and port, and the sentence ends with what to do instead (see the sample).
    - >-
      Otherwise it names the interfaces checked and ends with V(on no RDMA device: a driver restart does not cut
      this host off), or starts with V(found no management interface) when there is none.
  type: str
  returned: always
  sample: >-
    the default route goes through enp12s0np0, the netdev of RDMA device mlx5_0 port 1: a driver restart
    (openibd restart, modprobe -r mlx5_core) would cut this host off; reboot the host instead, or set
    rdma_allow_driver_restart_on_management_link=true if its console does not depend on that link
addresses:
  description: The connection addresses checked (normalised, zones removed).
  type: list
  elements: str
  returned: always
  sample: [192.0.2.10]
address_source:
  description: Where RV(addresses) came from (C(the addresses option), C(SSH_CONNECTION of the module's environment),
    C(SSH_CONNECTION of /proc/<pid>/environ)), or V(null) when there is none.
  type: str
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcnet.rdma.plugins.module_utils.host.management_link import ManagementLinkError, check
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            addresses=dict(type="list", elements="str"),
            proc_root=dict(type="path", default="/proc"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = check(params["sysfs_root"], params["proc_root"], params["addresses"], ModuleRunner(module),
                       pid=os.getppid())
    except (SysfsError, ManagementLinkError) as exc:
        module.fail_json(msg="rdma_management_link: %s" % exc, path=exc.path, changed=False)
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
