# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running a command with NCCL_DEBUG=INFO and analysing its output as it comes (no Ansible needed)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import threading

from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import tool_runner
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.grammar import _LINE_BYTES
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.analyzer import NcclLogAnalyzer


def run_logged_command(argv, env, timeout, chdir=None):
    """Run ``argv`` (no shell) with NCCL_DEBUG=INFO, stream its output into the analyser, kill it after ``timeout`` s.

    Returns a dict: analysis, rc, timed_out, error (a message when the command could not start).
    """
    full_env = {'NCCL_DEBUG': 'INFO'}   # unless ``env`` sets it
    full_env.update(env or {})
    an = NcclLogAnalyzer()
    out = {'analysis': None, 'rc': None, 'timed_out': False, 'error': None}
    try:
        proc = tool_runner.popen(argv, env=full_env, cwd=chdir)
    except (OSError, ValueError) as exc:
        out['error'] = 'command %s: cannot run it: %s' % (argv[0], exc)
        out['rc'] = 127
        return out

    def _kill():
        out['timed_out'] = True
        tool_runner.kill_group(proc)

    timer = threading.Timer(timeout, _kill) if timeout else None
    if timer:
        timer.daemon = True
        timer.start()
    try:
        skipping = False        # the rest of a line longer than _LINE_BYTES (only its head is read)
        for raw in iter(lambda: proc.stdout.readline(_LINE_BYTES), b''):
            if skipping:
                skipping = not raw.endswith(b'\n')
                continue
            skipping = len(raw) == _LINE_BYTES and not raw.endswith(b'\n')
            an.feed(raw)
        proc.stdout.close()
        out['rc'] = proc.wait()
    finally:
        if timer:
            timer.cancel()
    out['analysis'] = an.result()
    return out
