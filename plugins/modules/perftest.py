#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: perftest
short_description: Run one side of a perftest RDMA bandwidth or latency test, or parse saved perftest output
version_added: "0.1.0"
description:
  - Runs one side of a perftest test (C(ib_write_bw), C(ib_read_lat), ...) between two hosts, or parses output saved
    from any run (O(log_path) / O(log_text)), and returns the header perftest printed (test, HCA, link type, GID
    index, MTU, QPs...), the result rows with bandwidth in Gb/s and latency in microseconds, perftest's warnings and,
    when the test failed, the classified failure with its likely cause and fix.
  - "The server side is the one without O(server): it waits for a client on the out-of-band TCP O(port). The client
    side is given the server's address (O(server)); it connects over that TCP port to exchange QP numbers, GIDs and
    memory keys, then sends RDMA traffic through O(device). Start the server first (for example with C(async))."
  - Before starting a server the module checks that the TCP port is free on this host (a bind test) and fails if not.
  - The perftest process is killed (with its process group) after O(timeout) seconds; the module then fails with a
    C(timeout) failure unless perftest printed a failure of its own first.
  - "Bandwidth: perftest prints C(Gb/sec) with C(--report_gbits) (always passed to the bandwidth tools), C(MB/sec)
    before 24.07 and C(MiB/sec) since; both mean 2^20 bytes/s in perftest's source (C(format_factor = 0x100000)) and
    are converted with x 8 x 2^20 / 10^9 to Gb/s. A half-duplex C(ib_write_bw)/C(ib_read_bw) server prints the
    client's numbers in the client's unit under its own header; the numbers are checked against the message rate
    (bandwidth = message rate x message size) and RV(values_unit) says which unit they were in."
  - "Success is exit code 0 (running) and at least one result row. Rule for the server side of a tool whose server
    prints no result table (C(ib_read_lat)): success with RV(rows) empty when it exchanged addresses with a client
    (a C(remote address) line), exited 0 and printed no failure line."
  - A measurement changes no host state, so the module never reports C(changed). It supports check mode and runs the
    test in check mode too (read-only traffic between two HCAs); skipping it would return no answer.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  test:
    description:
      - The perftest tool to run, found on the host's PATH (package C(perftest)).
      - Ignored with O(log_path) / O(log_text), where perftest's banner names the test.
    type: str
    choices: [ib_write_bw, ib_write_lat, ib_read_bw, ib_read_lat, ib_send_bw, ib_send_lat]
    default: ib_write_bw
  device:
    description:
      - The HCA to test (perftest C(-d)), for example C(mlx5_0) or C(rocep1s0f0), as C(ibv_devices) lists it.
      - Required to run a test.
    type: str
  ib_port:
    description: The HCA port (perftest C(-i)), 1-255.
    type: int
    default: 1
  gid_index:
    description:
      - The GID index (perftest C(-x)), 0-255. Needed on RoCE, where it selects the RoCE v2 GID with the interface's
        IPv4 address (C(show_gids), M(hpcnet.rdma.rdma_facts)); omitted on InfiniBand (LID routing).
    type: int
  server:
    description:
      - Address of the server side (IP or host name on the management network). Set, this host is the client;
        unset, this host is the server and waits for a client.
    type: str
  port:
    description: The out-of-band TCP port (perftest C(-p)), 1024-65535; the same on both sides.
    type: int
    default: 18515
  size:
    description: Message size in bytes (perftest C(-s)), 1 or more. perftest's default is 65536 (bw) or 2 (lat).
    type: int
  iterations:
    description: Iterations per size (perftest C(-n)), 5-100000000. Exclusive with O(duration).
    type: int
  duration:
    description: Run for this many seconds (perftest C(-D)) instead of a number of iterations.
    type: int
  qps:
    description: Number of queue pairs (perftest C(-q)), 1-16384.
    type: int
    default: 1
  tclass:
    description:
      - The traffic class (ToS byte, C(DSCP << 2 | ECN), 0-255) in the GRH (perftest C(--tclass)); on RoCE it sets the
        DSCP that maps the traffic to a priority (PFC, ECN). Omitted, the HCA's default traffic class applies.
    type: int
  timeout:
    description: Seconds after which the perftest process is killed, 1 or more.
    type: int
    default: 60
  extra_args:
    description:
      - More perftest arguments, one per item, for example C([-a]) or C([--mtu, '4096']). Options the module sets
        (C(-d -i -x -p -s -n -D -q --tclass) and their long forms) are refused here.
    type: list
    elements: str
    default: []
  log_path:
    description:
      - A file holding saved perftest output (stdout and stderr) to parse instead of running a test.
      - Mutually exclusive with O(log_text) and with the options that run a test.
    type: path
  log_text:
    description:
      - Saved perftest output as a string or a list of lines (for example a registered result's C(stdout_lines)).
      - Mutually exclusive with O(log_path) and with the options that run a test.
    type: raw
notes:
  - Supports check mode; the test runs in check mode too (a read-only measurement). C(changed) is always false.
  - Commands run as an argument list, never through a shell, with C(LC_ALL=C).
  - The module always passes C(-F) (do not fail when CPU frequency scaling makes perftest's clock estimates differ)
    and, to the bandwidth tools, C(--report_gbits).
requirements:
  - perftest on the managed host when running a test.
seealso:
  - name: perftest
    description: The RDMA performance tests (ib_write_bw, ib_read_lat, ...).
    link: https://github.com/linux-rdma/perftest
extends_documentation_fragment:
  - hpcnet.rdma.attributes.read_only
'''

EXAMPLES = r'''
- name: Start the server side of ib_write_bw on mlx5_0 (RoCE, GID index 3), in the background
  hpcnet.rdma.perftest:
    test: ib_write_bw
    device: mlx5_0
    gid_index: 3
    size: 1048576
    iterations: 5000
    timeout: 60
  async: 90
  poll: 0
  register: server_job

- name: Run the client side against the server's management address
  hpcnet.rdma.perftest:
    test: ib_write_bw
    device: mlx5_0
    gid_index: 3
    server: 10.0.0.11
    size: 1048576
    iterations: 5000
    tclass: 106
  register: bw

- name: Show the bandwidth of the largest message
  ansible.builtin.debug:
    msg: "{{ bw.summary.bw_avg_gbps }} Gb/s over {{ bw.header.device }} (MTU {{ bw.header.mtu }})"

- name: Parse a perftest output saved on the host
  hpcnet.rdma.perftest:
    log_path: /tmp/ib_write_bw.out
  register: saved
'''

RETURN = r'''
cmd:
  description: The argv the module ran (empty with O(log_path) / O(log_text)).
  returned: always
  type: list
  elements: str
  sample: [/usr/bin/ib_write_bw, -d, mlx5_0, -i, "1", -x, "3", -p, "18515", -s, "1048576", -q, "1", --report_gbits, -F, 10.0.0.11]
rc:
  description:
    - perftest's exit code (negative when killed by a signal).
    - Not returned for saved output (O(log_path), O(log_text)); Ansible takes a result with an C(rc) other than 0 for
      a failure.
  returned: when the module ran perftest
  type: int
timed_out:
  description: True when the module killed perftest after O(timeout) seconds.
  returned: always
  type: bool
test:
  description: The test title from perftest's banner, for example C(RDMA_Write BW Test); null when perftest failed
    before printing it.
  returned: always
  type: str
  sample: RDMA_Write BW Test
tool:
  description: The perftest tool the module ran (O(test)); null for saved output.
  returned: always
  type: str
kind:
  description: C(bw) or C(lat), from the banner (or the table's columns); null without either.
  returned: always
  type: str
bidirectional:
  description: True for a bidirectional (C(-b)) bandwidth test, whose rows are the sum of both directions.
  returned: always
  type: bool
role:
  description: C(server) or C(client) when running; for saved output C(server) when perftest's C(Waiting for
    client to connect) banner is present, else null.
  returned: always
  type: str
header:
  description:
    - "perftest's test parameters (its C(Key : value) lines) in snake_case, typed (ON/OFF as booleans, numbers as
      integers, C([B]) values in bytes)."
    - "Always present when the banner was printed: C(gid_index) (null when no GID line: InfiniBand without -x).
      Usual keys: C(device), C(qps), C(transport), C(connection_type), C(link_type) (C(IB) or C(Ethernet) = RoCE),
      C(mtu) (bytes), C(tx_depth) (client) or C(rx_depth), C(rdma_cm) (bool), C(data_exchange) (C(Ethernet) =
      out-of-band TCP, or C(rdma_cm)), C(cq_moderation), C(max_inline_bytes), C(outstanding_reads) (read tests),
      C(dual_port), C(srq), C(pcie_relax_order), C(ibv_wr_api), and newer ones such as C(lock_free), C(using_ddp),
      C(cqe_poll_batch)."
  returned: always
  type: dict
  sample: {device: mlx5_0, qps: 1, transport: IB, connection_type: RC, link_type: Ethernet, gid_index: 5, mtu: 1024,
           tx_depth: 128, rdma_cm: false, data_exchange: Ethernet}
local:
  description: This side's QP addresses (one per QP) from perftest's C(local address) lines. C(lid), C(qpn), C(psn),
    C(out_reads) are integers; C(rkey), C(vaddr), C(srqn) as printed; C(gid) in the sysfs form
    (C(0000:...:ffff:0a00:000b)), C(gid_ipv4) for an IPv4-mapped GID, C(gid_printed) as perftest printed it.
  returned: always
  type: list
  elements: dict
remote:
  description: The peer's QP addresses (same keys as RV(local)).
  returned: always
  type: list
  elements: dict
unit:
  description: The bandwidth unit as the table header printed it (C(Gb/sec), C(MB/sec), C(MiB/sec)); null for
    latency tests.
  returned: always
  type: str
values_unit:
  description: The unit the bandwidth numbers are really in (differs from RV(unit) on a half-duplex server whose
    client used another unit; a warning says so).
  returned: always
  type: str
columns:
  description: The table's column names as perftest printed them.
  returned: always
  type: list
  elements: str
rows:
  description:
    - The result rows (named so because C(results) is the key Ansible reserves for a loop's results).
    - Bandwidth tests - C(bytes), C(iterations), C(bw_peak_gbps), C(bw_avg_gbps) (Gb/s, 10^9 bit/s),
      C(msg_rate_mpps), and C(bw_peak)/C(bw_avg) as printed (in RV(values_unit)). Latency tests - C(bytes),
      C(iterations), C(t_min_us), C(t_max_us), C(t_typical_us), C(t_avg_us), C(t_stdev_us), C(p99_us), C(p99_9_us)
      (microseconds; the columns the header names, for example only C(t_avg_us) with C(-D)).
    - Per-port (C(bw_port1_gbps)...), C(sl) and C(cpu_util_pct) columns appear when perftest prints them.
  returned: always
  type: list
  elements: dict
  sample: [{bytes: 65536, iterations: 5000, bw_peak: 92.39, bw_peak_gbps: 92.39, bw_avg: 92.38, bw_avg_gbps: 92.38,
            msg_rate_mpps: 0.176196}]
summary:
  description: The largest-message row - bandwidth C(bytes), C(bw_avg_gbps), C(bw_peak_gbps), C(msg_rate_mpps);
    latency C(bytes), C(t_typical_us), C(t_avg_us), C(p99_us). Empty without a row.
  returned: always
  type: dict
perftest_warnings:
  description:
    - perftest's notices (C(WARNING - BW peak won't be measured in this run.), C(Conflicting CPU frequency values
      detected...), MTU and inline adjustments) and the module's unit remark.
    - Named so because C(warnings) is Ansible's own return key (shown as task warnings, not kept in the result).
  returned: always
  type: list
  elements: str
