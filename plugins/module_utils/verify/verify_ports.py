# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The port and link checks of ``rdma_verify``: each compares a host's expected ports with the spec or the group.

Pure Python (no Ansible imports). Each check is ``check(fabric, host) -> Outcome`` (``verify_fabric``); ``CHECKS`` in
``rdma_verify`` lists them in report order. The compute ports (the rails) and the storage ports are checked, each
against the references of its own role:
- ``check_port_state``: every expected HCA and port exists and is ACTIVE/LinkUp (the cause and fix by port state);
- ``check_link_layer``, ``check_rate``, ``check_width``, ``check_mtu``: the link runs the group's link layer (compute;
  storage: the group's storage ports' most common, a warning), rate, lanes (declared, or the most common of the
  role in the group) and MTU (declared, or the most common of the same rail or storage index in the group);
- ``check_firmware``: each HCA runs the declared firmware, or its board's most common in the group;
- ``check_gid_index`` (compute): RoCE ports have a RoCE v2 IPv4 GID, at the same index on every host of the rail;
- ``check_subnet_manager`` and ``fabric_subnet_manager`` (compute): InfiniBand ports see the rail's master SM; a rail
  where no port sees one is one fabric finding.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import card_port, natural_key
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_fabric import (
    FABRIC, SKIP, Outcome, board_of, finding, width_lanes)


_PORT_STATE_TEXT = {
    "Polling": ("no link: cable, transceiver or the switch port is down",
                "check the cable and the switch port; `ibstat {hca} {port}` / `mlxlink -d {hca} -p {port}`"),
    "Disabled": ("the port is disabled (by `ibportstate`, the SM, or the switch side)",
                 "enable the port (on the switch, or `ibportstate` from a host that sees the subnet); "
                 "`ibstat {hca} {port}` / `mlxlink -d {hca} -p {port}`"),
    "Disabled-Ethernet": ("the port is disabled: its netdev {netdev} is administratively down",
                          "`ip link set {netdev} up` and make it persistent in the host's network configuration"),
    "PortConfigurationTraining": ("the link is still training: a marginal cable or transceiver, or speeds that do "
                                  "not match on the two ends",
                                  "`mlxlink -d {hca} -p {port} -m -c` (cable, BER, speed); reseat or replace the "
                                  "cable; check the switch port's speed"),
    "LinkErrorRecovery": ("the link is recovering from errors: a marginal cable, transceiver or dirty connector",
                          "`mlxlink -d {hca} -p {port} -m -c` (BER, cable); clean, reseat or replace the cable"),
    "Sleep": ("the port is asleep (powered down)",
              "enable the port on the switch; `mlxlink -d {hca} -p {port}`"),
    "Phy Test": ("the port is in a physical test mode",
                 "take the port out of test mode (`mlxlink -d {hca} -p {port}`) or reset the HCA"),
    "INIT": ("no subnet manager has brought the port up",
             "start opensm on a host of this subnet (hpcnet.rdma.infiniband infiniband_sm), or check the SM's "
             "partition config; `sminfo -C {hca} -P {port}`"),
    "INIT-Ethernet": ("the link is up but the RDMA port is not active",
                      "`rdma link show {hca}/{port}`; reload the driver (`modprobe -r mlx5_ib && modprobe mlx5_ib`)"),
    "ARMED": ("the subnet manager configured the port but has not activated it (a sweep in progress, or the SM "
              "stopped half-way)",
              "wait for the next SM sweep, then check the SM's log (opensm.log); `sminfo -C {hca} -P {port}`"),
    "ACTIVE_DEFER": ("the port is recovering (ACTIVE_DEFER): a transient link problem",
                     "re-run the check; if it persists, `mlxlink -d {hca} -p {port} -m -c`"),
    "DOWN": ("the physical link is up but the logical port is down",
             "`ibstat {hca} {port}`; reset the port from the switch or reload the driver"),
}


