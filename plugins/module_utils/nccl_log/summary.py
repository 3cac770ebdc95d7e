# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The summariser: turns the evidence of every process into the public result (transport per process and overall,
fallback to sockets, multi_node, GDR, plugin, GIDs, inferred errors, per_host)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.expectations import tcp_providers
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.network import _LOOPBACK_IFACES


def _vtuple(version):
    try:
        parts = version.split('.')
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError, AttributeError):
        return None


def transport_label(name):
    """Map a network name as NCCL prints it to the public value: IB, Socket or plugin:<name>."""
    if name is None:
        return None
    name = name.strip()
    if name == 'IB':
        return 'IB'
    if name == 'Socket':
        return 'Socket'
    return 'plugin:' + name


class Summariser:
    """Turns the collected per-process evidence into the public result."""

    def __init__(self, an):
        self.an = an
        self.procs = list(an.procs.values())
        self.ofi_name = self._ofi_name()

    def _ofi_name(self):
        # The aws-ofi-nccl network name as NCCL printed it anywhere in the log ("AWS Libfabric" in older plugin
        # releases, "Libfabric" in newer ones).  When the log never prints it, the long-standing name is used.
        for p in self.procs:
            for cand in [p.selected] + list(p.hop_nets):
                if cand and cand.startswith('name:'):
                    cand = cand[5:]
                if cand and ('Libfabric' in cand or 'OFI' in cand):
                    return cand
        if any(p.ofi_modern for p in self.procs):
            return None     # a plugin release that names itself "Libfabric" or "AWS Libfabric": not printed, unknown
        return 'AWS Libfabric'

    def proc_transport(self, p, version):
        nets = [n for n in p.hop_nets if not n.startswith('name:')]
        if nets:
            best = max(nets, key=lambda n: p.hop_nets[n])
            return transport_label(best)
        if p.selected:
            return transport_label(p.selected)
        if p.ofi and self.ofi_name:
            return transport_label(self.ofi_name)
        if p.ib_devices:
            if p.p2p_plugin:
                return transport_label(p.p2p_plugin)
            return 'IB'
        if p.ib_datapath_line is not None and p.socket_datapath_line is None:
            # Only NCCL's own verbs transport (transport/net_ib*) prints this completion WARN: it carried data.
            return 'IB'
        if p.socket_init_line is not None:
            vt = _vtuple(version) if version else None
            if p.ib_probe_line is not None or (p.bootstrap and (vt is None or vt >= (2, 5))) or (vt is not None and vt >= (2, 5)):
                return 'Socket'
        if p.socket_datapath_line is not None and p.ib_datapath_line is None:
            return 'Socket'     # only NCCL's socket transport (transport/net_socket*) prints this WARN
        if p.net_code is not None:
            # Weakest evidence: an error returned through NCCL's own network code (transport/net_ib*.cc:N -> 2,
            # transport/net_socket.cc:N -> 3) shows which transport was connecting.
            return p.net_code[0]
        return None

    def summary(self):
        an = self.an
        versions = sorted(an.versions, key=lambda v: [int(x) for x in v.split('.')])
        global_version = versions[0] if len(versions) == 1 else None
        per = {}
        host_ranks = {}
        host_devs = {}
        host_procs = {}
        for p in self.procs:
            pv = sorted(p.versions)[0] if len(p.versions) == 1 else global_version
            t = self.proc_transport(p, pv)
            entry = {
                'host': p.host,
                'pid': p.pid,
                'nccl_version': sorted(p.versions)[0] if len(p.versions) == 1 else (sorted(p.versions) or None),
                'net_transport': t,
                'ib_devices': [_pub_dev(d) for d in p.ib_devices],
                'gdr': _proc_gdr(p),
                'collnet': p.collnet,
                'nvls': self._proc_nvls(p),
                'intra_node': list(p.intra),
                'ranks': sorted(p.own_ranks)[:64],
                'env': dict(p.env),
            }
            if p.ofi_provider:
                entry['plugin_provider'] = p.ofi_provider
            per[p.key] = entry
            if p.host:
                host_ranks.setdefault(p.host, set()).update(p.own_ranks)
                host_devs.setdefault(p.host, 0)
                host_devs[p.host] += max(1, len(p.devs))
                host_procs.setdefault(p.host, []).append(p)
        for rank, (host, _pid, _dev) in an.tests_ranks.items():
            host_ranks.setdefault(host, set()).add(rank)

        transports = {}
        for key, e in per.items():
            if e['net_transport']:
                transports.setdefault(e['net_transport'], []).append(key)
        net_transport = None
        if len(transports) == 1:
            net_transport = list(transports)[0]
        elif transports:
            net_transport = max(transports, key=lambda k: len(transports[k]))

        ib_devices = []
        seen = set()
        for p in self.procs:
            for d in p.ib_devices:
                k = (d['name'], d['port'])
                if k not in seen:
                    seen.add(k)
                    ib_devices.append(_pub_dev(d))

        gdr_vals = [e['gdr'] for e in per.values() if e['gdr'] is not None]
        gdr = None
        if gdr_vals:
            gdr = all(gdr_vals)
        nvls_vals = [e['nvls'] for e in per.values() if e['nvls'] is not None]
        nvls = True if True in nvls_vals else (False if nvls_vals else None)
        if nvls is None and an.env.get('NCCL_NVLS_ENABLE') == '0':
            nvls = False        # disabled by the environment and no NVLS connection printed
        col_vals = [e['collnet'] for e in per.values() if e['collnet'] is not None]
        collnet = True if True in col_vals else (False if col_vals else None)

        intra = []
        multi_node, machines = self._multi_node(host_ranks, host_devs, host_procs)
        comm_local = self._comm_local_ranks()
        for p in self.procs:
            for label in p.intra:
                if label not in intra:
                    intra.append(label)
            # NET hops whose peer lives in the same process/host: loopback through the NIC.  (Not for lines without a
            # process prefix: they may come from several machines.)
            if p.host is None:
                continue
            for label in self._net_loopback(p, host_ranks.get(p.host, set()), comm_local):
                if label not in intra:
                    intra.append(label)

        env = dict(an.env)
        ib_disabled = env.get('NCCL_IB_DISABLE') == '1'
        fallback = self._fallback(per, net_transport, ib_disabled)

        errors = list(an.errors.values())
        for e in errors:
            if not e['hosts']:
                del e['hosts']
        errors.extend(self._inferred(per, transports, net_transport, multi_node))

        result = {
            'nccl_version': versions[0] if len(versions) == 1 else (versions or None),
            'nccl_versions': versions,
            'net_transport': net_transport,
            'net_transports': sorted(transports),
            'ib_devices': ib_devices,
            'gdr': gdr,
            'collnet': collnet,
            'nvls': nvls,
            'intra_node': intra,
            'multi_node': multi_node,
            'fallback_to_socket': fallback,
            'errors': errors,
            'env': env,
            'ib_disabled_by_env': True if ib_disabled else (False if 'NCCL_IB_DISABLE' in env else None),
            'per_host': per,
            'hosts': sorted(host_procs),
            'machines': machines,
            'processes': len([p for p in self.procs if p.host]),
            'ranks': self._nranks(),
            'communicators': self._communicators(),
            'plugin': self._plugin(),
            'gid': self._gids(),
            'busbw': self._busbw(),
            'evidence': an.evidence,
            'lines': an.lineno,
            'nccl_lines': an.nccl_lines,
        }
        if an.errors_dropped:
            result['errors_dropped'] = an.errors_dropped
        providers = sorted(set(p.ofi_provider for p in self.procs if p.ofi_provider))
        if providers:
            result['plugin_provider'] = providers[0] if len(providers) == 1 else providers
        result['mismatch'] = len(transports) > 1
        return result

    # -- helpers
    def _proc_nvls(self, p):
        """NVLS of one process: false when NCCL_ALGO leaves no NVLS algorithm (2.18-2.21 set NVLS buffers up at init
        even then; no collective runs on them), else used when a buffer was set up or a tree connected, else false
        when NCCL said it is off, else null (capacity alone - channels, heads - is not use)."""
        algo = p.env.get('NCCL_ALGO') or self.an.env.get('NCCL_ALGO')
        if algo is not None and not algo_allows_nvls(algo):
            return False
        return p.nvls

    def _comm_local_ranks(self):
        """{(host, communicator identity): the ranks of that communicator that the host's processes show}."""
        local = {}
        for p in self.procs:
            if p.host is None:
                continue
            for comm in p.comms.values():
                local.setdefault((p.host, comm.identity()), set()).update(comm.shown_ranks())
        return local

    def _net_loopback(self, p, host_local, comm_local):
        """The NET/<name> labels of network connections of ``p`` whose peer is a rank of the same host: in the
        communicator of the thread that printed them when it is known (ranks are per communicator), else among every
        rank the host shows."""
        labels = []
        keyed = set()
        tests = self.an.tests_ranks
        for comm in p.comms.values():
            if not comm.peers:
                continue
            keyed.update(comm.peers)
            local = comm_local.get((p.host, comm.identity()), comm.shown_ranks())
            if tests and comm.nranks == len(tests):        # nccl-tests' rank table: its communicator's ranks by host
                local = local | set(r for r, (host, _pid, _dev) in tests.items() if host == p.host)
            labels.extend('NET/' + name for peer, name in comm.peers if peer in local)
        for peer, name in p.net_peers:
            if (peer, name) not in keyed and (peer in host_local or peer in p.own_ranks):
                labels.append('NET/' + name)
        return labels

    def _communicators(self):
        """Each communicator each process printed (its pointer, rank and size; node count, commId, the function that
        made it, when printed), at most MAX_PUBLIC_COMMS."""
        out = []
        for p in self.procs:
            for comm in p.comms.values():
                if len(out) >= MAX_PUBLIC_COMMS:
                    return out
                out.append(comm.public(p))
        return out

    def _nranks(self):
        vals = [p.nranks for p in self.procs if p.nranks]
        if self.an.tests_ranks:
            vals.append(len(self.an.tests_ranks))
        return max(vals) if vals else None

    def _machines(self, host_procs):
        hosts = set(host_procs)
        hosts.update(h for h, _p, _d in self.an.tests_ranks.values())
        count = 0
        for host in hosts:
            per_iface = {}
            for p in host_procs.get(host, []):
                for iface, ips in p.ifaces.items():
                    if iface in _LOOPBACK_IFACES:
                        continue
                    per_iface.setdefault(iface, set()).update(ips)
            count += max([1] + [len(v) for v in per_iface.values()])
        return count

    def _multi_node(self, host_ranks, host_devs, host_procs):
        machines = self._machines(host_procs)
        if machines >= 2:
            return True, machines
        comms = [c for p in self.procs for c in p.comm_nodes]
        if any(nodes > 1 for _n, nodes in comms):
            return True, machines       # NCCL's own count of the nodes of a communicator
        single_comm = bool(comms) and max(comms)[1] == 1     # the largest communicator printed has one node
        for p in self.procs:
            if p.tree_internode:
                return True, machines
            local = host_ranks.get(p.host, set()) if p.host else p.own_ranks
            if p.net_same_gpu and not single_comm and any(
                    peer not in local for peer in p.net_same_gpu):
                return True, machines       # one machine has one GPU of each busId / NVML index
            # A network hop to a rank this host does not show means another node when the same process also shows
            # P2P, SHM or NVLS connections and the log does not show P2P or SHM disabled: its node's GPUs are then
            # reached without the NIC.  A hop alone proves nothing: NCCL also loops through the NIC inside one node
            # with P2P/SHM off (shared fixture 12) or when the topology makes the NIC path faster.
            if p.net_peers and not self._intra_disabled(p) and any(
                    label.startswith(('P2P', 'SHM', 'NVLS')) for label in p.intra):
                if any(peer not in local for peer, _name in p.net_peers):
                    return True, machines
        if machines != 1:
            return None, machines
        host = list(host_ranks)[0] if len(host_ranks) == 1 else (list(host_procs)[0] if host_procs else None)
        local = host_ranks.get(host, set())
        nranks = self._nranks()
        if comms and max(n for n, _nodes in comms) >= (nranks or 0):
            return False, machines      # the largest communicator printed has nNodes 1
        if nranks:
            if len(local) >= nranks or host_devs.get(host, 0) >= nranks and len(host_procs.get(host, [])) >= nranks:
                return False, machines
            if nranks <= len(local) and all(r in local for r in range(nranks)):
                return False, machines
            return None, machines
        if any(p.loopback_bootstrap for p in host_procs.get(host, [])):
            return False, machines
        if len(local) >= 2 and 0 in local and not any(p.net_code for p in self.procs):
            # Ranks 0 and more on this one machine, and either network hops that all stay on it (NIC loopback
            # closing the rings) or NCCL's duplicate-GPU check, which compares ranks of one host.
            hops = [peer for p in self.procs for peer, _name in p.net_peers]
            if (hops and all(peer in local for peer in hops)) or any(
                    e['category'] == 'duplicate GPU' for e in self.an.errors.values()):
                return False, machines
        return None, machines

    def _intra_disabled(self, p):
        """Does the log show P2P or SHM disabled for process ``p`` (NCCL_P2P_DISABLE / NCCL_SHM_DISABLE = 1)?"""
        return any((p.env.get(name) or self.an.env.get(name)) == '1' for name in ('NCCL_P2P_DISABLE', 'NCCL_SHM_DISABLE'))

    def _fallback(self, per, net_transport, ib_disabled):
        if net_transport is None:
            # aws-ofi-nccl chose a libfabric provider: the plugin carries the data even when its name is not printed.
            return False if any(p.ofi_provider for p in self.procs) else None
        socket_procs = [p for p in self.procs if per[p.key]['net_transport'] == 'Socket']
        if not socket_procs:
            return False
        hosts = set(p.host for p in socket_procs)
        for p in self.procs:
            if p.host in hosts or p.host is None:
                if p.ib_probe_line is not None:
                    return True
                plug = p.p2p_plugin or (p.plugin_loaded[0] if p.plugin_loaded else '')
                if plug and plug.startswith('IB') and per[p.key]['net_transport'] in (None, 'Socket'):
                    return True
        if ib_disabled:
            return False
        if any(p.socket_init_line is not None for p in socket_procs):
            return False
        return None

    def _inferred(self, per, transports, net_transport, multi_node):
        out = []
        if len(transports) > 1:
            parts = ['%s on %s' % (t, ', '.join(sorted(keys)[:4]) + (' ...' if len(keys) > 4 else ''))
                     for t, keys in sorted(transports.items())]
            out.append({'line': None, 'category': 'transport mismatch', 'inferred': True,
                        'text': 'inferred: processes selected different network transports: ' + '; '.join(parts)})
        # NCCL builds: explicit versions per process, or plugin-loader wording eras.
        ranges = []
        for p in self.procs:
            for v in p.versions:
                vt = _vtuple(v)
                if vt:
                    ranges.append((p.key, (vt, vt), 'NCCL version ' + v))
            for era, _lineno, msg in p.eras[:1]:
                ranges.append((p.key, era, msg))
        disjoint = None
        for i, (k1, r1, m1) in enumerate(ranges):
            for k2, r2, m2 in ranges[i + 1:]:
                if k1 != k2 and (r1[1] < r2[0] or r2[1] < r1[0]):
                    disjoint = (k1, m1, k2, m2)
                    break
            if disjoint:
                break
        if disjoint:
            out.append({'line': None, 'category': 'version mismatch', 'inferred': True,
                        'text': "inferred: processes run different NCCL builds - %s prints '%s', %s prints '%s'" % disjoint})
        if net_transport == 'Socket' and multi_node is not False:
            for p in self.procs:
                loopback = [(i, ip) for i, ip in p.socket_ifaces if i in _LOOPBACK_IFACES or ip.startswith('127.')]
                if loopback and len(loopback) == len(p.socket_ifaces):      # another interface would reach the peers
                    for iface, ip in loopback[:1]:
                        out.append({'line': p.socket_init_line, 'category': 'socket on loopback', 'inferred': True,
                                    'text': 'inferred: the socket transport is bound to %s (%s), which cannot reach other '
                                            'hosts; set NCCL_SOCKET_IFNAME to a routable interface' % (iface, ip)})
                    return out
        return out

    def _plugin(self):
        info = {}
        for p in self.procs:
            if p.plugin_loaded and 'name' not in info:
                info['name'] = p.plugin_loaded[0]
                if p.plugin_loaded[1]:
                    info['api'] = p.plugin_loaded[1]
                info['loaded'] = True
            if p.p2p_plugin and 'p2p_name' not in info:
                info['p2p_name'] = p.p2p_plugin
            if p.plugin_path and 'library' not in info:
                info['library'] = p.plugin_path
            if p.collnet_plugin and 'collnet_plugin' not in info:
                info['collnet_plugin'] = p.collnet_plugin
            if p.ofi and 'name' not in info:
                info['name'] = self.ofi_name
                info['loaded'] = True
        if not info:
            # No loader line survived, but a network NCCL does not build in carried data or was chosen
            # ("via NET/FastSocket/0", "Using network FastSocket"): that plugin was loaded.
            for p in self.procs:
                for name in list(p.hop_nets) + [p.selected]:
                    if name and name not in ('IB', 'Socket') and not name.startswith('name:'):
                        info = {'name': name, 'loaded': True}
                        break
                if info:
                    break
        if info:
            usable = self._plugin_carried()
            if usable is not None:
                info['usable'] = usable
        return info or None

    def _plugin_carried(self):
        """Did an external net plugin carry the traffic?  The network NCCL selected (``Using network X``, ``Assigned
        NET plugin X to comm``) or connected through (``via NET/X/``) is the plugin's when it is none of NCCL's own,
        ``IB`` and ``Socket`` (a loaded plugin prints under another name, e.g. HPC-X's ``NCCL RDMA Plugin v8`` then
        ``IBext_v8``); only built-in ones: the plugin was loaded and not used.  None when no network shows."""
        names = set()
        for p in self.procs:
            for name in list(p.hop_nets) + [p.selected]:
                if name:
                    names.add(name[5:] if name.startswith('name:') else name)
        if not names:
            return None
        return any(name not in _BUILT_IN_NETS for name in names)

    def _gids(self):
        out = []
        for p in self.procs:
            for (dev, port), (index, prefix, iid, lineno) in sorted(p.gids.items()):
                kind = gid_kind(prefix, iid)
                name = None
                for d in p.ib_devices:
                    if d.get('index') == dev:
                        name = d['name']
                entry = {'host': p.host, 'dev': dev, 'hca': name, 'port': port, 'gid_index': index, 'kind': kind, 'line': lineno}
                if entry not in out and len(out) < 64:
                    out.append(entry)
        return out

    def _busbw(self):
        an = self.an
        if not an.busbw_rows and an.busbw_avg is None:
            return None
        peak = None
        for row in an.busbw_rows:
            for side in ('out_of_place', 'in_place'):
                val = row.get(side, {}).get('busbw_gbps')
                if isinstance(val, float) and (peak is None or val > peak):
                    peak = val
        return {'avg_busbw_gbps': an.busbw_avg, 'peak_busbw_gbps': peak, 'rows': an.busbw_rows}


