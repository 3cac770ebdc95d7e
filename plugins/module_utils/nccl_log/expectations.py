# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Expectations on an analysis (transport, link layer, GDR, HCAs, no fallback) and the message of each unmet one:
what NCCL did, the evidence lines, the likely cause and the fix."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import RdmaSysfs, SysfsError, select_roce_v2_ipv4_gid_index


def _quote(result, kinds, limit=3):
    lines = []
    for kind in kinds:
        for ev in result.get('evidence', {}).get(kind, []):
            quote = "line %s: '%s'" % (ev['line'], ev['text'])
            if quote in lines:
                continue
            lines.append(quote)
            if len(lines) >= limit:
                return '; '.join(lines)
    return '; '.join(lines) if lines else 'no line of the log shows it'


def _transport_matches(expected, got):
    if got is None:
        return False
    exp = expected.strip()
    if exp.lower() in ('ib', 'socket'):
        return got.lower() == exp.lower()
    if exp.lower().startswith('plugin:'):
        exp = exp[7:]
    if not got.startswith('plugin:'):
        return False
    name, exp = got[7:].lower(), exp.lower()
    if 'libfabric' in name and exp in ('libfabric', 'aws libfabric', 'ofi', 'aws-ofi-nccl'):
        return True     # aws-ofi-nccl calls its network "AWS Libfabric" in older releases, "Libfabric" in newer ones
    return name == exp or (re.match(r'^' + re.escape(exp) + r'_v\d+$', name) is not None)


def roce_v2_ipv4_gid_index(sysfs_root, hca, port):
    """Index of the RoCE v2 IPv4-mapped GID of ``hca`` ``port`` under ``sysfs_root`` (None when not found).

    Read with the same sysfs reader and selection rule as rdma_facts (``roce_v2_ipv4_gid_index``), so a hint quotes
    exactly what nccl.conf would get.
    """
    pdir = os.path.join(sysfs_root, 'class', 'infiniband', hca, 'ports', str(port))
    try:
        gids = RdmaSysfs(sysfs_root).read_gids(pdir)
    except SysfsError:
        return None
    return select_roce_v2_ipv4_gid_index(gids)


def _gid_hints(result, sysfs_root):
    hints = []
    for g in result.get('gid') or []:
        if g['kind'] == 'link-local':
            hca = g.get('hca') or 'NCCL device %s' % g['dev']
            v2 = roce_v2_ipv4_gid_index(sysfs_root, g['hca'], g['port']) if (sysfs_root and g.get('hca')) else None
            sysfs_name = g.get('hca') or '<hca>'
            where = ('the RoCE v2 IPv4 GID on %s port %s is index %d' % (hca, g['port'], v2) if v2 is not None else
                     'use the RoCE v2 IPv4-mapped GID index of %s port %s (commonly 3; see show_gids or '
                     '/sys/class/infiniband/%s/ports/%s/gid_attrs/types/)' % (hca, g['port'], sysfs_name, g['port']))
            hints.append('NCCL_IB_GID_INDEX=%s selects a link-local RoCE v1 GID (fe80::, line %s); %s'
                         % (g['gid_index'], g['line'], where))
    for e in result.get('errors', []):
        if e['category'] in ('QP', 'GID', 'completion') and not e.get('inferred'):
            hints.append("line %s: '%s' - %s" % (e['line'], e['text'], e.get('meaning') or e['category']))
    return hints


_TCP_PROVIDER = re.compile(r'(?:^|;)(?:tcp|sockets|udp)\b')


def tcp_providers(result):
    """The libfabric providers of aws-ofi-nccl in ``result`` that run over TCP (tcp;ofi_rxm, sockets, udp), not EFA/RDMA."""
    prov = result.get('plugin_provider')
    return [p for p in ([prov] if isinstance(prov, str) else list(prov or [])) if _TCP_PROVIDER.search(p)]


def check_expectations(result, expect_transport=None, expect_link_layer=None, expect_gdr=None, expect_hcas=None,
                       forbid_fallback=False, sysfs_root='/sys'):
    """Return a list of messages, one per unmet expectation (empty when all are met), then the GID hints."""
    findings = []
    if expect_transport:
        findings.extend(_transport_findings(result, expect_transport))
    if expect_link_layer:
        findings.extend(_link_layer_findings(result, expect_link_layer, sysfs_root))
    if expect_gdr is not None:
        findings.extend(_gdr_findings(result, expect_gdr))
    if expect_hcas:
        findings.extend(_hca_findings(result, expect_hcas))
    if forbid_fallback:
        findings.extend(_fallback_findings(result))
    if findings:
        findings.extend(h for h in _gid_hints(result, sysfs_root) if h not in findings)
    return findings


