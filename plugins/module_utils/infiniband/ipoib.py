# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""IPoIB netdevs through the kernel's own interface (Documentation/infiniband/ipoib.rst): the transport mode in
``class/net/<if>/mode`` (``datagram`` / ``connected``) and P_Key child interfaces made by writing the P_Key to the
parent's ``create_child`` (the child is ``<parent>.<pkey>``, its ``pkey`` file holds the P_Key). Read first, plan,
then apply; the module calls :func:`apply` only outside check mode."""

from __future__ import absolute_import, division, print_function

import errno
import os
import re

__metaclass__ = type

MODES = ("datagram", "connected")
_PKEY_RE = re.compile(r"^0x[0-9a-f]{4}$")


class IpoibError(Exception):
    pass


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise IpoibError("%s cannot be read: %s" % (path, exc.strerror or exc))


def _write(path, value):
    try:
        with open(path, "w") as handle:
            handle.write(value + "\n")
    except (IOError, OSError) as exc:
        raise IpoibError("writing %r to %s failed: %s" % (value, path, exc.strerror or exc))


def net_dir(root, name):
    return os.path.join(root, "class", "net", name)


def check(interfaces):
    """Input errors of the module's ``interfaces``."""
    errors, names = [], set()
    for index, item in enumerate(interfaces or []):
        where = "interfaces[%d]" % index
        name = item.get("name")
        if not name or "/" in name:
            errors.append("%s: name %r is not a netdev name" % (where, name))
        if name in names:
            errors.append("%s: %s is listed twice" % (where, name))
        names.add(name)
        if item.get("mode") not in (None,) + MODES:
            errors.append("%s: mode %r; allowed: %s" % (where, item.get("mode"), ", ".join(MODES)))
        if bool(item.get("parent")) != bool(item.get("pkey")):
            errors.append("%s: a child interface needs both parent and pkey" % where)
        if item.get("pkey") and not _PKEY_RE.match(str(item["pkey"]).lower()):
            errors.append("%s: pkey %r must be 0x and 4 hex digits (with the full-membership bit, e.g. 0x8002)" % (
                where, item["pkey"]))
        if item.get("parent") and item.get("pkey") and name != "%s.%s" % (item["parent"], str(item["pkey"]).lower()[2:]):
            errors.append("%s: the kernel names the child of %s for P_Key %s %s.%s, not %s" % (
                where, item["parent"], item["pkey"], item["parent"], str(item["pkey"]).lower()[2:], name))
    return errors


def read_state(root, name):
    """``{exists, mode, pkey, type}`` of one netdev (type 32 is ARPHRD_INFINIBAND)."""
    base = net_dir(root, name)
    if not os.path.isdir(base):
        return {"exists": False, "mode": None, "pkey": None, "type": None}
    return {"exists": True, "mode": _read(os.path.join(base, "mode")), "pkey": _read(os.path.join(base, "pkey")),
            "type": _read(os.path.join(base, "type"))}


def plan(root, interfaces):
    """``(before, after, steps)``: the state of each interface now and as wanted, and the writes, in order: children
    created before any mode is set. A parent that does not exist or is not an IPoIB netdev is an error."""
    before, after, creates, modes = {}, {}, [], []
    for item in interfaces:
        name = item["name"]
        state = read_state(root, name)
        before[name] = {"exists": state["exists"], "mode": state["mode"]}
        if item.get("parent"):
            parent = read_state(root, item["parent"])
            if not parent["exists"]:
                raise IpoibError("%s: parent %s does not exist" % (name, item["parent"]))
            if not state["exists"]:
                creates.append((os.path.join(net_dir(root, item["parent"]), "create_child"), item["pkey"].lower(),
                                name))
        elif not state["exists"]:
            raise IpoibError("%s does not exist (no IPoIB netdev of that name under %s)" % (
                name, os.path.join(root, "class", "net")))
        elif state["type"] not in (None, "32"):
            raise IpoibError("%s is not an IPoIB netdev (type %s, IPoIB is 32)" % (name, state["type"]))
        want_mode = item.get("mode") or state["mode"]
        after[name] = {"exists": True, "mode": want_mode}
        if item.get("mode") and item["mode"] != state["mode"]:
            modes.append((os.path.join(net_dir(root, name), "mode"), item["mode"], name))
    return before, after, creates + modes


def apply(root, steps, wait=None):
    """Make the writes; a child must appear before its mode is written (``wait(name)`` waits for a netdev)."""
    for path, value, name in steps:
        if path.endswith("/mode") and wait is not None:
            wait(name)
        _write(path, value)