def _state_text(ref, netdev):
    phys, state = ref.get("phys_state"), ref.get("state")
    eth = ref.get("link_layer") == "Ethernet"
    if phys != "LinkUp":
        key = phys if phys in _PORT_STATE_TEXT else "Polling"
        if phys == "Disabled" and eth and netdev:
            key = "Disabled-Ethernet"
    else:
        key = state if state in _PORT_STATE_TEXT else "DOWN"
        if state == "INIT" and eth:
            key = "INIT-Ethernet"
    cause, fix = _PORT_STATE_TEXT[key]
    values = {"hca": ref.device, "port": ref.port, "netdev": netdev}
    return cause.format(**values), fix.format(**values)


def check_port_state(fabric, host):
    """Every expected HCA and port exists, and is ACTIVE/LinkUp."""
    h = fabric.hosts[host]
    refs = fabric.ports[host]
    if not refs:
        return Outcome([finding(
            host, "error", "port_state", None, None, "an %s port" % h["link_layer"], "no %s port" % h["link_layer"],
            "the host has no compute port of its group's link layer: the HCAs are missing, their driver is not "
            "loaded, the ports run the other link layer, or rdma_port_roles gives them another role",
            "`rdma link` and `lspci -d 15b3:`; load mlx5_ib, or set the card's LINK_TYPE (hpcnet.rdma.firmware), or "
            "move the host to the right group, or give its rails the role compute (rdma_port_roles)")])
    out = []
    for ref in fabric.all_ports[host]:
        if ref.dev is None:
            out.append(finding(host, "error", "port_state", ref.device, ref.port, "HCA %s present" % ref.device,
                               "absent", "the HCA is not an RDMA device on this host: the card is missing or "
                               "unseated, its driver (mlx5_core/mlx5_ib) is not loaded, or it has another name",
                               "`rdma link`, `lspci -d 15b3:` and `dmesg | grep -i mlx5`; fix the expected HCA list "
                               "(verify_hcas) if the name changed"))
        elif not ref.present:
            out.append(finding(host, "error", "port_state", ref.device, ref.port, "port %s" % ref.port, "absent",
                               "the HCA has no port %s" % ref.port,
                               "`rdma link show %s`; fix the expected HCA list (verify_hcas)" % ref.device))
        elif not ref.active:
            cause, fix = _state_text(ref, ref.get("netdev"))
            out.append(finding(host, "error", "port_state", ref.device, ref.port, "ACTIVE/LinkUp",
                               "%s/%s" % (ref.get("state"), ref.get("phys_state")), cause, fix))
    return Outcome(out)


def check_link_layer(fabric, host):
    """Every compute port runs the group's link layer (InfiniBand for infiniband, Ethernet for roce); a storage port
    the most common link layer of the group's storage ports (a warning)."""
    h = fabric.hosts[host]
    refs = [r for r in fabric.all_ports[host] if r.present]
    if not refs:
        return SKIP
    out = []
    for ref in refs:
        found = ref.get("link_layer")
        if ref.role != "compute":
            usual = fabric.reference("link_layer", h["group"], ref.role)
            if usual is not None and found != usual:
                out.append(finding(
                    host, "warning", "link_layer", ref.device, ref.port,
                    "%s (most common link layer of the %s ports of the %s group)" % (usual, ref.role, h["group"]),
                    found, "this %s port runs another link layer than the %s ports of the other hosts: another card, "
                    "or a card whose LINK_TYPE differs" % (ref.role, ref.role),
                    "check the card's LINK_TYPE (`mlxconfig -d %s q LINK_TYPE_P%d`) and rdma_port_roles"
                    % (ref.dev.get("pci_address") or ref.device, card_port(ref.dev.get("pci_address"), 1))))
            continue
        if found == h["link_layer"]:
            continue
        wanted = "IB" if h["link_layer"] == "InfiniBand" else "ETH"
        other = "roce" if h["group"] == "infiniband" else "infiniband"
        n = card_port(ref.dev.get("pci_address"), 1)
        out.append(finding(
            host, "error", "link_layer", ref.device, ref.port, h["link_layer"], found,
            "the port runs %s but the host is in the %s group: the card's LINK_TYPE is not %s, or the host is in "
            "the wrong group" % (found, h["group"], wanted),
            "set LINK_TYPE_P%d=%s (hpcnet.rdma.firmware, or `mlxconfig -d %s set LINK_TYPE_P%d=%s`) and reboot, or "
            "move the host to the %s group" % (n, wanted, ref.dev.get("pci_address") or ref.device, n, wanted, other)))
    return Outcome(out)


