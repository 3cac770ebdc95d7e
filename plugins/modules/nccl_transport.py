#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: nccl_transport
short_description: Tell which transport NCCL really selected, from NCCL_DEBUG=INFO output
version_added: "0.1.0"
description:
  - Reads NCCL_DEBUG=INFO output of any NCCL release from 2.2 to 2.30 and reports, with the evidence lines, which
    network transport NCCL selected (built-in InfiniBand/RoCE verbs C(IB), C(Socket) or an external plugin), the HCAs
    and their link layer, GPUDirect RDMA (GDR), CollNet/SHARP, NVLS, the intra-node transports, a fallback to
    sockets, every WARN line classified, the NCCL variables echoed, and the same summary for every host/process.
  - The log can be a file (O(log_path)), a string (O(log_text)) or the output of a command this module runs
    (O(command), for example nccl-tests C(all_reduce_perf)); C(NCCL_DEBUG=INFO) is added to the command's environment.
  - Lines wrapped by launchers (mpirun C([1,3]<stdout>:), Slurm C(0:) followed by a space, C([host]:), Ray C((pid=..)) prefixes) or log
    shippers (JSON records with the message in a field) are understood.
  - With expectations (O(expect_transport), O(expect_link_layer), O(expect_gdr), O(expect_hcas), O(forbid_fallback)) the
    module fails when one is not met, quoting the evidence lines and giving the likely cause and fix. Without them it
    only reports.
  - Triage a log from any cluster with C(ansible localhost -m hpcnet.rdma.nccl_transport -a log_path=run.log).
  - The module only reads; it never reports C(changed). In check mode it still analyses, and in O(command) mode it
    still runs the command, because the command is a read-only measurement an operator asks for explicitly and
    skipping it would return no answer at all. Do not point O(command) at something that changes the system.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  log_path:
    description:
      - Path of a file holding NCCL_DEBUG=INFO output (on the managed host). Read in constant memory, any size.
      - Mutually exclusive with O(log_text) and O(command).
    type: path
  log_text:
    description:
      - NCCL_DEBUG=INFO output given as a string, or as a list of lines (for example a registered result's
        C(stdout_lines)).
      - Mutually exclusive with O(log_path) and O(command).
    type: raw
  command:
    description:
      - Command to run, as an argv list (no shell), whose stdout and stderr are analysed, for example
        C([all_reduce_perf, -b, 8, -e, 1G, -f, 2, -g, 8]) or an C(mpirun ...) line.
      - C(NCCL_DEBUG=INFO) and C(LC_ALL=C) are added to its environment unless O(env) sets C(NCCL_DEBUG).
      - The module fails when the command exits with a non-zero code or is killed by a signal (a failed run), with
        the analysis of its output returned.
      - Mutually exclusive with O(log_path) and O(log_text).
      - Every item must be a string (numbers are converted); null, lists and mappings are rejected.
    type: list
    elements: raw
  env:
    description:
      - Extra environment variables for O(command), for example C(NCCL_IB_HCA) or C(NCCL_IB_GID_INDEX).
    type: dict
    default: {}
  timeout:
    description:
      - Seconds after which O(command) is killed (a hung job); the module then fails and reports what the output
        shows so far.
    type: int
    default: 600
  chdir:
    description:
      - Working directory for O(command).
    type: path
  expect_transport:
    description:
      - Transport every process must have selected. C(IB) is NCCL's built-in verbs transport (InfiniBand or RoCE),
        C(Socket) is TCP; any other value is an external plugin's network name as NCCL prints it, for example
        C(IBext), C(IBext_v8), C(AWS Libfabric), written with or without the C(plugin:) prefix. A plugin name
        without a C(_vN) suffix also accepts the versioned names (C(IBext) matches C(IBext_v8)).
    type: str
  expect_link_layer:
    description:
      - "Link layer every HCA NCCL listed must have (from the C(NET/IB : Using [0]mlx5_0:1/RoCE) line)."
    type: str
    choices: [IB, RoCE]
  expect_gdr:
    description:
      - Whether GPUDirect RDMA must be in use (C(/GDRDMA) on the network connection lines) or must be off.
    type: bool
  expect_hcas:
    description:
      - HCA names (for example C(mlx5_0)) that must all appear among the devices NCCL listed.
      - A subset check; other HCAs may be listed too.
    type: list
    elements: str
  forbid_fallback:
    description:
      - Fail when the log shows NCCL fell back to sockets (an IB probe failure and the socket choice both visible),
        or when any host selected C(Socket) while another selected something else.
    type: bool
    default: false
