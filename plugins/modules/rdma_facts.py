#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

DOCUMENTATION = r"""
---
module: rdma_facts
short_description: Gather RDMA (InfiniBand, RoCE) facts from sysfs
version_added: 0.1.0
description:
  - Reads the RDMA devices (HCAs), their ports, GID tables and netdevs from sysfs under O(sysfs_root) and returns
    them as C(ansible_facts.rdma).
  - Never parses C(lspci), C(ibstat) or shell pipelines. The only commands run are C(ofed_info -s), C(dpkg-query)
    and C(rpm), as argv lists with C(LC_ALL=C), to tell which RDMA user-space stack is installed
    (see O(gather_stack)), and with O(peers) C(lldpcli) and C(iblinkinfo), to name each port's peer. With
    O(pcie), PCI config space is read from sysfs (C(<pci>/config)), as C(lspci) reads it.
  - Values keep the kernel's meaning (C(Documentation/ABI/stable/sysfs-class-infiniband)). A missing attribute,
    or one the kernel refuses with EINVAL (for example C(gid_attrs/ndevs/<i>) on InfiniBand ports and on empty
    GID entries), is reported as V(null) or left out of a list. A malformed value fails the module with a
    message that names the sysfs path and the expected form.
  - A host without RDMA devices (no C(class/infiniband), or an empty one) gets empty facts
    (RV(ansible_facts.rdma.devices) is V({})); it is not an error here.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  gather_counters:
    description:
      - Also return the per-port C(counters/) (IB PMA counters) and C(hw_counters/) (mlx5 hardware counters).
      - Off by default to keep facts small on hosts with 8 HCAs; turn it on for health checks.
    type: bool
    default: false
  gather_all_netdevs:
    description:
      - Also list netdevs that belong to no RDMA device (with RV(ansible_facts.rdma.netdevs.rdma_device) V(null)),
        up to 256 of them, C(lo) excluded. By default only netdevs of RDMA devices are listed.
    type: bool
    default: false
  port_roles:
    description:
      - The collection-wide C(rdma_port_roles), a list of C({role, devices}) entries, later entries winning. C(role)
        is C(compute), C(storage), C(management) or C(unused); C(devices) is a list of selectors (C(all), a PCI
        address or C(bus:dev), an RDMA device name or C(dev:port), a netdev name, a part number, a PSID, or a link
        layer C(InfiniBand)/C(Ethernet)).
      - Ports no entry names take their role from O(fabrics) (see RV(ansible_facts.rdma.ports_by_role)). Bad entries,
        a selector that matches no port, compute ports of two link layers and a management link made compute fail
        the module with a message that names C(rdma_port_roles).
    type: list
    elements: raw
  fabrics:
    description:
      - The host's inventory groups (C(group_names)); C(infiniband) and C(roce) set the default roles and the link
        layer of the compute ports. Other names are ignored.
    type: list
    elements: str
    default: []
  management_netdevs:
    description:
      - Netdevs that carry the management link, which are never C(compute). By default the interfaces of the
        host's default routes (C(/proc/net/route), C(/proc/net/ipv6_route)) and every device under them.
    type: list
    elements: str
  gather_stack:
    description:
      - Detect the RDMA user-space stack (RV(ansible_facts.rdma.stack)). When V(false), no command is run and the
        stack is reported as V(null).
    type: bool
    default: true
  peers:
    description:
      - Also name the other end of every port's cable (RV(ansible_facts.rdma.devices.ports.peer)) and say how
        the peers were read (RV(ansible_facts.rdma.peers)).
      - RoCE, from LLDP as the host's C(lldpd) hears it, one C(lldpcli -f json0 show neighbors details) for all the
        Ethernet RDMA ports (a bond's port takes the peer of its first member that hears one). InfiniBand, from the
        subnet's management view, one C(iblinkinfo -C <dev> -P <port> -D 0 -a) (a partial scan, one hop from the
        port) per port whose physical link is up.
      - C(lldpd) or C(infiniband-diags) missing, C(lldpd) not running, a tool failing give each port V(null) and
        a state and reason in RV(ansible_facts.rdma.peers), never a failure.
      - When V(false) (the default) nothing is run for it and neither key is returned.
    type: bool
    default: false
    version_added: "0.9.0"
  pcie:
    description:
      - Also read the GPUDirect path inside the host from sysfs, without a GPU driver or C(nvidia-smi); every RDMA
        device's PCIe path from its root port (RV(ansible_facts.rdma.devices.pcie_path)), its MaxReadReq, IOMMU
        group and nearest GPU (RV(ansible_facts.rdma.devices.gpu_affinity)), the GPUs
        (RV(ansible_facts.rdma.gpus)) and the IOMMU mode (RV(ansible_facts.rdma.iommu)).
      - Runs no command. Config space beyond its first 64 bytes is readable by root only; without it the ACS bits,
        ATS and MaxReadReq are V(null). A device without a PCI function in sysfs (no C(device) link) gets V(null)
        for each key, never a failure.
      - When V(false) (the default) nothing is read for it and none of these keys is returned.
    type: bool
    default: false
    version_added: "0.9.0"
notes:
  - O(sysfs_root) must exist and contain C(class/), otherwise the module fails naming the path.
  - Read-only; always returns C(changed=false) and runs the same in check mode.
  - The memlock limit is the one of the module's own process (the Ansible connection), which can differ from the
    limit a batch job or a systemd service gets.
seealso:
  - name: Kernel sysfs ABI for InfiniBand
    description: Documentation/ABI/stable/sysfs-class-infiniband in the Linux kernel tree.
    link: https://www.kernel.org/doc/Documentation/ABI/stable/sysfs-class-infiniband
  - name: NCCL environment variables
    description: NCCL_IB_GID_INDEX, NCCL_IB_ROCE_VERSION_NUM and NCCL_IB_ADDR_FAMILY.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes.read_only
  - hpcnet.rdma.attributes.facts
"""

