# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel modules loaded now and at boot. Whether a module is loaded is read where the kernel keeps it,
``<sysfs_root>/module/<name>/`` (``initstate`` ``live`` for a loadable module; a built-in one has the directory but
no ``initstate``), so it follows ``rdma_sysfs_root`` and needs no ``/proc/modules``. Loading is ``modprobe NAME``;
at boot systemd-modules-load reads one ``modules-load.d`` file listing them. Pure Python but for the runner the
module passes in."""

from __future__ import absolute_import, division, print_function

import os
import re

__metaclass__ = type

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class KernelModuleError(Exception):
    pass


def sysfs_name(name):
    """/sys/module uses underscores (nvidia-peermem and nvidia_peermem are one module)."""
    return name.replace("-", "_")


def loaded(root, name):
    base = os.path.join(root, "module", sysfs_name(name))
    if not os.path.isdir(base):
        return False
    try:
        with open(os.path.join(base, "initstate")) as handle:
            return handle.read().strip() == "live"
    except (IOError, OSError):
        return True  # built in: the directory, no initstate


def render_load_file(names, header):
    return "".join(["# %s\n" % line for line in header] + ["%s\n" % name for name in names])


def check(names):
    bad = [name for name in names if not isinstance(name, str) or not NAME_RE.match(name)]
    if bad:
        raise KernelModuleError("names takes kernel module names (letters, digits, '_' and '-', as in ib_uverbs); "
                                "got %s" % ", ".join(repr(b) for b in bad))


def plan(root, names, load_file, header, current_text):
    """``(to_load, new_text or None)``: the modules not loaded now, and the modules-load.d text when it differs."""
    check(names)
    to_load = [name for name in names if not loaded(root, name)]
    wanted = render_load_file(names, header) if load_file else None
    return to_load, (wanted if wanted is not None and wanted != current_text else None)