def _transport_findings(result, expect_transport):
    """The transport NCCL selected is not ``expect_transport``, on any process."""
    findings = []
    per = result.get('per_host') or {}
    bad = dict((k, v['net_transport']) for k, v in per.items()
               if v['net_transport'] is not None and not _transport_matches(expect_transport, v['net_transport']))
    got = result.get('net_transport')
    if got is None and not bad and result.get('multi_node') is False:
        findings.append('expected transport %s but this is a single-node job: NCCL moved data between GPUs with %s and '
                        'used no network transport; run across two or more nodes to test it'
                        % (expect_transport, ', '.join(result.get('intra_node') or []) or 'intra-node transports'))
    elif got is None and not bad:
        findings.append('expected transport %s but the log does not show which transport NCCL selected (no '
                        '"Using network", device list or "via NET/..." line): run with NCCL_DEBUG=INFO and keep the '
                        'init output' % expect_transport)
    elif bad or not _transport_matches(expect_transport, got):
        msg = 'expected transport %s but NCCL selected %s' % (expect_transport, ', '.join(sorted(set(bad.values()))) or got)
        if bad:
            msg += ' on %s' % ', '.join(sorted(bad)[:5]) + (' and %d more' % (len(bad) - 5) if len(bad) > 5 else '')
        msg += ' (evidence: %s)' % _quote(result, ('hop', 'selection', 'socket', 'ib_probe', 'plugin'))
        msg += _transport_cause(result, expect_transport, got, bad)
        findings.append(msg)
    return findings


def _transport_cause(result, expect_transport, got, bad):
    """The likely cause of NCCL selecting ``got`` (``bad``: the processes on another transport) when ``expect_transport``
    was expected, or ''."""
    want = expect_transport.lower()
    fell_back = (got == 'Socket' or 'Socket' in bad.values()) and want != 'socket'
    ib_missing = any('libibverbs' in e.get('text', '') for e in result.get('errors') or []) or any(
        'libibverbs' in ev.get('text', '') for ev in (result.get('evidence') or {}).get('ib_probe', []))
    if fell_back and ib_missing:
        return ('. Cause: libibverbs could not be loaded (%s): install the rdma-core user space (libibverbs1 / '
                'rdma-core, or DOCA-OFED) in the image or on the host' % _quote(result, ('ib_probe',), 1))
    if fell_back and result.get('ib_disabled_by_env'):
        return '. Cause: NCCL_IB_DISABLE=1 is set (echoed in the log); unset it or set it to 0'
    if fell_back:
        return ('. Likely cause: NCCL found no usable RDMA device (%s); check that the HCAs are visible in the '
                'container (/dev/infiniband, /sys/class/infiniband), NCCL_IB_DISABLE is unset, NCCL_IB_HCA matches '
                'real device names and, for RoCE, NCCL_IB_GID_INDEX points at a RoCE v2 GID'
                % _quote(result, ('ib_probe',), 2))
    if want == 'socket' and got and got != 'Socket':
        return ('. NCCL found a usable RDMA network and preferred it; to force TCP sockets set NCCL_NET=Socket '
                '(or NCCL_IB_DISABLE=1 for the built-in IB transport)')
    if want == 'ib' and got and got.startswith('plugin:'):
        return ('. Likely cause: an external net plugin (libnccl-net.so, e.g. HPC-X) was loaded and took '
                'precedence; set NCCL_NET=IB or NCCL_NET_PLUGIN=none to use the built-in verbs transport')
    if got and got.startswith('plugin:') is False and want not in ('ib', 'socket'):
        return ('. Likely cause: the plugin %s was not found or failed to initialise; check NCCL_NET_PLUGIN / '
                'LD_LIBRARY_PATH and the plugin\'s own WARN lines' % expect_transport)
    return ''