notes:
  - C(null) in the result means the log shows no evidence; the module never guesses.
  - Supports check mode. Read-only; C(changed) is always false.
requirements:
  - Python 3.6 or newer on the host that runs the module.
seealso:
  - name: NCCL environment variables
    description: NCCL_DEBUG, NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_NET and friends.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes.read_only
'''

EXAMPLES = r'''
- name: Triage a log copied from any cluster
  hpcnet.rdma.nccl_transport:
    log_path: /tmp/run.log
  register: nccl

- name: Require RoCE with GPUDirect RDMA on the two rails, no socket fallback
  hpcnet.rdma.nccl_transport:
    log_path: /scratch/job-1234/slurm.out
    expect_transport: IB
    expect_link_layer: RoCE
    expect_gdr: true
    expect_hcas: [mlx5_0, mlx5_1]
    forbid_fallback: true

- name: Run nccl-tests on this node and check the HPC-X plugin carried the traffic
  hpcnet.rdma.nccl_transport:
    command: [/opt/nccl-tests/build/all_reduce_perf, -b, 8M, -e, 1G, -f, 2, -g, 8]
    env:
      NCCL_IB_HCA: mlx5_0,mlx5_1
    timeout: 300
    expect_transport: IBext
  register: perf

- name: Show the bus bandwidth nccl-tests measured
  ansible.builtin.debug:
    msg: "{{ perf.busbw.avg_busbw_gbps }} GB/s"
'''

RETURN = r'''
nccl_version:
  description: NCCL version from the C(NCCL version X) banner; a list when processes print different versions.
  returned: always
  type: raw
  sample: "2.18.5"
nccl_versions:
  description: Every distinct NCCL version printed, sorted.
  returned: always
  type: list
  elements: str
net_transport:
  description:
    - Network transport selected, from connection lines (C(via NET/<name>/<dev>)), the selection line
      (C(Using network X), C(Using internal Network X), C(Assigned NET plugin X to comm)) or, for 2.4-2.5, the device
      list. C(IB), C(Socket), C(plugin:<name as NCCL prints it>), or null when undetermined.
    - When processes disagree this is the value most processes chose; see RV(mismatch) and RV(per_host).
  returned: always
  type: str
  sample: IB
net_transports:
  description: All distinct transports selected by the processes.
  returned: always
  type: list
  elements: str
mismatch:
  description: True when processes selected different transports.
  returned: always
  type: bool
ib_devices:
  description: "HCAs as NCCL listed them in C(NET/IB : Using [n]name:port/LL), in NCCL's order."
  returned: always
  type: list
  elements: dict
  sample: [{name: mlx5_0, port: 1, link_layer: RoCE}]
gdr:
  description: GPUDirect RDMA in use. A process's network connection lines decide (C(/GDRDMA) or not); without
    them the network transport's own C(GPU Direct RDMA Enabled/Disabled for HCA) line (C((no module)) is no verdict
    next to C(DMA-BUF is available)), then the topology's C(GPU Direct RDMA ... for GPU X / HCA Y) lines about this
    process's rank, or all of them when they agree. Null without evidence.
  returned: always
  type: bool
