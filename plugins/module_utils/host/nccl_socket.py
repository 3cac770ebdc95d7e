# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL_SOCKET_IFNAME as NCCL reads it: which of a host's interfaces a value selects.

NCCL (``misc/socket.cc`` and ``misc/utils.cc``, ``matchIfList``) reads the value as an optional ``^`` (exclude the
listed interfaces), then an optional ``=`` (exact names instead of prefixes), then a comma-separated list. So
``eth`` selects eth0 and eth1, ``=eth0`` only eth0, ``^docker,lo`` everything but docker* and lo*, and ``^=lo``
everything but lo. Pure Python, no Ansible imports.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

# Optional ^, optional =, then comma-separated interface names or prefixes.
IFNAME_LIST_RE = re.compile(r"^\^?=?[A-Za-z0-9_.:@-]+(,[A-Za-z0-9_.:@-]+)*$")


def parse_ifname_list(value):
    """``'^=docker0,lo'`` -> ``(exclude=True, exact=True, ['docker0', 'lo'])``; None when it is not NCCL syntax."""
    if not IFNAME_LIST_RE.match(value or ""):
        return None
    exclude = value.startswith("^")
    body = value[1:] if exclude else value
    exact = body.startswith("=")
    body = body[1:] if exact else body
    return exclude, exact, body.split(",")


def selected_interfaces(value, names):
    """The interfaces of ``names`` that NCCL would consider for ``NCCL_SOCKET_IFNAME=value``, in the order given."""
    parsed = parse_ifname_list(value)
    if parsed is None:
        return []
    exclude, exact, refs = parsed

    def listed(name):
        return any(name == ref if exact else name.startswith(ref) for ref in refs)

    return [name for name in names if listed(name) != exclude]


def _fact_key(name):
    # setup publishes each interface under its name with '-' and ':' turned into '_' (ansible_facts['br_0a1b']).
    return re.sub(r"[-:]", "_", name)


def socket_ifname_problem(value, network_facts):
    """Why NCCL would find no usable socket interface for ``value`` on a host, or None.

    :arg network_facts: the host's ``ansible_facts`` with the network subset (``interfaces`` and one entry per
        interface with ``active``). Without ``interfaces`` nothing can be checked and the answer is None.
    """
    facts = network_facts or {}
    names = sorted(facts.get("interfaces") or [])
    if not names:
        return None
    selected = selected_interfaces(value, names)
    up = [name for name in names if (facts.get(_fact_key(name)) or {}).get("active")]
    if not selected:
        return ("nccl_socket_ifname %r selects no interface of this host, so NCCL would fail at bootstrap on every rank. "
                "Interfaces here: %s. Use one of them, a prefix (eth), an exact name (=eth0) or an exclusion (^docker,lo)."
                % (value, ", ".join(names)))
    if not [name for name in selected if name in up]:
        return ("nccl_socket_ifname %r selects %s, which %s down on this host, so NCCL would fail at bootstrap. "
                "Interfaces that are up: %s." % (value, ", ".join(selected), "is" if len(selected) == 1 else "are",
                                                 ", ".join(up) or "none"))
    return None