def _link_layer_findings(result, expect_link_layer, sysfs_root):
    """An HCA NCCL listed is not on ``expect_link_layer``; on RoCE, a link-local GID."""
    findings = []
    devs = result.get('ib_devices') or []
    if not devs:
        findings.append('expected link layer %s but NCCL listed no HCA (no "NET/IB : Using [n]hca:port/LL" line)'
                        % expect_link_layer)
    else:
        wrong = ['%s:%s/%s' % (d['name'], d['port'], d['link_layer']) for d in devs if d['link_layer'] != expect_link_layer]
        right = ['%s:%s' % (d['name'], d['port']) for d in devs if d['link_layer'] == expect_link_layer]
        if wrong:
            if right:
                fix = ('NCCL_IB_HCA includes ports of the other fabric; keep only the %s ports with an exact match: '
                       'NCCL_IB_HCA="=%s"' % (expect_link_layer, ','.join(right)))
            else:
                fix = ('no port NCCL listed is %s: check the port link type (mlxconfig LINK_TYPE_P1, ibv_devinfo '
                       'link_layer) or the expectation' % expect_link_layer)
            findings.append('expected link layer %s but NCCL lists %s (evidence: %s). %s'
                            % (expect_link_layer, ', '.join(wrong), _quote(result, ('ib_devices',), 2), fix))
    if expect_link_layer == 'RoCE':
        findings.extend(h for h in _gid_hints(result, sysfs_root) if h.startswith('NCCL_IB_GID_INDEX='))
    return findings


def _gdr_findings(result, expect_gdr):
    """GPUDirect RDMA is not as expected, or the log does not show it."""
    findings = []
    gdr = result.get('gdr')
    if gdr is None:
        findings.append('expected GPUDirect RDMA %s but the log shows no network connection line ("via NET/...") '
                        'nor a "GPU Direct RDMA" line: run a collective that spans nodes (connections are made at '
                        'the first one) and keep the INIT subsystem in NCCL_DEBUG_SUBSYS' % ('on' if expect_gdr else 'off'))
    elif gdr != expect_gdr and expect_gdr and result.get('net_transport') == 'Socket':
        findings.append('expected GPUDirect RDMA on, but NCCL moved data over TCP sockets, which have no GPUDirect RDMA: '
                        'fix the socket fallback first (evidence: %s)' % _quote(result, ('selection', 'hop', 'socket', 'ib_probe'), 2))
    elif gdr != expect_gdr and expect_gdr and result.get('mismatch'):
        findings.append('expected GPUDirect RDMA on, but processes chose different transports (%s), and GPUDirect '
                        'RDMA needs the RDMA one: fix the processes that are not on it first (see per_host)'
                        % ', '.join(result.get('net_transports') or []))
    elif gdr != expect_gdr:
        if expect_gdr:
            findings.append('GPUDirect RDMA disabled: load nvidia_peermem (modprobe nvidia_peermem; or nv_peer_mem on '
                            'older drivers, or use DMA-BUF with a 5.12+ kernel and NCCL 2.13+), and check '
                            'NCCL_NET_GDR_LEVEL and the GPU-NIC PCIe distance (evidence: %s)' % _quote(result, ('gdr', 'hop')))
        else:
            findings.append('expected GPUDirect RDMA off but NCCL uses it (evidence: %s); to turn it off set '
                            'NCCL_NET_GDR_LEVEL=LOC (or NCCL_NET_GDR_READ=0 for reads only)' % _quote(result, ('gdr',)))
    return findings


def _hca_findings(result, expect_hcas):
    """An HCA (name or name:port) of ``expect_hcas`` is not in NCCL's device list."""
    findings = []
    names = set(d['name'] for d in result.get('ib_devices') or [])
    ports = set('%s:%s' % (d['name'], d['port']) for d in result.get('ib_devices') or [])
    wanted = [h for item in expect_hcas for h in re.split(r'[,\s]+', item.strip().lstrip('=^')) if h]
    missing = [h for h in wanted if h not in (ports if ':' in h else names)]
    if missing:
        if result.get('ib_disabled_by_env'):
            why = 'NCCL_IB_DISABLE=1 is set, so NCCL lists no HCA'
        elif any('libibverbs' in e.get('text', '') for e in result.get('errors') or []):
            why = 'libibverbs could not be loaded, so NCCL sees no HCA (install rdma-core)'
        else:
            why = 'NCCL_IB_HCA excludes them, the port is down, or the device is not visible to the process'
        listed = sorted(ports) if any(':' in h for h in missing) else sorted(names)
        findings.append('expected HCAs %s but NCCL listed %s (evidence: %s). Likely cause: %s'
                        % (', '.join(missing), ', '.join(listed) or 'none', _quote(result, ('ib_devices', 'ib_probe'), 2),
                           why))
    return findings