collnet:
  description: "CollNet (SHARP) connections seen (C(CollNet NN/C : r [send] via COLLNET/...), C(Connected CollNet));
    false on C(0 collnet channels), C(Rank N: 0 CollNet devices) (2.30.3+), C(Local CollNet device counts across
    ranks ... max 0) or C(... disabling CollNet); null without evidence."
  returned: always
  type: bool
nvls:
  description:
    - NVLink SHARP (NVLS) in use - its buffers set up (C(NVLS comm 0x.. headRank ...)) or its tree connected
      (C(Connected NVLS tree)).
    - False on C(0 nvls channels), C(NVLS multicast support is not available), C(NCCL_NVLS_ENABLE=0), or an
      C(NCCL_ALGO) that leaves no NVLS algorithm; null otherwise. What only shows NVLS possible (a non-zero
      C(nvls channels), C(NVLS Head), C(NVLS multicast support is available)) is capacity, not use, and stays null.
  returned: always
  type: bool
intra_node:
  description: Transports seen between GPUs of one node (C(P2P/IPC), C(P2P/CUMEM), C(SHM/direct/direct), C(NVLS), or
    C(NET/<name>) when GPUs of one node talk through the NIC).
  returned: always
  type: list
  elements: str
multi_node:
  description: True when the log shows more than one machine (several hosts, C(nNodes) above 1, an inter-node tree,
    a network connection between two GPUs printing the same busId / NVML index, or one to a rank of another host
    from a process that also shows P2P/SHM connections); false when every rank is shown on one machine; null
    otherwise (a network connection alone proves nothing - NCCL also loops through the NIC inside one node).
  returned: always
  type: bool
fallback_to_socket:
  description: True only when an IB probe failure (or an IB plugin that did not carry traffic) and the socket choice
    are both visible; false when a non-socket transport was chosen or sockets were chosen deliberately.
  returned: always
  type: bool
errors:
  description:
    - Each distinct WARN / error line with C(line) (1-based line number of its first occurrence), C(text), C(category)
      (bootstrap, device, GID, QP, completion, proxy, topology, shared memory, IB event, timeout, duplicate GPU,
      plugin load, return code, nccl-tests, framework, system, RAS, other), C(count), C(hosts) and, when known, C(meaning) (for completions, the
      ibv_wc_status name).
    - Entries with C(inferred=true) and a text starting with C(inferred:) are conclusions no single line states
      (transport mismatch, version mismatch, socket on loopback).
  returned: always
  type: list
  elements: dict
env:
  description: NCCL variables echoed in the log (C(NCCL_IB_HCA set by environment to ...)).
  returned: always
  type: dict
per_host:
  description: The same summary per process group, keyed C(host:pid) (C(tag:<launcher prefix>) or C(-) when the NCCL
    prefix was stripped), with C(host), C(pid), C(ranks) (here the list of rank ids the process printed, at most 64).
  returned: always
  type: dict
machines:
  description: Distinct machines the log shows (hosts, and distinct addresses of one interface name on one host).
  returned: always
  type: int
processes:
  description: Process groups (C(host:pid)) seen with an NCCL prefix.
  returned: always
  type: int
lines:
  description: Lines in the log (a last line without a newline counts).
  returned: always
  type: int
nccl_lines:
  description: Lines the analyser read as NCCL INFO/WARN lines (only lines that hold something it uses are read).
  returned: always
  type: int
ib_disabled_by_env:
  description: true when C(NCCL_IB_DISABLE set by environment to 1) is echoed, false when it is echoed with another
    value, null when not echoed.
  returned: always
  type: bool
plugin_provider:
  description: The libfabric provider aws-ofi-nccl selected (C(efa), or C(tcp;ofi_rxm), which is TCP); a list when
    processes differ.
  returned: when aws-ofi-nccl printed it
  type: raw
  sample: efa
hosts:
  description: Host names seen in NCCL prefixes.
  returned: always
  type: list
  elements: str