# The networks NCCL builds in (ncclNetIb, ncclNetSocket): every other network name is an external plugin's.
_BUILT_IN_NETS = ('IB', 'Socket')
MAX_PUBLIC_COMMS = 256
_NVLS_ALGOS = ('nvls', 'nvlstree')


def algo_allows_nvls(value):
    """Can an NVLS algorithm run under ``NCCL_ALGO=value``?  NCCL's grammar (graph/tuning.cc parseList, 2.24+ with the
    per-function form): ``[func:][^]algo,algo;func:[^]algo...``, names case-insensitive; ``^`` excludes the list.
    One entry that leaves NVLS or NVLSTree enabled is enough."""
    for entry in value.split(';'):
        elems = entry.split(':', 1)[-1].strip()
        exclude = elems.startswith('^')
        names = set(e.strip().lower() for e in elems.lstrip('^').split(','))
        if exclude != any(a in names for a in _NVLS_ALGOS) or exclude and not all(a in names for a in _NVLS_ALGOS):
            return True
    return False


def _proc_gdr(p):
    """GPU Direct RDMA of one process: its network connection lines decide (``/GDRDMA`` or not); without them the
    transport's verdict, then the topology's verdicts about this process's rank or, when they name no rank, all of
    them when they agree.  None when nothing decides."""
    if p.gdr_true is not None:
        return True
    if p.gdr_false is not None:
        return False
    if p.gdr_verdict is not None:
        return p.gdr_verdict
    if p.gdr_no_module is not None and not p.dmabuf:
        return False
    verdicts = set(v for rank, v in p.gdr_topo if rank is None or rank in p.own_ranks)
    return verdicts.pop() if len(verdicts) == 1 else None