def _rate_expected(fabric, group, role):
    """(expected rate, where it comes from, the variable that declares it) of the ports of ``role``."""
    variable = "verify_expected_rate_gbps" if role == "compute" else "verify_expected_storage_rate_gbps"
    declared = fabric.spec["expected_rate_gbps" if role == "compute" else "expected_storage_rate_gbps"]
    if declared is not None:
        # a caller that took the rate from elsewhere (the health check: the fabric's rate at install) says so
        return declared, fabric.spec["rate_sources"].get(role) or "spec (%s)" % variable, variable
    return (fabric.reference("rate_gbps", group, role), "most common rate of the %s group" % group
            if role == "compute" else "most common rate of the %s ports of the %s group" % (role, group), variable)


def check_rate(fabric, host):
    """Every ACTIVE port runs at spec.expected_rate_gbps (storage ports: spec.expected_storage_rate_gbps), or at the
    most common rate of the ports of its role in the group."""
    h = fabric.hosts[host]
    refs = [r for r in fabric.all_ports[host] if r.active and r.get("rate_gbps") is not None]
    ran = False
    out = []
    for ref in refs:
        rate = ref.get("rate_gbps")
        expected, source, variable = _rate_expected(fabric, h["group"], ref.role)
        if expected is None:
            continue
        ran = True
        if rate < expected:
            out.append(finding(
                host, "error", "rate", ref.device, ref.port, "%g Gb/s (%s)" % (expected, source), "%g Gb/s" % rate,
                "the link trained below the expected rate: a cable or transceiver of a lower class, a switch port set "
                "to a lower speed, or link errors that forced a lower speed",
                "`mlxlink -d %s -p %s` (speed, cable type, errors); check the switch port's speed; use a cable rated "
                "for %g Gb/s" % (ref.device, ref.port, expected)))
        elif rate > expected:
            out.append(finding(
                host, "warning", "rate", ref.device, ref.port, "%g Gb/s (%s)" % (expected, source), "%g Gb/s" % rate,
                "the port runs faster than the %s: another card or fabric than the rest of the group; its peers "
                "limit it to their rate" % source,
                "if %g Gb/s is right for the whole group, set %s; otherwise check that this "
                "host belongs to the %s group%s" % (rate, variable, h["group"], "" if ref.role == "compute" else
                                                    " and that the port's role is right (rdma_port_roles)")))
    return Outcome(out) if ran else SKIP


def _width_expected(fabric, group, role):
    """(lanes, where they come from) of the ports of ``role``: spec.min_width is the compute ports',
    spec.min_storage_width the storage ports'."""
    key = "min_width" if role == "compute" else "min_storage_width"
    declared = fabric.spec.get(key)
    if declared:
        return width_lanes(declared), "spec %s" % key
    if role == "compute":
        return fabric.reference("width", group, role), "most common width of the %s group" % group
    return fabric.reference("width", group, role), "most common width of the %s ports of the %s group" % (role, group)