ranks:
  description: Communicator size (largest C(nranks) seen), or null. See RV(communicators) for each communicator.
  returned: always
  type: int
communicators:
  description:
    - Each communicator each process printed (C(ncclCommInitRank|ncclCommSplit|ncclCommShrink comm 0x.. rank R
      nranks N ...), C(comm 0x.. rank R nRanks N nNodes M ...)), in the order seen, at most 256. Ranks are per
      communicator; a split or shrink renumbers them.
    - Each has C(host), C(pid), C(comm) (the pointer, per process), C(rank), C(nranks) and, when printed, C(nnodes),
      C(local_ranks), C(comm_id), C(function) (the call that made it) and C(parent) (the parent communicator of a
      split or shrink).
    - Ranks that ran alone (a launcher that did not wire them together) show as communicators of C(nranks) 1.
  returned: always
  type: list
  elements: dict
  sample: [{host: node01, pid: 4711, comm: "0x55d0c2a0", rank: 0, nranks: 16, nnodes: 2, function: ncclCommInitRank}]
gid:
  description: GID used per HCA port from the QP trace line (C(GID <index> (<prefix>/<id>))) with its kind
    (link-local, ipv4-mapped, global).
  returned: always
  type: list
  elements: dict
plugin:
  description:
    - External net plugin information, or null - C(name) and C(api) as the loader printed them (C(NET/Plugin
      Loaded net plugin X (vN))), C(loaded), C(p2p_name) (C(P2P plugin X)), C(library), C(collnet_plugin).
    - C(usable) is true when a network NCCL selected or connected through (C(Using network X), C(Assigned NET plugin
      X to comm), C(via NET/X/)) is not one of NCCL's own (C(IB), C(Socket)) - the plugin carried the traffic, even
      under another name than it loaded with (HPC-X loads as C(NCCL RDMA Plugin v8) and runs as C(IBext_v8)); false
      when only built-in networks were selected (loaded, then not used); absent when no network shows.
  returned: always
  type: dict
busbw:
  description: nccl-tests result table when present - C(avg_busbw_gbps) (GB/s), C(peak_busbw_gbps) (GB/s) and the
    rows (size in bytes, time in us, algbw/busbw in GB/s); null otherwise.
  returned: always
  type: dict
evidence:
  description: Up to five quoted lines (with line numbers) per kind of evidence.
  returned: always
  type: dict
summary:
  description:
    - "One line for an operator: NCCL version, the transport and link layer with the HCAs, GPUDirect RDMA, single or
      multi-node, and warnings (fallback to sockets, processes that disagree). Also returned as C(msg)."
  returned: always
  type: str
  sample: "NCCL 2.18.5; used IB over RoCE (mlx5_4:1); multi-node"
findings:
  description: One message per unmet expectation (empty when all are met); the module fails when it is not empty.
  returned: always
  type: list
  elements: str
rc:
  description: Exit code of O(command).
  returned: when O(command) is used
  type: int