def _fallback_findings(result):
    """NCCL fell back to sockets, some processes did, or aws-ofi-nccl runs over TCP."""
    findings = []
    per = result.get('per_host') or {}
    tcp = tcp_providers(result)
    if tcp:
        findings.append('aws-ofi-nccl runs on the libfabric provider %s, which is TCP, not EFA/RDMA (evidence: %s). '
                        'Likely cause: the EFA device or its driver is not visible to the process (FI_PROVIDER, '
                        '/dev/infiniband/uverbs*, the efa kernel module, the security group)'
                        % (', '.join(tcp), _quote(result, ('plugin',), 2)))
    if result.get('fallback_to_socket'):
        findings.append('NCCL fell back to sockets: %s. Likely cause: no usable RDMA device for NCCL - driver or '
                        'rdma-core missing in the container, /dev/infiniband not mounted, a wrong NCCL_IB_HCA filter, '
                        'or for an IB plugin (HPC-X IBext) no port in ACTIVE state'
                        % _quote(result, ('ib_probe', 'plugin', 'socket', 'selection', 'hop'), 4))
    elif result.get('mismatch') and 'Socket' in (result.get('net_transports') or []):
        findings.append('some processes use Socket while others use %s: %s' % (
            ', '.join(t for t in result['net_transports'] if t != 'Socket'),
            ', '.join('%s=%s' % (k, v['net_transport']) for k, v in sorted(per.items()) if v['net_transport'])[:500]))
    return findings


# The module's expectation inputs, checked before any log is read
def expect_transport_problem(value):
    """Return an error for an expect_transport value that names a link layer or protocol instead of an NCCL network."""
    if value is None:
        return None
    allowed = '(allowed: IB, Socket, or a net plugin name such as IBext or plugin:IBext_v8)'
    name = value.strip()
    if not (name[7:] if name.startswith('plugin:') else name).strip():
        return 'expect_transport=%r names no network %s' % (value, allowed)
    if name.lower() == 'plugin:ib':
        return 'expect_transport=%s: IB is NCCL\'s built-in transport (2.27+ calls it a plugin): use expect_transport=IB' % value
    if name.startswith('NET/'):
        return ('expect_transport=%s: give the network name NCCL prints after "NET/" (%s) %s'
                % (value, name[4:].split('/')[0] or 'IB', allowed))
    if not re.match(r'^[\w.:\- ]+$', name) or not re.match(r'^(?:plugin:)?\s*[A-Za-z]', name):
        return 'expect_transport=%r is not a network name %s' % (value, allowed)
    words = {
        'roce': 'RoCE runs on NCCL\'s built-in IB transport: use expect_transport=IB expect_link_layer=RoCE',
        'infiniband': 'NCCL calls its verbs transport IB: use expect_transport=IB (and expect_link_layer=IB)',
        'tcp': 'NCCL calls its TCP transport Socket: use expect_transport=Socket',
        'sockets': 'NCCL calls its TCP transport Socket: use expect_transport=Socket',
        'gdr': 'GPUDirect RDMA is not a transport: use expect_gdr=true',
        'gdrdma': 'GPUDirect RDMA is not a transport: use expect_gdr=true',
    }
    hint = words.get(value.strip().lower())
    if hint:
        return 'expect_transport=%s: %s (allowed: IB, Socket, or a net plugin name such as IBext or plugin:IBext_v8)' % (value, hint)
    return None


def expect_hcas_problem(hcas):
    """A message when an expect_hcas item is not an HCA name or name:port, else None."""
    for item in hcas or []:
        text = '' if item is None else str(item).strip()
        if text.startswith('^'):
            return ('expect_hcas=%r: list the HCAs NCCL must use; the "^" exclude syntax of NCCL_IB_HCA is not an expectation'
                    % item)
        parts = [x for x in re.split(r'[,\s]+', text.lstrip('=')) if x]
        if not parts or not all(re.match(r'^[A-Za-z][\w.\-]*(?::\d+)?$', x) for x in parts):
            return ('expect_hcas=%r: give HCA names or name:port (mlx5_0, mlx5_0:1; NCCL_IB_HCA\'s "=" prefix is allowed)'
                    % item)
    return None