def check_width(fabric, host):
    """Every ACTIVE compute port has at least spec.min_width lanes (default: the most common width of the group's
    compute ports); a storage port the most common width of the group's storage ports."""
    h = fabric.hosts[host]
    refs = [r for r in fabric.all_ports[host] if r.active and width_lanes(r.get("width"))]
    ran = False
    out = []
    for ref in refs:
        lanes, source = _width_expected(fabric, h["group"], ref.role)
        if lanes is None:
            continue
        ran = True
        if width_lanes(ref.get("width")) < lanes:
            out.append(finding(
                host, "error", "width", ref.device, ref.port, "%dX or more (%s)" % (lanes, source), ref.get("width"),
                "the link came up with fewer lanes than expected: a damaged cable, a failed lane in the transceiver, "
                "or a dirty connector",
                "`mlxlink -d %s -p %s -m -c` (lanes, BER, cable); clean, reseat or replace the cable or transceiver"
                % (ref.device, ref.port)))
    return Outcome(out) if ran else SKIP


def _mtu_where(key, group):
    role, index, kind = key
    if role == "ipoib":
        return "most common MTU of %s in the %s group" % (index, group)
    what = "rail %d" % index if role == "compute" else "%s port %d" % (role, index)
    return "most common MTU of %s%s in the %s group" % (what, " (P_Key child)" if kind == "child" else "", group)


def check_mtu(fabric, host):
    """The MTU of the RoCE / IPoIB netdevs is expect.netdev_mtu's for that netdev, else expect.mtu (storage ports:
    expect.storage_mtu) (error), or the most common MTU of the same rail or storage index in the group (warning):
    like is compared with like."""
    h = fabric.hosts[host]
    netdevs = fabric.host_netdevs(host)
    if not netdevs:
        return SKIP
    ran = False
    out = []
    for nd, mtu, dev, key in netdevs:
        wanted = h["netdev_mtu"].get(nd, h["storage_mtu"] if key[0] == "storage" else h["mtu"])
        declared = wanted is not None
        expected = wanted if declared else fabric.reference("mtu", h["group"], key)
        if expected is None:
            continue
        ran = True
        if mtu == expected:
            continue
        out.append(finding(
            host, "error" if declared else "warning", "mtu", dev, _netdev_port(h, nd),
            "%d (%s)" % (expected, "declared" if declared else _mtu_where(key, h["group"])),
            "%s on %s" % (mtu, nd),
            "the MTU of %s differs from %s: RoCE and RDMA-CM derive the path MTU from it, so traffic runs with smaller "
            "packets (less bandwidth), and IP peers with a larger MTU lose their large packets"
            % (nd, "the declared one" if declared else "the same port of the other hosts"),
            "`ip link set %s mtu %d` and make it persistent (hpcnet.rdma.roce roce_mtu, or the IPoIB settings of "
            "hpcnet.rdma.infiniband); the switch ports must allow it too" % (nd, expected)))
    return Outcome(out) if ran else SKIP


def _netdev_port(h, netdev):
    return ((h["rdma"].get("netdevs") or {}).get(netdev) or {}).get("rdma_port")


def check_firmware(fabric, host):
    """Each expected HCA runs spec.expected_fw_ver (error) or the group's most common firmware of its board (warning).
    """
    h = fabric.hosts[host]
    seen = []
    for ref in fabric.all_ports[host]:
        if ref.dev is not None and ref.dev.get("fw_ver") and ref.device not in [s.device for s in seen]:
            seen.append(ref)
    if not seen:
        return SKIP
    declared = fabric.spec["expected_fw_ver"]
    out = []
    for ref in seen:
        board = board_of(ref.dev)
        if isinstance(declared, dict):
            wanted = declared.get(board) or declared.get(ref.dev.get("hca_type") or "")
        else:
            wanted = declared
        source = "declared"
        if not wanted:
            wanted = fabric.reference("fw_ver", h["group"], board)
            source = "most common on %s cards of the %s group" % (board, h["group"])
        found = ref.dev.get("fw_ver")
        if wanted is None or found == wanted:
            continue
        out.append(finding(
            host, "error" if source == "declared" else "warning", "firmware", ref.device, None,
            "%s (%s)" % (wanted, source), found,
            "the HCA runs firmware %s where %s is expected: mixed firmware gives different link behaviour, defaults "
            "and bugs across the fabric" % (found, wanted),
            "update %s to %s (hpcnet.rdma.firmware, or `mlxfwmanager -u`), then reset the card (`mlxfwreset`) or "
            "reboot" % (ref.device, wanted)))
    return Outcome(out)