EXAMPLES = r"""
- name: Gather RDMA facts
  hpcnet.rdma.rdma_facts:
    sysfs_root: "{{ rdma_sysfs_root | default('/sys') }}"

- name: List the ACTIVE InfiniBand ports as dev:port (the NCCL_IB_HCA form)
  ansible.builtin.set_fact:
    ib_active_ports: >-
      {%- set found = [] -%}
      {%- for dev, hca in ansible_facts.rdma.devices.items() -%}
      {%- for port, attrs in hca.ports.items() if attrs.state == 'ACTIVE' and attrs.link_layer == 'InfiniBand' -%}
      {%- set _ = found.append(dev ~ ':' ~ port) -%}
      {%- endfor -%}
      {%- endfor -%}
      {{ found | join(',') }}

- name: Show the GID index NCCL must use on the RoCE port of mlx5_0
  ansible.builtin.debug:
    msg: "{{ ansible_facts.rdma.devices.mlx5_0.ports['1'].roce_v2_ipv4_gid_index }}"

- name: Gather with counters for a health check
  hpcnet.rdma.rdma_facts:
    gather_counters: true

- name: Gather with each port's peer (the switch and switch port at the other end of its cable)
  hpcnet.rdma.rdma_facts:
    peers: true

- name: Gather with the PCIe path of every RDMA device, the GPUs and the IOMMU mode
  hpcnet.rdma.rdma_facts:
    pcie: true

- name: Show the switch port of every compute port
  ansible.builtin.debug:
    msg: >-
      {{ ansible_facts.rdma | hpcnet.rdma.rdma_peer_summary }}
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    rdma:
      description: RDMA state of the host read from sysfs.
      returned: always
      type: dict
      contains:
        sysfs_root:
          description: The sysfs root that was read.
          type: str
          returned: always
          sample: /sys
        devices:
          description:
            - RDMA devices (HCAs), keyed by device name from C(<sysfs_root>/class/infiniband/<dev>) (for example
              C(mlx5_0), C(mlx5_bond_0)). Empty when the host has none.
            - Each value holds the keys below.
          type: dict
          returned: always
          contains:
            fw_ver:
              description: Firmware version, from C(class/infiniband/<dev>/fw_ver). V(null) when absent.
              type: str
              sample: 28.41.1000
            node_guid:
              description: Node GUID as the kernel prints it (4 groups of 4 hex digits), from C(node_guid).
              type: str
              sample: b859:9f03:0022:626e
            sys_image_guid:
              description: System image GUID, from C(sys_image_guid).
              type: str
            board_id:
              description: Board (PSID) identifier, from C(board_id).
              type: str
              sample: MT_0000000838
            hca_type:
              description: HCA type, from C(hca_type) (C(MT4129) is ConnectX-7).
              type: str
              sample: MT4129
            node_type:
              description: "Node type name without its number, from C(node_type) (C(1: CA) gives C(CA))."
              type: str
              sample: CA
            part_number:
              description: Part number from the PCI VPD (C(<pci>/vpd), keyword C(PN)); V(null) when unreadable.
              type: str
              sample: MCX75310AAS-NEAT
            pci_address:
              description: PCI address of the function, the basename of the C(device) link's target. V(null) when
                there is no link.
              type: str
              sample: "0000:1a:00.0"
            pcie_path:
              description:
                - Only with O(pcie). The PCIe hops from the root port down to the device's function, root port first
                  (C(devices/pci<domain>:<bus>/...) under O(sysfs_root)). Each hop has C(pci) (its address), C(type)
                  (C(root_port), C(upstream_port), C(downstream_port), C(endpoint)...; V(null) unknown), C(speed) and
                  C(max_speed) (GT/s, from C(current_link_speed) and C(max_link_speed)), C(width) and C(max_width)
                  (lanes), C(acs) (the ACS Control bits by their lspci names, C(SrcValid), C(TransBlk), C(ReqRedir),
                  C(CmpltRedir), C(UpstreamFwd), C(EgressCtrl), C(DirectTrans), each true or false; V({}) no ACS
                  capability; V(null) unreadable) and C(acs_redirect) (ReqRedir or CmpltRedir on; V(null) unknown).
                - V(null) for a device without a PCI function in sysfs.
              type: list
              elements: dict
              returned: when O(pcie=true)
              version_added: "0.9.0"
              sample: [{"pci": "0000:15:01.0", "type": "root_port", "speed": 32.0, "width": 16, "max_speed": 32.0,
                        "max_width": 16, "acs": {"SrcValid": false, "ReqRedir": false}, "acs_redirect": false}]
            max_read_req:
              description: Only with O(pcie). The function's Max_Read_Request_Size in bytes (PCI Express Device
                Control, lspci C(MaxReadReq)); V(null) when the config space cannot be read that far (not root).
              type: int
              returned: when O(pcie=true)
              version_added: "0.9.0"
              sample: 4096
            max_payload:
              description: Only with O(pcie). The function's Max_Payload_Size in bytes (lspci C(MaxPayload)).
              type: int
              returned: when O(pcie=true)
              version_added: "0.9.0"
            ats:
              description: Only with O(pcie). Whether the function's ATS (Address Translation Services) is on.
              type: bool
              returned: when O(pcie=true)
              version_added: "0.9.0"
            iommu_group:
              description: Only with O(pcie). The function's IOMMU group (its C(iommu_group) link), or V(null).
              type: str
              returned: when O(pcie=true)
              version_added: "0.9.0"
              sample: "27"
            iommu_domain:
              description: Only with O(pcie). The group's default domain type, from
                C(kernel/iommu_groups/<n>/type) (C(identity), C(DMA), C(DMA-FQ)...), V(null) when unknown.
              type: str
              returned: when O(pcie=true)
              version_added: "0.9.0"
              sample: identity
            gpu_affinity:
              description:
                - Only with O(pcie). The GPU nearest the device and how far, in C(nvidia-smi topo -m) terms,
                  C(PIX) (under one PCIe switch), C(PXB) (several switches), C(PHB) (the host bridge), C(NODE)
                  (another host bridge on the same NUMA node), C(SYS) (across NUMA nodes).
                - V(null) without a GPU or a PCI function.
              type: dict
              returned: when O(pcie=true)
              version_added: "0.9.0"
              sample: {"gpu": "0000:18:00.0", "distance": "PIX"}
            netdevs:
              description: Netdev names under C(class/infiniband/<dev>/device/net/), sorted.
              type: list
              elements: str
              sample: [ibp26s0]
            ports:
              description:
                - Ports keyed by port number as a string (C("1")), from C(class/infiniband/<dev>/ports/<n>/).
              type: dict
              contains:
                state:
                  description: >-
                    Logical port state name from C(state) (C(4: ACTIVE) gives C(ACTIVE); also C(DOWN),
                    C(INIT), C(ARMED), C(ACTIVE_DEFER)).
                  type: str
                  sample: ACTIVE
                phys_state:
                  description: >-
                    Physical state name from C(phys_state) (C(5: LinkUp) gives C(LinkUp); also
                    C(Polling), C(Disabled), C(Sleep), C(PortConfigurationTraining), C(LinkErrorRecovery),
                    C(Phy Test)).
                  type: str
                  sample: LinkUp
                link_layer:
                  description: C(InfiniBand) or C(Ethernet) (RoCE), from C(link_layer).
                  type: str
                  sample: InfiniBand
                rate_gbps:
                  description: Port rate in Gb/s from C(rate) (C(400 Gb/sec (4X NDR)) gives V(400.0)). An unknown
                    rate string fails the module.
                  type: float
                  sample: 400.0
                width:
                  description: Active link width from C(rate) (C(1X), C(2X), C(4X), C(8X), C(12X)).
                  type: str
                  sample: 4X
                speed:
                  description: Active link speed name from C(rate) (C(SDR), C(DDR), C(QDR), C(FDR10), C(FDR),
                    C(EDR), C(HDR), C(NDR), C(XDR)); V(null) for the old speed-less SDR form C(10 Gb/sec (4X)).
                  type: str
                  sample: NDR
                lid:
                  description: Port LID (integer) from C(lid) (hex in sysfs). V(null) on Ethernet or when absent.
                  type: int
                  sample: 26
                sm_lid:
                  description: LID of the subnet manager (SM) from C(sm_lid). V(null) on Ethernet or when absent.
                  type: int
                  sample: 1
                netdev:
                  description:
                    - Netdev of the port. RoCE, the netdev of the lowest GID entry that has one
                      (C(gid_attrs/ndevs/<i>); a bond master for C(mlx5_bond_*)). IPoIB, or a RoCE port without
                      GID netdevs, the netdev under C(device/net/) whose C(dev_port) + 1 equals the port (as
                      C(ibdev2netdev) does), preferring a parent over IPoIB child interfaces. Else V(null).
                  type: str
                  sample: ibp26s0
                gids:
                  description:
                    - Non-zero GID table entries, by index, from C(gids/<i>), C(gid_attrs/types/<i>) and
                      C(gid_attrs/ndevs/<i>). All-zero (empty) entries are skipped. A malformed GID fails the
                      module.
                  type: list
                  elements: dict
                  contains:
                    index:
                      description: GID index.
                      type: int
                    gid:
                      description: GID in the kernel's full 8-group form, lower case.
                      type: str
                      sample: "0000:0000:0000:0000:0000:ffff:0a00:000b"
                    type:
                      description: C(IB/RoCE v1) or C(RoCE v2), from C(gid_attrs/types/<i>); V(null) when the kernel
                        refuses the read.
                      type: str
                    netdev:
                      description: Netdev of the entry from C(gid_attrs/ndevs/<i>); V(null) on InfiniBand.
                      type: str
                    ipv4:
                      description: Dotted IPv4 address of an IPv4-mapped GID (C(::ffff:a.b.c.d)), else V(null).
                      type: str
                      sample: 10.0.0.11
                roce_v2_ipv4_gid_index:
                  description:
                    - The value C(NCCL_IB_GID_INDEX) must take on this port, the lowest GID index whose type is
                      C(RoCE v2) and whose GID is IPv4-mapped. NCCL 2.21 and later select the same index by
                      themselves with their defaults (C(NCCL_IB_ROCE_VERSION_NUM=2), C(NCCL_IB_ADDR_FAMILY=AF_INET));
                      writing it pins that choice for older NCCL and for perftest C(-x).
                    - V(null) on InfiniBand, and on a RoCE port with no IPv4 RoCE v2 entry (where NCCL would fall
                      back to RoCE v1 or index 0).
                  type: int
                  sample: 3
                pkeys:
                  description: Non-zero P_Keys from C(pkeys/<i>) in table order, as 4-digit hex strings.
                  type: list
                  elements: str
                  sample: ["0xffff"]
                pkey_indexes:
                  description:
                    - The index in the port's P_Key table (C(pkeys/<i>)) of each P_Key in C(pkeys) (its first index
                      when listed twice). C(NCCL_IB_PKEY) is such an index. The positions in C(pkeys) are not
                      indexes once the table has an empty (C(0x0000)) slot before the entry.
                  type: dict
                  sample: {"0xffff": 0, "0x8002": 1}
                port_guid:
                  description: Port GUID of an InfiniBand port, the low 64 bits of its GID 0 (C(gids/0)), as
                    C(0x) and 16 hex digits (what C(ibstat -p) lists and opensm's C(guid) option takes). V(null) on
                    Ethernet and without a GID 0.
                  type: str
                  sample: "0x0c42a10300aa0101"
                traffic_class:
                  description: Traffic class (IPv6 traffic class / ToS byte, 0-255) the RDMA stack sets on this port,
                    from MLNX_OFED's C(class/infiniband/<dev>/tc/<n>/traffic_class) (C(Global tclass=160)).
                    V(null) when the file is absent (inbox drivers) or holds no C(tclass=).
                  type: int
                  sample: 160
                rdma_cm:
                  description: RDMA-CM defaults from configfs C(kernel/config/rdma_cm/<dev>/ports/<n>/), or V(null)
                    when that directory does not exist (configfs not mounted or never set).
                  type: dict
                  contains:
                    default_roce_mode:
                      description: C(IB/RoCE v1) or C(RoCE v2), from C(default_roce_mode).
                      type: str
                    default_roce_tos:
                      description: ToS byte (0-255, DSCP << 2) of RDMA-CM connections, from C(default_roce_tos).
                      type: int
                role:
                  description:
                    - The port's role, C(compute), C(storage), C(management) or C(unused), from O(port_roles) or the
                      default of O(fabrics). Every role of the collection reads it (NCCL_IB_HCA lists the compute
                      ports; the RoCE profile, the InfiniBand configuration and verify's expectations go by it).
                  type: str
                  sample: compute
                rail:
                  description: The port's rail, its position among the host's compute ports in PCI order (0 ..
                    n-1); V(null) for other roles.
                  type: int
                  sample: 0
                counters:
                  description: IB PMA port counters (C(counters/<name>)) as integers, only with O(gather_counters).
                    C(port_xmit_data) and C(port_rcv_data) count 4-byte words.
                  type: dict
                  returned: when O(gather_counters=true)
                hw_counters:
                  description: Driver hardware counters (C(hw_counters/<name>)) as integers, only with
                    O(gather_counters).
                  type: dict
                  returned: when O(gather_counters=true)
                peer:
                  description:
                    - The other end of the port's cable, only with O(peers); V(null) when nothing answers (no LLDP
                      neighbour heard on the port's netdev, an InfiniBand port with no physical link, a tool missing
                      or failing; RV(ansible_facts.rdma.peers) says which).
                    - RoCE (LLDP) C(system_name), C(system_description), C(chassis_id), C(port_id),
                      C(port_description), C(mgmt_address) (the switch's first management address), C(mfs) (the
                      802.3 Maximum Frame Size TLV, V(null) when not sent) and C(dcbx), the switch's IEEE 802.1Qaz
                      TLVs decoded (V(null) when it sends none), with C(pfc) (C(willing), C(mbc), C(cap), C(enabled)
                      priorities), C(app) (C(selector), C(selector_name), C(protocol), C(priority) per entry),
                      C(ets) (C(willing), C(cbs), C(max_tcs), C(prio_tc), C(tc_bw), C(tc_tsa) and the
                      recommendation's C(reco_prio_tc), C(reco_tc_bw), C(reco_tc_tsa)) and C(problems) (malformed
                      TLVs).
                    - InfiniBand (iblinkinfo) C(system_name) (the switch's node description), C(guid) (its node
                      GUID), C(port_id) (the switch port, an integer), C(lid), C(node_type) (C(Switch), C(CA) for
                      back-to-back HCAs), C(width) and C(speed) of the switch port and C(hca_width), C(hca_speed) of
                      this port as iblinkinfo prints them (C(4X), C(53.125 Gbps)), C(could_be) (iblinkinfo's note
                      when both ends support more).
                  type: dict
                  returned: when O(peers=true)
                  version_added: "0.9.0"
                  sample: {"system_name": "leaf01", "port_id": "swp1", "port_description": "swp1",
                           "chassis_id": "2e:c5:f2:84:b1:24", "mgmt_address": "10.0.0.1", "mfs": 9216,
                           "system_description": "Cumulus Linux version 5.9.0 running on Nvidia SN5600",
                           "dcbx": {"pfc": {"willing": false, "mbc": false, "cap": 8, "enabled": [3]},
                                    "app": [{"selector": 3, "selector_name": "udp_dccp", "protocol": 4791,
                                             "priority": 3}], "ets": null, "problems": []}}
        netdevs:
          description:
            - Netdevs that belong to an RDMA device (in some C(device/net/), a port's netdev or a GID's netdev),
              keyed by name, with fields from C(class/net/<if>/). With O(gather_all_netdevs), all others too.
          type: dict
          returned: always
          contains:
            mtu:
              description: MTU in bytes, from C(mtu).
              type: int
              sample: 4092
            operstate:
              description: C(up), C(down), C(lowerlayerdown), C(unknown)... from C(operstate).
              type: str
            carrier:
              description: Carrier from C(carrier); V(null) when the kernel refuses the read (interface down).
              type: bool
            speed_mbps:
              description: Link speed in Mb/s from C(speed); V(null) when unknown (C(-1)) or unreadable.
              type: int
              sample: 400000
            address:
              description: Hardware address from C(address) (20 bytes for IPoIB, 6 for Ethernet).
              type: str
            rdma_device:
              description: RDMA device the netdev belongs to, or V(null).
              type: str
            rdma_port:
              description: Port number (integer) on that device, or V(null) when it cannot be told.
              type: int
            ecn:
              description:
                - MLNX_OFED ECN (DCQCN) state from C(class/net/<if>/ecn/), or V(null) when the directory is absent
                  (inbox drivers).
                - C(roce_np_enabled) and C(roce_rp_enabled) list the priorities (0-7) whose
                  C(roce_np/enable/<prio>) (notification point, sends CNPs) or C(roce_rp/enable/<prio>) (reaction
                  point) read 1; C(cnp_dscp) (DSCP 0-63) and C(cnp_802p_prio) (0-7) come from C(roce_np/).
              type: dict
        ports_by_role:
          description:
            - The host's ports (C(dev:port)) per role; C(compute) in rail order, the others in PCI order.
            - Default roles on a host in one of the groups C(infiniband), C(roce) (O(fabrics)) are that group's link
              layer C(compute); a port of the other link layer C(storage) when it is ACTIVE and carries an address
              (a GID of an IP address; any ACTIVE InfiniBand port), C(unused) otherwise (only O(port_roles) makes it
              C(compute), a link-type change); on a host in both groups InfiniBand C(compute) and Ethernet
              C(storage); the management link's port C(management).
            - C(compute_link_layer) is the link layer of the compute ports once the roles have turned them (V(null)
              without compute ports); C(link_type_changes) the compute ports of the other link layer.
          type: dict
          returned: always
          sample: {"compute": ["ibp24s0:1", "ibp64s0:1"], "storage": ["rocep170s0f0:1"], "management": [],
                   "unused": [], "compute_link_layer": "InfiniBand", "link_type_changes": []}
        peers:
          description:
            - How the ports' peers were read, only with O(peers). C(lldp) (RoCE) and C(infiniband) each give
              C(state) and C(reason) (a sentence, V(null) when C(ok)); C(problems) lists what was read but is
              doubtful (a second LLDP neighbour on a port, a malformed 802.1Qaz TLV, iblinkinfo failing on one port).
            - C(lldp.state) is C(ok), C(lldpd_not_installed), C(lldpd_not_running), C(lldpcli_failed), or C(no_ports)
              (no Ethernet RDMA port with a netdev, nothing run). C(infiniband.state) is C(ok),
              C(infiniband_diags_not_installed), C(iblinkinfo_failed) (on every port), or C(no_ports) (no
              InfiniBand port with a physical link, nothing run).
          type: dict
          returned: when O(peers=true)
          version_added: "0.9.0"
          sample: {"lldp": {"state": "ok", "reason": null},
                   "infiniband": {"state": "no_ports",
                                  "reason": "no InfiniBand port with a physical link: iblinkinfo is not run"},
                   "problems": []}
        gpus:
          description:
            - Only with O(pcie). The GPUs (PCI vendor 0x10de, display or 3D class) in PCI order, with C(pci),
              C(numa_node) (-1 none), C(device_id) (sysfs C(device), C(0x2330) an H100 SXM), C(pcie_path).
          type: list
          elements: dict
          returned: when O(pcie=true)
          version_added: "0.9.0"
          sample: [{"pci": "0000:18:00.0", "numa_node": 0, "device_id": "0x2330", "pcie_path": []}]
        iommu:
          description:
            - Only with O(pcie). C(mode) of the host's IOMMU from C(kernel/iommu_groups/), C(off) (no group),
              C(translated) (a group with a C(DMA) or C(DMA-FQ) default domain), C(passthrough) (C(identity)
              domains, C(iommu=pt)); V(null) when the kernel does not say (before 5.11).
          type: dict
          returned: when O(pcie=true)
          version_added: "0.9.0"
          sample: {"mode": "passthrough"}
        kernel_modules:
          description: Whether each RDMA kernel module is loaded (C(<sysfs_root>/module/<name>) exists), for
            C(mlx5_core), C(mlx5_ib), C(ib_core), C(ib_uverbs), C(ib_umad), C(ib_ipoib), C(rdma_cm), C(rdma_ucm),
            C(nvidia_peermem).
          type: dict
          returned: always
          sample: {"mlx5_core": true, "nvidia_peermem": false}
        memlock:
          description: RLIMIT_MEMLOCK of the module process, C(soft) and C(hard), each in bytes or C(unlimited).
          type: dict
          returned: always
          sample: {"soft": "unlimited", "hard": "unlimited"}
        stack:
          description:
            - RDMA user-space stack. C(provider) is C(doca) (C(ofed_info -s) prints C(OFED-internal-<version>:)),
              C(mlnx_ofed) (C(MLNX_OFED_LINUX-<version>:)), C(inbox) (the distribution's C(rdma-core) package or
              C(libibverbs.so.1)) or C(none). C(version) is the version string, or V(null) for C(none) and when
              only the library was found. C(ofed_info) is the raw line C(ofed_info -s) printed, or V(null).
            - V(null) when O(gather_stack=false).
          type: dict
          returned: always
          sample: {"provider": "doca", "version": "24.07-0.3.5.0.110", "ofed_info": "OFED-internal-24.07-0.3.5.0.110:"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import peers as fabric_peers
from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import facts as pcie_facts
from ansible_collections.hpcnet.rdma.plugins.module_utils.stack.rdma_stack import memlock_limits, probe_stack
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import facts
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import PortRoleError
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            gather_counters=dict(type="bool", default=False),
            gather_all_netdevs=dict(type="bool", default=False),
            gather_stack=dict(type="bool", default=True),
            port_roles=dict(type="list", elements="raw"),
            fabrics=dict(type="list", elements="str", default=[]),
            management_netdevs=dict(type="list", elements="str"),
            peers=dict(type="bool", default=False),
            pcie=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        rdma = facts.read(params["sysfs_root"], params["port_roles"], params["fabrics"], params["management_netdevs"],
                          gather_counters=params["gather_counters"], gather_all_netdevs=params["gather_all_netdevs"])
    except SysfsError as exc:
        module.fail_json(msg="rdma_facts: %s" % exc, path=exc.path, changed=False)
    except PortRoleError as exc:
        module.fail_json(msg="rdma_facts: %s" % exc, changed=False)
    runner = ModuleRunner(module)
    rdma["memlock"] = memlock_limits()
    rdma["stack"] = probe_stack(runner) if params["gather_stack"] else None
    if params["peers"]:
        fabric_peers.attach(rdma, runner)
    if params["pcie"]:
        pcie_facts.attach(rdma)
    module.exit_json(changed=False, ansible_facts={"rdma": rdma})


if __name__ == "__main__":
    main()