def gid_kind(prefix_hex, iid_hex):
    """Classify the GID NCCL printed as (subnet prefix / interface id), each a little-endian 64-bit hex."""
    try:
        prefix = int(prefix_hex, 16)
        iid = int(iid_hex, 16)
    except ValueError:
        return 'unknown'
    pbytes = prefix.to_bytes(8, 'little')
    ibytes = iid.to_bytes(8, 'little')
    if pbytes[0] == 0xfe and (pbytes[1] & 0xc0) == 0x80:
        return 'link-local'
    if prefix == 0 and ibytes[2:4] == b'\xff\xff' and ibytes[0:2] == b'\x00\x00':
        return 'ipv4-mapped'
    if prefix == 0 and ibytes[:4] == b'\x00\x00\xff\xff':
        return 'ipv4-mapped'
    return 'global'


def _pub_dev(d):
    return {'name': d['name'], 'port': d['port'], 'link_layer': d['link_layer']}


def summary_line(result):
    """One line an operator reads first: what NCCL selected, on which HCAs, and what looks wrong."""
    transport = result.get('net_transport')
    version = result.get('nccl_version')
    if isinstance(version, str):
        parts = ['NCCL %s' % version]
    elif version:
        parts = ['NCCL versions %s (processes differ)' % ', '.join(version)]
    else:
        parts = ['NCCL (version not shown)']
    if transport is None:
        parts.append('network transport not shown in the log')
    elif result.get('mismatch') and len(result.get('net_transports') or []) > 1:
        parts.append('processes used different network transports (%s; see per_host)' % ', '.join(result['net_transports']))
    else:
        layers = sorted({d.get('link_layer') for d in result.get('ib_devices') or [] if d.get('link_layer')})
        text = 'used %s' % transport
        if transport == 'IB' and layers:
            text += ' over %s' % '/'.join(layers)
        devices = ['%s:%s' % (d.get('name'), d.get('port')) for d in result.get('ib_devices') or []]
        if devices:
            text += ' (%s)' % ', '.join(devices)
        if transport == 'Socket' and result.get('ib_disabled_by_env'):
            text += ' (NCCL_IB_DISABLE=1)'
        parts.append(text)
    gdrs = set(v.get('gdr') for v in (result.get('per_host') or {}).values() if v.get('gdr') is not None)
    if len(gdrs) > 1:
        parts.append('GPUDirect RDMA on some processes only (see per_host)')
    elif result.get('gdr') is not None and transport != 'Socket':
        parts.append('GPUDirect RDMA %s' % ('on' if result['gdr'] else 'off'))
    for e in result.get('errors') or []:
        if e.get('category') == 'socket on loopback':
            parts.append('WARNING: the socket transport is on a loopback interface')
    if result.get('multi_node') is not None:
        parts.append('multi-node' if result['multi_node'] else 'single node')
    if result.get('fallback_to_socket'):
        probe = ' '.join(e.get('text', '') for e in (result.get('evidence') or {}).get('ib_probe', []))
        if 'libibverbs' in probe:
            parts.append('WARNING: fell back from IB to TCP sockets (libibverbs could not be loaded: install rdma-core)')
        elif result.get('ib_disabled_by_env'):
            parts.append('WARNING: fell back from IB to TCP sockets (NCCL_IB_DISABLE=1)')
        else:
            parts.append('WARNING: fell back from IB to TCP sockets (NCCL found no usable IB device)')
    for name in tcp_providers(result):
        parts.append('WARNING: aws-ofi-nccl provider %s is TCP, not EFA/RDMA' % name)
    for g in result.get('gid') or []:
        if g.get('kind') == 'link-local':
            parts.append('WARNING: GID index %s on %s port %s is a link-local RoCE v1 GID (see findings with '
                         'expect_link_layer=RoCE)' % (g['gid_index'], g.get('hca') or 'NCCL device %s' % g['dev'], g['port']))
            break
    if result.get('mismatch'):
        parts.append('WARNING: processes chose different transports (see per_host)')
    errors = result.get('errors') or []
    if any((e.get('meaning') or '').startswith('the process crashed') for e in errors):
        parts.append('WARNING: a process crashed')
    if errors:
        categories = []
        for e in errors:
            if e.get('category') not in categories:
                categories.append(e.get('category'))
        parts.append('%d distinct error(s) in errors (%s)' % (len(errors), ', '.join(str(c) for c in categories[:4])))
    return '; '.join(parts)
