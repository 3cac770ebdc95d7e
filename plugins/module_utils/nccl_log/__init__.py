# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Streaming analyser for NCCL_DEBUG=INFO output (NCCL 2.2 - 2.30).

Pure Python, no Ansible imports.  Feed it lines (``NcclLogAnalyzer.feed``) or a whole file (``analyze_file``) and ask
for ``result()``; ``check_expectations`` turns a result into findings.  README.md beside this file maps the modules:
a new log form goes into grammar.py, a new INFO message into evidence.py (network.py for ``NET/...`` and the network
selected), a new error meaning into rules.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.analyzer import (  # noqa: F401
    NcclLogAnalyzer, analyze_lines, analyze_text)
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.command import run_logged_command  # noqa: F401
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.expectations import (  # noqa: F401
    check_expectations, roce_v2_ipv4_gid_index, tcp_providers)
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.rules import classify_error  # noqa: F401
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.scan import analyze_file  # noqa: F401
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.summary import gid_kind, transport_label  # noqa: F401

__all__ = ('NcclLogAnalyzer', 'analyze_file', 'analyze_lines', 'analyze_text', 'check_expectations', 'classify_error',
           'gid_kind', 'roce_v2_ipv4_gid_index', 'run_logged_command', 'tcp_providers', 'transport_label')