def check_gid_index(fabric, host):
    """RoCE hosts: each rail's RoCE v2 IPv4 GID index exists and is the same on every RoCE host."""
    h = fabric.hosts[host]
    if h["group"] != "roce":
        return SKIP
    refs = [r for r in fabric.ports[host] if r.present and r.get("link_layer") == "Ethernet"]
    if not refs:
        return SKIP
    out = []
    for ref in refs:
        nd = ref.get("netdev") or "its netdev"
        found = ref.get("roce_v2_ipv4_gid_index")
        if found is None:
            out.append(finding(
                host, "error", "gid_index", ref.device, ref.port, "a RoCE v2 GID with an IPv4 address",
                "none",
                "no RoCE v2 GID with an IPv4 address on %s: the interface has no IPv4 address or is down; NCCL and "
                "perftest fall back to RoCE v1 or a link-local GID and cannot reach the other hosts" % nd,
                "give %s its IPv4 address (hpcnet.rdma.roce roce_addresses) and check `show_gids %s`" % (
                    nd, ref.device)))
            continue
        wanted = fabric.reference("gid_index", "roce", ref.rail)
        if wanted is not None and found != wanted:
            # a warning: each host's own nccl.conf carries its own index (hpcnet.rdma.nccl), which works; the job
            # breaks only when one NCCL_IB_GID_INDEX is forced on every rank (launcher environment, container image)
            out.append(finding(
                host, "warning", "gid_index", ref.device, ref.port,
                "%d (rail %d on the other RoCE hosts)" % (wanted, ref.rail), found,
                "the RoCE v2 IPv4 GID is at index %d here but at %d on the other RoCE hosts: per-host nccl.conf "
                "files work, but one NCCL_IB_GID_INDEX for the whole job (launcher environment, container image) "
                "picks a wrong GID (IPv6, link-local or RoCE v1) on this host, and its QPs do not connect"
                % (found, wanted),
                "give %s the same address layout as the other hosts (one IPv4 address, the same IPv6 addresses), or "
                "leave NCCL_IB_GID_INDEX unset (NCCL 2.21+ finds the GID itself); `show_gids %s`" % (nd, ref.device)))
    return Outcome(out)