errors:
  description: perftest's failure lines the module recognised.
  returned: always
  type: list
  elements: str
failure:
  description: When the module fails - C(kind) (for example C(no_device), C(device_not_found), C(port_not_active),
    C(server_not_listening), C(port_in_use), C(qp_connect_failed), C(create_qp_failed), C(rdma_cm_failed),
    C(exchange_failed), C(completion_error), C(timeout), C(no_result)), C(cause), C(fix) and C(evidence) (the
    lines). Null on success.
  returned: always
  type: dict
stdout_lines:
  description: The last 40 lines of perftest's output (stdout and stderr merged).
  returned: always
  type: list
  elements: str
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import perftest_run as pt


def _read_text(module, p):
    if p['log_path'] is not None:
        if not os.path.isfile(p['log_path']):
            module.fail_json(msg='log_path %s: %s' % (p['log_path'], 'not a regular file' if os.path.exists(p['log_path'])
                                                      else 'no such file'), changed=False)
        with open(p['log_path'], 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    text = p['log_text']
    if isinstance(text, (list, tuple)):
        return '\n'.join('' if x is None else str(x) for x in text)
    if not isinstance(text, str):
        module.fail_json(msg='log_text: give the output as a string or a list of lines, got %s' % type(text).__name__,
                         changed=False)
    return text


def _run(module, p):
    binary = module.get_bin_path(p['test'], required=False)
    if not binary:
        module.fail_json(msg='%s: not found on this host (install perftest)' % p['test'], changed=False, cmd=[])
    if p['server'] is None:
        busy = pt.port_in_use(p['port'])
        if busy:
            module.fail_json(msg='port: %s; a perftest server needs it free (stop what listens there or choose another '
                                 'port)' % busy, changed=False, cmd=[],
                             failure={'kind': 'port_in_use', 'cause': busy, 'fix': 'choose another port', 'evidence': []})
    argv = pt.build_argv(binary, p['device'], p['ib_port'], p['gid_index'], p['server'], p['port'], p['size'],
                         p['iterations'], p['duration'], p['qps'], p['tclass'], True, p['extra_args'])
    done = pt.run(argv, p['timeout'])
    if done['error']:
        module.fail_json(msg=done['error'], changed=False, cmd=argv, rc=done['rc'])
    return argv, done


def main():
    module = AnsibleModule(
        argument_spec=dict(
            test=dict(type='str', default='ib_write_bw', choices=list(pt.TESTS)),
            device=dict(type='str'), ib_port=dict(type='int', default=1), gid_index=dict(type='int'),
            server=dict(type='str'), port=dict(type='int', default=18515), size=dict(type='int'),
            iterations=dict(type='int'), duration=dict(type='int'), qps=dict(type='int', default=1),
            tclass=dict(type='int'), timeout=dict(type='int', default=60),
            extra_args=dict(type='list', elements='str', default=[]),
            log_path=dict(type='path'), log_text=dict(type='raw'),
        ),
        mutually_exclusive=[('log_path', 'log_text')],
        supports_check_mode=True,
    )
    p = module.params
    problem = pt.validate(p)
    if problem:
        module.fail_json(msg=problem, changed=False)
    if p['log_path'] is not None or p['log_text'] is not None:
        cmd, tool, done = [], None, {'rc': None, 'output': _read_text(module, p), 'timed_out': False}
    else:
        cmd, done = _run(module, p)
        tool = p['test']
    failed, msg, result = pt.evaluate(done['output'], done['rc'], done['timed_out'], tool=tool,
                                      is_server=None if tool is None else p['server'] is None, timeout=p['timeout'])
    result.update(cmd=cmd, tool=tool, changed=False)
    if failed:
        module.fail_json(msg=msg, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
