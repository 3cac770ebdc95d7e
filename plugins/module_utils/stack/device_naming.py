# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``rdma_device_naming``: the names udev gives the RDMA devices at boot (pure Python, no Ansible imports).

rdma-core ships ``60-rdma-persistent-naming.rules``, whose rule runs ``rdma_rename %k <mode>`` for every new RDMA
device (``kernel-boot/rdma_rename.c``): ``NAME_KERNEL`` keeps the kernel's name (``mlx5_0``), ``NAME_PCI`` names it
by its PCI address (``ibp24s0``, ``rocep12s0f1``, ``P<domain>`` first outside domain 0), ``NAME_GUID`` by its node
GUID (``ibx<16 hex digits>``, ``rocex…``), ``NAME_FALLBACK`` tries onboard (``ibo<N>``), then PCI, else keeps the
kernel name (rdma_rename's str2policy: the rules file's comment names GUID too, the code does not). Debian and
Ubuntu install the rule with ``NAME_FALLBACK``; MLNX_OFED and DOCA-OFED keep kernel names. A file of the same name
in ``/etc/udev/rules.d`` overrides the package's (udev reads ``/etc`` over ``/usr/lib``), which is the file this
writes. Names change when the device is added: at the next boot (or driver reload).
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

RULES_FILE = "/etc/udev/rules.d/60-rdma-persistent-naming.rules"
# rdma_device_naming -> rdma_rename's mode (keep: the file is left alone)
MODES = {"kernel": "NAME_KERNEL", "pci": "NAME_PCI", "guid": "NAME_GUID", "fallback": "NAME_FALLBACK"}
POLICIES = ("keep",) + tuple(MODES)

_KERNEL = re.compile(r"^[a-z][a-z0-9_]*_[0-9]+$")           # mlx5_0, mlx5_bond_0, rxe_0
_PCI = re.compile(r"^(ib|roce|iw)(P[0-9]+)?p[0-9]+s[0-9]+(f[0-9]+)?$")
_GUID = re.compile(r"^(ib|roce|iw)x[0-9a-f]{16}$")
_ONBOARD = re.compile(r"^(ib|roce|iw)o[0-9]+$")
SCHEMES = {"kernel": (_KERNEL,), "pci": (_PCI,), "guid": (_GUID,), "fallback": (_ONBOARD, _PCI)}


def rules_text(policy):
    """The rules file for ``policy`` (the rule of rdma-core's file with the mode it asks for)."""
    return ("# Written by hpcnet.rdma (rdma_device_naming: %s); overrides rdma-core's file of the same name in\n"
            "# /usr/lib/udev/rules.d. rdma_rename names each RDMA device when it is added (boot, driver load).\n"
            'ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %%k %s"\n' % (policy, MODES[policy]))


def follows(name, policy, has_pci=True):
    """True when a device's name is one ``policy`` gives. Under ``fallback`` a device without a PCI address keeps
    its kernel name."""
    if policy == "keep":
        return True
    patterns = SCHEMES[policy] + ((_KERNEL,) if policy == "fallback" and not has_pci else ())
    return any(pattern.match(name) for pattern in patterns)


def state(policy, current_text, devices):
    """``(naming, pending)``: ``naming`` is ``{policy, rules_file, rules_current, rules_text, not_following}``;
    ``pending`` is ``{from, to, rules_file}`` when devices do not have the names the policy gives (the next boot gives them),
    else None. ``devices``: ``{name: has_pci}`` of the host's RDMA devices; ``current_text`` the rules file or None."""
    if policy == "keep":
        return ({"policy": policy, "rules_file": RULES_FILE, "rules_current": True, "rules_text": None,
                 "not_following": []}, None)
    text = rules_text(policy)
    odd = sorted(name for name, has_pci in (devices or {}).items() if not follows(name, policy, has_pci))
    naming = {"policy": policy, "rules_file": RULES_FILE, "rules_current": current_text == text, "rules_text": text,
              "not_following": odd}
    return naming, ({"from": ", ".join(odd), "to": "%s names (%s)" % (policy, MODES[policy]), "rules_file": RULES_FILE}
                    if odd else None)