def check_subnet_manager(fabric, host):
    """InfiniBand hosts: every ACTIVE port has a LID and an SM LID, and sees the rail's usual SM; a rail where no
    port sees an SM fails every host on it (one fabric finding, from fabric_subnet_manager)."""
    h = fabric.hosts[host]
    if h["group"] != "infiniband":
        return SKIP
    refs = [r for r in fabric.ports[host] if r.present and r.get("link_layer") == "InfiniBand"]
    if not refs:
        return SKIP
    no_sm = fabric.rails_without_sm()
    out = []
    failed = False
    ran = False
    for ref in refs:
        if ref.rail in no_sm and ref in no_sm[ref.rail]:
            failed = True
            continue
        if not ref.active:
            continue
        ran = True
        lid, sm_lid = ref.get("lid"), ref.get("sm_lid")
        if not lid or not sm_lid:
            out.append(finding(
                host, "error", "subnet_manager", ref.device, ref.port, "LID and SM LID assigned",
                "LID %s, SM LID %s" % (lid, sm_lid),
                "the port is ACTIVE but has no %s: the SM that configured it is gone, or it never assigned one" % (
                    "LID" if not lid else "SM LID"),
                "`sminfo -C %s -P %s` and the SM's log; restart opensm on this subnet (hpcnet.rdma.infiniband "
                "infiniband_sm)" % (ref.device, ref.port)))
            continue
        # the SM at the port's SM LID (sminfo without a LID asks that one) must be the master: after a handover
        # opensm's first sweep can be a light one that leaves every port naming the old master (a stale master)
        answer = h["sminfo"].get("%s:%s" % (ref.device, ref.port)) or {}
        if answer.get("state_name") and answer["state_name"] != "MASTER":
            out.append(finding(
                host, "error", "subnet_manager", ref.device, ref.port, "SM LID %d is the master SM" % sm_lid,
                "SM LID %d is an SM in %s (priority %d, GUID %s)" % (
                    sm_lid, answer["state_name"], answer["priority"], answer["guid"]),
                "this port's SM LID names an SM that is not master: the SM that is master did not write its LID to "
                "the port (after a handover opensm can sweep lightly and leave every port of the rail naming the old "
                "master), so traps and SA queries from this port go to an SM that does not act on them",
                "force a heavy sweep by the master: restart its opensm (`systemctl restart opensm@<port GUID>` on the "
                "master's host; `sminfo -C %s -P %s <LID>` on each SM's LID finds it); `sminfo -C %s -P %s` here "
                "then names a MASTER" % (ref.device, ref.port, ref.device, ref.port)))
            continue
        usual = fabric.reference("sm_lid", "infiniband", ref.rail)
        if usual is not None and sm_lid != usual:
            out.append(finding(
                host, "warning", "subnet_manager", ref.device, ref.port,
                "SM LID %d (rail %d on most hosts)" % (usual, ref.rail), "SM LID %d" % sm_lid,
                "this port sees another SM than the rest of rail %d: it is cabled to another subnet, or an SM "
                "failover is in progress" % ref.rail,
                "check the cabling of rail %d (`iblinkinfo`, `ibnetdiscover`) and `sminfo -C %s -P %s` here and on "
                "another host" % (ref.rail, ref.device, ref.port)))
    if not out and not failed and not ran:
        return SKIP
    return Outcome(out, failed=failed)


def fabric_subnet_manager(fabric):
    """One finding per InfiniBand rail where no port sees an SM master."""
    out = []
    for rail, refs in sorted(fabric.rails_without_sm().items()):
        names = sorted(set(r.device for r in refs), key=natural_key)
        hosts = ", ".join("%s:%s" % (r.host, r.device) for r in refs)
        out.append(finding(
            FABRIC, "error", "subnet_manager", names[0] if len(names) == 1 else None, None,
            "an SM master on the subnet of rail %d" % rail, "no port of rail %d sees an SM (%s)" % (rail, hosts),
            "no subnet manager runs on the subnet of rail %d: its ports stay INIT and carry no traffic" % rail,
            "run opensm on one host of each rail (hpcnet.rdma.infiniband: infiniband_sm, infiniband_sm_devices) or "
            "enable the switch's SM; `sminfo -C %s -P 1` then shows the master" % names[0]))
    return out


def check_pkeys(fabric, host):
    """InfiniBand ports hold the P_Keys expected of them (expect.pkeys, the partitions the SM gave them when the host
    was provisioned): a P_Key gone from a port's table takes the port out of that partition (NCCL_IB_PKEY, IPoIB
    children)."""
    h = fabric.hosts[host]
    if not h["pkeys"]:
        return SKIP
    out = []
    for ref in fabric.all_ports[host]:
        wanted = h["pkeys"].get("%s:%s" % (ref.device, ref.port))
        if not wanted or not ref.present or ref.get("link_layer") != "InfiniBand":
            continue
        missing = [p for p in wanted if p not in (ref.get("pkeys") or [])]
        if missing:
            out.append(finding(host, "error", "pkeys", ref.device, ref.port, "P_Keys %s" % ", ".join(wanted),
                               "%s missing" % ", ".join(missing),
                               "the SM no longer gives this port the partition(s) %s: the master SM runs another "
                               "partitions.conf, or the port's GUID left the partition" % ", ".join(missing),
                               "`smpquery pkeys -C %s -P %s` and the master SM's partitions.conf (hpcnet.rdma.infiniband "
                               "infiniband_partitions); `saquery -p` on the SM" % (ref.device, ref.port)))
    return Outcome(out)
