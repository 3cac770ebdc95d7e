# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL_IB_HCA as NCCL writes and reads it: the one home of its grammar (the nccl role writes it, verify and the
health check read it back).

NCCL (``misc/utils.cc``: ``parseStringList``, ``matchIfList``) reads the value as an optional ``^`` (use every port
but the listed ones), then an optional ``=`` (exact device names instead of prefixes), then a comma-separated list of
``device`` or ``device:port``. So ``mlx5`` selects every port of mlx5_0 .. mlx5_17, ``=mlx5_1:1`` only port 1 of
mlx5_1 (``mlx5_1:1`` would also take mlx5_10 .. mlx5_17), ``^=mlx5_4`` every port but mlx5_4's. An entry without a
port takes every port of its devices. Pure Python, no Ansible imports.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key

__metaclass__ = type


def format_hca_list(ports, exact=True, exclude=False):
    """``[(device, port or None)]`` -> the NCCL_IB_HCA value: ``[("mlx5_0", 1), ("mlx5_1", None)]`` ->
    ``=mlx5_0:1,mlx5_1``; ``exact`` prefixes ``=``, ``exclude`` ``^``."""
    body = ",".join(device if port is None else "%s:%d" % (device, int(port)) for device, port in ports)
    return ("^" if exclude else "") + ("=" if exact else "") + body


def parse_hca_list(value):
    """The NCCL_IB_HCA value -> ``(exclude, exact, [(device, port or None)])``, as NCCL reads it (an empty or unset
    value: no entry; a port that is not a number: every port, as NCCL's ``atoi`` leaves none)."""
    body = (value or "").strip()
    exclude = body.startswith("^")
    body = body[1:] if exclude else body
    exact = body.startswith("=")
    body = body[1:] if exact else body
    entries = []
    for item in body.split(","):
        name, _sep, port = item.strip().partition(":")
        if name:
            entries.append((name, int(port) if port.isdigit() and int(port) > 0 else None))
    return exclude, exact, entries


def entry_devices(name, exact, devices):
    """The devices of ``devices`` (names) that one entry's name selects, in device order: the one named (``exact``),
    or every device whose name starts with it."""
    return sorted((d for d in devices if (d == name if exact else d.startswith(name))), key=natural_key)


def selected_ports(value, ports):
    """The ``(device, port)`` pairs of ``ports`` that NCCL uses for ``NCCL_IB_HCA=value``, in the order given (an
    empty value: every port)."""
    exclude, exact, entries = parse_hca_list(value)
    if not entries:
        return list(ports)

    def listed(device, port):
        return any(device in entry_devices(name, exact, [device]) and number in (None, int(port))
                   for name, number in entries)
    return [(device, port) for device, port in ports if listed(device, port) != exclude]
