# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the health role installs on a host, computed first, written behind the module's one check-mode gate.

Pure Python (no Ansible imports).
- ``program_files(prefix)``: the program's Python files, read from the modules this process imported (the module
  that installs it imports ``health.cli``, so AnsiballZ packed exactly the code the program runs, the collection's
  module_utils and the few ``ansible.module_utils`` files they import), the launcher ``sbin/hpcnet-rdma-health`` and
  Slurm's ``sbin/hpcnet-rdma-health-slurm`` (``--slurm --quiet``: a HealthCheckProgram takes no arguments);
- ``SERVICE``, ``TIMER``: the names of the metrics' systemd units (the role writes them from its templates);
- ``plan(files)`` / ``prepare`` / ``write(plan)``: which files differ from what is on disk, and writing them
  atomically: the collection's one file writer, ``runner.files``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import sys

from ansible_collections.hpcnet.rdma.plugins.module_utils.health import cli
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import files

# the files computed here are written the collection's one way (runner.files)
plan, prepare, write = files.plan, files.prepare, files.write

COLLECTION = "ansible_collections.hpcnet.rdma.plugins.module_utils"
# the program's entry point: what it imports is what it runs
ENTRY = cli.__name__
LIB = "lib/hpcnet-rdma"
PROGRAM = "sbin/hpcnet-rdma-health"
# Slurm's HealthCheckProgram: slurm.conf takes a path without arguments, and slurmd runs it with no PATH at all (only
# SLURMD_NODENAME), where sminfo and ethtool (/usr/sbin) would not be found
SLURM_PROGRAM = "sbin/hpcnet-rdma-health-slurm"
SERVICE = "hpcnet-rdma-health.service"
# the slurm.conf lines, next to the expected state
SLURM_CONF = "slurm-health.conf"
TIMER = "hpcnet-rdma-health.timer"

LAUNCHER = """#!{python} -sE
# hpcnet-rdma-health: this host's RDMA fabric against {expected} (installed by the hpcnet.rdma.health role).
import sys
sys.path.insert(0, "{lib}")
from {entry} import main
sys.exit(main(expected="{expected}"))
"""

SLURM_LAUNCHER = """#!/bin/sh
# Slurm's HealthCheckProgram (installed by the hpcnet.rdma.health role): {program} --slurm --quiet
PATH=${{PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}}
export PATH
exec {program} --slurm --quiet "$@"
"""


def _source(name):
    module = sys.modules.get(name)
    loader = getattr(module, "__loader__", None)
    if loader is None or not hasattr(loader, "get_source"):
        return None
    try:
        return loader.get_source(name)
    except ImportError:
        return None


def _is_package(name):
    module = sys.modules.get(name)
    return hasattr(module, "__path__")


def _imports(source, package):
    """The absolute module names ``source`` imports (``from x import y`` gives x and x.y)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = package.split(".")
            base = node.module if not node.level else ".".join(parts[:len(parts) - node.level + 1] + [node.module])
            names.add(base)
            names.update("%s.%s" % (base, alias.name) for alias in node.names)
    return names


def python_files(entry=ENTRY):
    """{relative path: source} of ``entry`` and every collection or ansible.module_utils module it imports, with
    the packages' ``__init__.py`` (empty for ansible's, as AnsiballZ has them)."""
    wanted, seen, files = [entry], set(), {}
    while wanted:
        name = wanted.pop()
        if name in seen or name not in sys.modules:
            continue
        seen.add(name)
        if not (name.startswith(COLLECTION) or name.startswith("ansible.module_utils")):
            continue
        source = _source(name)
        if source is None:
            continue
        path = name.replace(".", "/") + ("/__init__.py" if _is_package(name) else ".py")
        files[path] = source
        package = name if _is_package(name) else name.rpartition(".")[0]
        wanted.extend(n for n in _imports(source, package)
                      if n.startswith(COLLECTION) or n.startswith("ansible.module_utils"))
        parts = name.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            if parent.startswith("ansible_collections"):
                continue  # namespace packages: a directory is enough
            files.setdefault(parent.replace(".", "/") + "/__init__.py", "")
    return files


def program_files(prefix, expected):
    lib = os.path.join(prefix, LIB)
    files = dict((os.path.join(lib, rel), (text, 0o644)) for rel, text in python_files().items())
    # the interpreter Ansible ran this module with (ansible_python_interpreter): the one the code runs on
    files[os.path.join(prefix, PROGRAM)] = (LAUNCHER.format(python=sys.executable or "/usr/bin/python3", lib=lib,
                                                            entry=ENTRY, expected=expected), 0o755)
    files[os.path.join(prefix, SLURM_PROGRAM)] = (SLURM_LAUNCHER.format(program=os.path.join(prefix, PROGRAM)), 0o755)
    return files