'''

import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import (
    analyze_file, analyze_text, check_expectations, run_logged_command)
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.expectations import (
    expect_hcas_problem, expect_transport_problem)
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.summary import summary_line


def _log_path_problem(path):
    """A message when ``path`` cannot be read as a log file, else None."""
    if not path:
        return 'log_path is empty: give the path of the log file'
    if not os.path.lexists(path):
        where = '' if os.path.isabs(path) else ' (relative paths are read from %s on the managed host)' % os.getcwd()
        return 'log_path %s: no such file%s' % (path, where)
    if not os.path.exists(path):
        return 'log_path %s is a symbolic link to a missing file (%s)' % (path, os.readlink(path))
    try:
        st = os.stat(path)
    except OSError as exc:
        return 'log_path %s: cannot read: %s' % (path, exc)
    if stat.S_ISDIR(st.st_mode):
        return 'log_path %s is a directory; give the log file' % path
    if not stat.S_ISREG(st.st_mode):
        return 'log_path %s is not a regular file (a FIFO or device); save the log to a file first' % path
    try:
        with open(path, 'rb') as fh:
            head = fh.read(4)
    except (IOError, OSError) as exc:
        return 'log_path %s: cannot read: %s' % (path, exc)
    if head[:2] == b'\x1f\x8b':
        return 'log_path %s is gzip-compressed: decompress it first (gzip -dc %s > run.log)' % (path, path)
    if head[:2] in (b'\xff\xfe', b'\xfe\xff'):
        return 'log_path %s is UTF-16 encoded: convert it first (iconv -f UTF-16 -t UTF-8 %s > run.log)' % (path, path)
    return None


def _env_problem(env):
    """A message naming the first ``env`` entry that is not NAME: string-or-number, else None."""
    for key, value in env.items():
        if not re.match(r'^[A-Za-z_][A-Za-z0-9_]*$', str(key)):
            return 'env: %r is not a variable name (letters, digits and _, not starting with a digit)' % (key,)
        if isinstance(value, str) and '\x00' in value:
            return 'env.%s: the value contains a NUL byte' % key
        if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
            return ('env.%s: give a string or a number, e.g. "1" or "0" (got %r; YAML true/false would reach NCCL as '
                    '"True"/"False", which it reads as 0)' % (key, value))
    return None


MODES = ('log_path', 'log_text', 'command')
ARGUMENT_SPEC = dict(
    log_path=dict(type='path'),
    log_text=dict(type='raw'),
    command=dict(type='list', elements='raw'),
    env=dict(type='dict', default={}),
    timeout=dict(type='int', default=600),
    chdir=dict(type='path'),
    expect_transport=dict(type='str'),
    expect_link_layer=dict(type='str', choices=['IB', 'RoCE']),
    expect_gdr=dict(type='bool'),
    expect_hcas=dict(type='list', elements='str'),
    forbid_fallback=dict(type='bool', default=False),
    sysfs_root=dict(type='path', default='/sys'),
)


def _items_problem(p):
    """A message when an item of ``command`` or of a ``log_text`` list is not a string (or a number), else None."""
    for key in ('command', 'log_text'):
        items = p[key]
        if isinstance(items, (list, tuple)) and not all(isinstance(x, (str, int, float)) and not isinstance(x, bool)
                                                        for x in items):
            bad = next(x for x in items if not isinstance(x, (str, int, float)) or isinstance(x, bool))
            return '%s: every item must be a string (%s is %s)' % (
                key, 'an argument' if key == 'command' else 'a log line', 'null' if bad is None else type(bad).__name__)
    return None


def _command_problem(p):
    """A message when ``command`` (with ``chdir``, ``env``, ``timeout``) cannot be run as given, else None."""
    command = [str(x) for x in p['command']]
    if not command:
        return ('give one of log_path (a log file), log_text (the log) or command (an argv list, for example '
                '[all_reduce_perf, -g, 8])')
    if not command[0].strip():
        return 'command: the program (first item) is empty'
    if p['chdir'] is not None and not os.path.isdir(p['chdir']):
        return 'chdir %r: no such directory' % p['chdir']
    if len(command) == 1 and ' ' in command[0].strip() and not os.path.exists(command[0]):
        return ('command: give an argv list, one item per argument (no shell), e.g. [%s]; got the single string %r'
                % (', '.join(command[0].split()), command[0]))
    bad_env = _env_problem(p['env'] or {})
    if bad_env:
        return bad_env
    if p['timeout'] is not None and p['timeout'] <= 0:
        return 'timeout: must be a positive number of seconds, got %s' % p['timeout']
    return None


def _options_problem(p):
    """The first problem with the options (expectations, items, options of another mode, then the log source), else
    None."""
    problem = expect_transport_problem(p['expect_transport']) or expect_hcas_problem(p['expect_hcas']) or _items_problem(p)
    if problem:
        return problem
    if p['command'] is None:
        for key in ('env', 'chdir'):
            if p[key]:
                return '%s applies to command only; it was given with %s' % (
                    key, 'log_path' if p['log_path'] is not None else 'log_text')
    if p['log_path'] is not None:
        return _log_path_problem(p['log_path'])
    if p['log_text'] is not None:
        if not isinstance(p['log_text'], (list, tuple, str)):
            return 'log_text: give the log as a string or a list of lines, got %s' % type(p['log_text']).__name__
        return None
    return _command_problem(p)


def _expectations(p, result):
    return check_expectations(result, p['expect_transport'], p['expect_link_layer'], p['expect_gdr'], p['expect_hcas'],
                              p['forbid_fallback'], sysfs_root=p['sysfs_root'])


def _analyse(p):
    """Analyse the log the options give: a file, a text, or the output of a command run here (its exit code in
    ``rc``).  Returns (result, None), or (None, fail_json's arguments) when the file cannot be read, the command cannot
    run or it timed out (then with the analysis of its output so far, findings and summary)."""
    if p['log_path'] is not None:
        try:
            return analyze_file(p['log_path']), None
        except (IOError, OSError) as exc:
            return None, {'msg': 'log_path %s: cannot read: %s' % (p['log_path'], exc)}
    if p['log_text'] is not None:
        text = p['log_text']
        if isinstance(text, (list, tuple)):
            text = '\n'.join(str(x) for x in text)      # e.g. "{{ job.stdout_lines }}"
        return analyze_text(text), None
    command = [str(x) for x in p['command']]
    env = dict((k, str(v)) for k, v in (p['env'] or {}).items())
    run = run_logged_command(command, env, p['timeout'], p['chdir'])
    if run['error']:
        return None, {'msg': run['error'], 'rc': run['rc']}
    result = run['analysis']
    result['rc'] = run['rc']
    if not run['timed_out']:
        return result, None
    result['findings'] = _expectations(p, result)
    result['summary'] = summary_line(result)
    if run['rc'] == 0:
        why = 'it exited with code 0, but a process it left in the background kept its output open'
    else:
        why = 'it was killed'
    return None, dict(result, msg='command %s timed out after %d s (%s); the analysis of its output so far is returned'
                      % (command[0], p['timeout'], why))


def _no_output_problem(p, result):
    """A message when the log is empty or holds no NCCL output (no NCCL line, nccl-tests table or error), else None."""
    if result['lines'] and (result['nccl_lines'] or result['busbw'] is not None or result['errors']):
        return None
    if result.get('rc'):
        return 'command %s exited with code %s and printed no NCCL output' % (p['command'][0], result['rc'])
    if p['log_path']:
        source = 'log_path ' + p['log_path']
    elif p['log_text'] is not None:
        source = 'log_text'
    else:
        source = 'command output'
    return 'the log is empty or has no NCCL output: run the job with NCCL_DEBUG=INFO (source: %s)' % source


def _findings(p, result):
    """The unmet expectations, then a non-zero exit code of the command."""
    findings = _expectations(p, result)
    rc = result.get('rc')
    if rc:
        findings.append('the command was killed by signal %d' % -rc if rc < 0 else 'the command exited with code %s' % rc)
    return findings


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[MODES], required_one_of=[MODES],
                           supports_check_mode=True)
    p = module.params
    problem = _options_problem(p)
    if problem:
        module.fail_json(msg=problem, changed=False)
    result, failure = _analyse(p)
    if failure is None:
        problem = _no_output_problem(p, result)
        failure = dict(result, msg=problem) if problem else None
    if failure is None:
        result['findings'] = _findings(p, result)
        result['summary'] = summary_line(result)
        if result['findings']:
            failure = dict(result, msg=' | '.join(result['findings']))
    if failure is not None:
        module.fail_json(changed=False, **failure)
    module.exit_json(changed=False, msg=result['summary'], **result)


if __name__ == '__main__':
    main()
