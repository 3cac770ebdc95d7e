# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``ansible_facts.rdma`` read once the one way (``read``: what ``rdma_facts`` returns, what the health role and the
health check read on the host), and what the other packages read of those facts the same way: the ports by name, in
device order."""

from __future__ import absolute_import, division, print_function

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import annotate
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs, natural_key
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.routes import default_route_netdevs

__metaclass__ = type


def read(root="/sys", port_roles=None, fabrics=(), management_netdevs=None, gather_counters=False,
         gather_all_netdevs=False, proc_root="/proc"):
    """The RDMA facts of the host under ``root``: ``gather_rdma_sysfs``, ``sysfs_root``, and every port's ``role`` and
    ``rail`` with ``ports_by_role`` (``port_roles.annotate``).

    ``port_roles``: the ``rdma_port_roles`` entries, or a function of the facts read (before the roles) that returns
    them (the health check keeps the entries whose ports are still there); ``fabrics``: the host's fabric groups;
    ``management_netdevs``: the netdevs of the management link, None for those of the default routes and the devices
    under them. Raises ``SysfsError`` (the host cannot be read) or ``PortRoleError`` (the roles do not fit it)."""
    rdma = {"sysfs_root": root}
    rdma.update(gather_rdma_sysfs(root, gather_counters=gather_counters, gather_all_netdevs=gather_all_netdevs))
    if management_netdevs is None:
        management_netdevs = default_route_netdevs(root, proc_root)
    entries = port_roles(rdma) if callable(port_roles) else port_roles
    return annotate(rdma, entries, fabrics, management_netdevs)


def ports(rdma, state=None, by="name"):
    """``dev:port`` of every port (or of those in ``state``, e.g. ACTIVE) of ``ansible_facts.rdma``, in device order
    (mlx5_2 before mlx5_10); with ``by="pci"`` ``<PCI function>/<port>`` (``0000:0c:00.0/1``), which a rename of the
    device (a reboot under another naming policy) keeps."""
    out = []
    for name, dev in sorted(((rdma or {}).get("devices") or {}).items(), key=lambda item: natural_key(item[0])):
        for num, port in sorted((dev.get("ports") or {}).items(), key=lambda item: int(item[0])):
            if state is None or port.get("state") == state:
                out.append("%s/%s" % (dev.get("pci_address") or name, num) if by == "pci" else "%s:%s" % (name, num))
    return out


def port_lines(rdma):
    """``dev:port STATE link_layer`` per port, for messages."""
    out = []
    for name, dev in sorted(((rdma or {}).get("devices") or {}).items(), key=lambda item: natural_key(item[0])):
        for num, port in sorted((dev.get("ports") or {}).items(), key=lambda item: int(item[0])):
            out.append("%s:%s %s/%s %s" % (name, num, port.get("state"), port.get("phys_state"), port.get("link_layer")))
    return out
