# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the other packages read of ``ansible_facts.rdma`` (what ``gather_rdma_sysfs`` returns) the same way: the link
layer of each fabric's inventory group, and the ports by name, in device order."""

from __future__ import absolute_import, division, print_function

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key

__metaclass__ = type


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
