# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-process evidence: what each INFO / WARN message of a process shows (hops, GDR verdicts, devices, networks,
return-code chains), and the nccl-tests output.

A new INFO message goes into ``info``'s table (``_INFO_HANDLERS``): a small handler ``h(an, proc, msg, lineno, raw)``
under the first character of the messages it reads.  A handler returns a false value when the message is not its
own (the next handler is asked), True when it read it, or ``(replay kind, value)`` when a repeat of the same line may
be replayed from scan.py's memo without parsing: only for handlers whose effect on a repeat is that kind
(``REPLAY_NONE``: nothing new; ``REPLAY_NET``: one more hop over network ``value``; ``REPLAY_SELECT``: network ``value``
selected; ``REPLAY_NVLS``: NVLS evidence) once the process has seen the line.

Network selection (from NCCL's printf formats): ``Using internal Network X`` (2.2-2.3), none (2.4-2.5), ``Using
network X`` (2.6+), ``Assigned NET plugin X to comm`` (2.27+, where ``IB``/``Socket`` are the built-in transports).
``NET/Socket : Using ...`` up to 2.4 is the bootstrap network, not the data transport.  Connection lines:
``Ring|Channel NN[/C] : a[x] -> b[y] [send|receive] via NET/<name>/<dev>[/GDRDMA]``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.grammar import _RANK_TAG, _WRAP_MPI, _WRAP_SLURM
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.rules import (
    PLUGIN_LOAD_MEANING, PROXY_SOCKET_MEANING, classify_error, return_code_meaning)

MAX_BUSBW_ROWS = 1000
REPLAY_NONE, REPLAY_NET, REPLAY_SELECT, REPLAY_NVLS = 0, 1, 2, 3
_NOTHING_NEW = (REPLAY_NONE, None)


class Proc:
    """Evidence collected for one process (host + pid, or one launcher tag when the NCCL prefix is missing).

    First line numbers (None until a line shows it): ``hop_line`` a network connection, ``gdr_true`` / ``gdr_false`` one
    with / without GDRDMA, ``ib_probe_line`` an IB probe that found nothing, ``socket_init_line`` the socket transport's
    interfaces, ``ib_datapath_line`` / ``socket_datapath_line`` a WARN of NCCL's verbs / socket transport on the data
    path, ``gdr_no_module`` "GPU Direct RDMA Disabled for HCA n 'x'" without a reason or "(no module)".
    ``gdr_verdict``: the network transport's own verdict (True/False), when no connection line decides; ``gdr_topo``:
    (rank or None, True/False) of the topology's GPU / NIC verdicts; ``dmabuf``: "DMA-BUF is available on GPU device N"
    (GDR without nvidia_peermem, 2.13+).  ``net_same_gpu``: peers of network hops between two GPUs printing the same
    busId / NVML index.  ``socket_warn``: (errors key, line) of this process's last WARN classified as bootstrap.
    ``chain``: the open return-code chains (see ``_chain``).
    """

    __slots__ = ('key', 'host', 'pid', 'devs', 'versions', 'selected', 'hop_nets', 'hop_line',
                 'gdr_true', 'gdr_false', 'intra', 'ib_devices', 'ib_dev_keys', 'ib_probe_line',
                 'socket_init_line', 'bootstrap', 'ofi', 'ofi_provider', 'plugin_loaded', 'p2p_plugin', 'plugin_path',
                 'collnet_plugin', 'nvls', 'collnet', 'own_ranks', 'net_peers', 'nranks', 'env',
                 'ifaces', 'eras', 'gids', 'chain', 'tree_internode', 'loopback_bootstrap', 'socket_ifaces',
                 'ib_datapath_line', 'net_code', 'comm_nodes', 'ofi_modern', 'net_same_gpu',
                 'socket_warn', 'gdr_no_module', 'dmabuf', 'gdr_verdict', 'gdr_topo',
                 'socket_datapath_line')

    def __init__(self, key, host, pid):
        self.key, self.host, self.pid = key, host, pid
        self.hop_line = self.gdr_true = self.gdr_false = self.ib_probe_line = self.socket_init_line = None
        self.ib_datapath_line = self.socket_datapath_line = self.gdr_no_module = None
        self.selected = self.ofi_provider = self.plugin_loaded = self.p2p_plugin = self.plugin_path = None
        self.collnet_plugin = self.nranks = self.chain = self.net_code = self.socket_warn = None
        self.nvls = self.collnet = self.gdr_verdict = None       # (None: the log does not say)
        self.bootstrap = self.ofi = self.ofi_modern = self.dmabuf = self.tree_internode = self.loopback_bootstrap = False
        self.devs, self.versions, self.own_ranks, self.net_peers, self.net_same_gpu, self.ib_dev_keys = (
            set(), set(), set(), set(), set(), set())
        self.hop_nets, self.intra, self.env, self.ifaces, self.gids = {}, {}, {}, {}, {}
        self.ib_devices, self.eras, self.socket_ifaces, self.comm_nodes, self.gdr_topo = [], [], [], [], []

    def ranks_up_to(self, rank, nranks):
        """A message names ``rank`` of this process in a communicator of ``nranks`` ranks."""
        self.own_ranks.add(rank)
        if self.nranks is None or nranks > self.nranks:
            self.nranks = nranks


# ---------------------------------------------------------------- INFO messages
# Return-code frame: "init.cc:903 -> 5", "... -> 2 [Proxy Thread]", "misc/socket.cc:100 -> 2 (Connection refused)" (EQCHECK).
_RET = re.compile(r'^([\w./\-+]+\.(?:cc|cu|cpp|c|h|hpp)):(\d+) -> (\d+)(?:\s+\S.*)?$')


def info(an, proc, msg, lineno, raw):
    """An INFO message ``msg`` of ``proc`` on line ``lineno`` (``raw``: the line, quoted as evidence).  Returns the
    replay of a repeat of the line (see the module docstring), or None."""
    m = _RANK_TAG.match(msg)
    if m:
        proc.own_ranks.add(int(m.group(1)))
        msg = msg[m.end():]
    msg = msg.strip()
    if not msg:
        return None
    if ' -> ' in msg:
        mr = _RET.match(msg)
        if mr:      # a return-code frame: "init.cc:903 -> 5"
            _return_code(an, proc, mr, lineno)
            return None
    if proc.chain is not None and an.tid in proc.chain:
        flush_chain(an, proc, an.tid)
    for handler in _INFO_HANDLERS.get(msg[0], _INFO_ANY):
        done = handler(an, proc, msg, lineno, raw)
        if done:
            return done if done is not True else None
    return None


# RCCL (ROCm's NCCL) ends connection lines with the communicator: "via P2P/IPC comm 0x5609976f9470 nRanks 32".
_RCCL_COMM_TAIL = re.compile(r' comm 0x[0-9a-fA-F]+ nRanks \d+(?: busId [0-9a-fA-F]+)?$')


def _hop_via(mh):
    """The transport of a connection line matched by _HOP (``mh``), without RCCL's communicator tail."""
    via = mh.group(8)
    if ' nRanks ' in via:
        via = _RCCL_COMM_TAIL.sub('', via) or via
    return via


# The bracket after a rank is the GPU's busId (2.5-2.11, hex) or NVML index (2.12+): both name a GPU of one machine.
_HOP = re.compile(r'^(?:Ring|Channel) (\d+)(?:/(\d+))? : (\d+)(?:\[([0-9a-fA-Fx]+)\])? -> (\d+)(?:\[([0-9a-fA-Fx]+)\])?'
                  r'(?: \[(send|receive)\])? via (.*\S)\s*$')
_RING_LIST = re.compile(r'^(?:Channel|Ring) \d+(?:/\d+)? :((?:\s+\d+)+)\s*$')
_RING_LIST_CUT = (20, 32)


def _channel(an, proc, msg, lineno, raw):
    """A connection "Channel|Ring NN : a[x] -> b[y] via T", or the ranks of a ring ("Ring 00 : 0 1 2 3")."""
    if not (msg.startswith('Channel ') or msg.startswith('Ring ')):
        return None
    if ' via ' in msg:
        mh = _HOP.match(msg)
        return _hop(an, proc, mh, lineno, raw) if mh else None
    ml = _RING_LIST.match(msg)
    if ml is None:
        return None
    # NCCL cuts this list at 20 ranks (2.3/2.4) or a 128-byte line (2.5-2.7, 28-32 ranks; 2.8+ ends a cut list with
    # "...", which this pattern does not match): 20-32 may be cut
    n = len(ml.group(1).split())
    if not _RING_LIST_CUT[0] <= n <= _RING_LIST_CUT[1] and (proc.nranks is None or n > proc.nranks):
        proc.nranks = n
    return True


# "NET/<name>/<dev>[(<proxy rank>)][/GDRDMA][/Shared]": the "(N)" is the PXN proxy rank (2.12+).
_NET_VIA = re.compile(r'^(?:NET|COLLNET)/(.+?)/(\d+)(?:\((\d+)\))?((?:/[^/\s]+)*)$')


def _hop(an, proc, mh, lineno, raw):
    src, dst, side, via = int(mh.group(3)), int(mh.group(5)), mh.group(7), _hop_via(mh)
    mn = _NET_VIA.match(via)
    if mn and via.startswith('NET/'):
        name = mn.group(1)
        proc.hop_nets[name] = proc.hop_nets.get(name, 0) + 1
        if proc.hop_line is None:
            proc.hop_line = lineno
            an.note('hop', lineno, raw)
        if 'GDRDMA' in mn.group(4):
            if proc.gdr_true is None:
                proc.gdr_true = lineno
                an.note('gdr', lineno, raw)
        elif proc.gdr_false is None:
            proc.gdr_false = lineno
            an.note('gdr', lineno, raw)
        if src != dst and mh.group(4) is not None and mh.group(4) == mh.group(6) and len(proc.net_same_gpu) < 64:
            proc.net_same_gpu.add(dst if side == 'send' else src)
        if side == 'send':
            proc.own_ranks.add(src)
            proc.net_peers.add((dst, name))
        elif side == 'receive':
            proc.own_ranks.add(dst)
            proc.net_peers.add((src, name))
        return REPLAY_NET, name
    if via.startswith('COLLNET'):
        proc.collnet = True
        return _NOTHING_NEW
    label = via
    if label == 'direct shared memory':
        label = 'SHM (direct shared memory)'
    elif label.startswith('NVLS'):
        label = 'NVLS'
        proc.nvls = True
    proc.own_ranks.add(src)
    proc.own_ranks.add(dst)
    if label not in proc.intra:
        proc.intra[label] = lineno
        an.note('intra', lineno, raw)
    return _NOTHING_NEW


_COLLNET_HOP = re.compile(r'^(?:CollNet|Coll) (\d+)(?:/\d+)? : (\d+) \[(send|receive)\] via (.*\S)\s*$')


def _collnet(an, proc, msg, lineno, raw):
    """A CollNet connection ("CollNet 00/0 : 1 [send] via COLLNET/...")."""
    if msg.startswith('CollNet') or msg.startswith('Coll '):
        mc = _COLLNET_HOP.match(msg)
        if mc:
            proc.collnet = True
            an.note('collnet', lineno, raw)
            if 'GDRDMA' in mc.group(4):
                proc.gdr_true = proc.gdr_true or lineno
            return True
    return None


# Messages that show a feature in use: (start of the message, a word it holds, the Proc flag set, the evidence kind).
_IN_USE = (('Connected', 'ollNet', 'collnet', 'collnet'), ('Connected NVLS', '', 'nvls', 'nvls'),
           ('DMA-BUF is available on GPU device', '', 'dmabuf', 'dmabuf'))


def _in_use(an, proc, msg, lineno, raw):
    """"Connected ... CollNet", "Connected NVLS", "DMA-BUF is available on GPU device N" (GDR without nvidia_peermem)."""
    for start, word, flag, kind in _IN_USE:
        if msg.startswith(start) and word in msg:
            setattr(proc, flag, True)
            an.note(kind, lineno, raw)
            return True
    return None


# "NCCL version 2.21.5+cuda12.4"; RCCL (ROCm): "RCCL version : 2.21.5-HEAD:9a0e6a1".
_VERSION = re.compile(r'[NR]CCL version :? ?(\d{1,6}\.\d{1,6}\.\d{1,6})')


def _version_banner(an, proc, msg, lineno, raw):
    mv = _VERSION.search(msg) if 'CCL version' in msg else None
    if mv:
        version(an, proc, mv.group(1), lineno)
        return True
    return None


# GPU Direct RDMA verdicts of the network transport: per HCA ("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
# (no module)") or, in 2.4, per connection ("NET/IB : GPU Direct RDMA Enabled for GPU 0[0] / HCA 0 (distance 2 < 3)").
_GDR_VERDICT = re.compile(r"^NET/\w+ ?: GPU Direct RDMA (Enabled|Disabled) for "
                          r"(?:HCA \d+ '[^']*'|GPU [0-9A-Fa-fx]+(?:\[\d+\])? / HCA [\w.\-]+)(.*)$")
# HPC-X plugin: "NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0'", "... (nvidia-peermem) enabled ...".
_GDR_PLUGIN_MODE = re.compile(r"^NET/\w+ ?: GPU Direct RDMA \((DMABUF|nvidia-peermem)\) enabled for HCA")
# The topology's verdict for one GPU / NIC pair of the node (2.5+ graph/paths.cc, every pair, not only this process's
# GPU): "GPU Direct RDMA Enabled for GPU 81000 / HCA 0 (distance 4 <= 5), read 0", newest "... for GPU/0-1b000 (rank 0)
# - NET/0-0 (distance 3 <= 4, read 1, mode Default)".
_GDR_TOPO = re.compile(r'^GPU Direct RDMA (Enabled|Disabled) for (?:GPU [0-9A-Fa-fx]+ / HCA [\w.\-]+|GPU/\S+ \(rank (\d+)\))')


def gdr_verdict(an, proc, msg, lineno, raw):
    """A GPU Direct RDMA verdict line (not a connection line); True when ``msg`` is one."""
    mt = _GDR_TOPO.match(msg)
    if mt:
        if len(proc.gdr_topo) < 64:
            proc.gdr_topo.append((int(mt.group(2)) if mt.group(2) else None, mt.group(1) == 'Enabled'))
        an.note('gdr', lineno, raw)
        return True
    mp = _GDR_PLUGIN_MODE.match(msg)
    if mp:
        if mp.group(1) == 'DMABUF':
            proc.dmabuf = True
        proc.gdr_verdict = True
        an.note('gdr', lineno, raw)
        return True
    md = _GDR_VERDICT.match(msg)
    if md is None:
        return False
    reason = md.group(2).strip()
    if md.group(1) == 'Enabled':
        proc.gdr_verdict = True
    elif not reason or reason.startswith('(no module'):
        # nvidia_peermem is missing; GDR may still work through DMA-BUF (2.13+), see Proc.dmabuf
        proc.gdr_no_module = proc.gdr_no_module or lineno
    elif proc.gdr_verdict is None:
        proc.gdr_verdict = False        # e.g. "(distance 4 >= 2)"
    an.note('gdr', lineno, raw)
    return True


def _gdr(an, proc, msg, lineno, raw):
    return msg.startswith('GPU Direct RDMA') and gdr_verdict(an, proc, msg, lineno, raw)


# libibverbs could not be loaded (misc/ibvwrap.cc; WARN up to 2.18, INFO from 2.19), or the built-in IB transport failed to
# initialise (2.27+): NCCL cannot use IB on this process.
_IB_UNAVAILABLE = re.compile(r'^(?:Failed to open libibverbs\.so|Failed to initialize NET plugin IB\b)')


def _ib_failed(an, proc, msg, lineno, raw):
    if _IB_UNAVAILABLE.match(msg):
        ib_unavailable(an, proc, lineno, raw)
        return True
    return None


def _net(an, proc, msg, lineno, raw):
    """A "NET/..." message of a network transport or of the plugin loader."""
    if not msg.startswith('NET/'):
        return None
    for handler in _NET_HANDLERS:
        if handler(an, proc, msg, lineno, raw):
            break
    return True


def _ib_probe_23(an, proc, msg, lineno, raw):
    """2.3: "Net/IB: call to devices() returned 0 devices." - the IB probe found nothing."""
    if msg.startswith('Net/IB') and 'returned 0 devices' in msg:
        ib_unavailable(an, proc, lineno, raw)
        return True
    return None


_ENV = re.compile(r'^(NCCL_[A-Z0-9_]+) set (?:by environment )?to ((?:.*\S)?)\s*$')
_ENV_CONF = re.compile(r'^(NCCL_[A-Z0-9_]+) set by (?:environment|config file|[\w ]+) to ((?:.*\S)?)\s*$')


def _env(an, proc, msg, lineno, raw):
    """"NCCL_X set by environment to V": NCCL echoes a setting."""
    me = (_ENV_CONF.match(msg) or _ENV.match(msg)) if msg.startswith('NCCL_') else None
    if me is None:
        return None
    name, value = me.group(1), me.group(2)
    if value.endswith('.') and not value.endswith('..'):
        value = value[:-1]
    proc.env.setdefault(name, value)
    an.env.setdefault(name, value)
    return True


# connectNvls prints the NVLS heads / trees only when NVLS is set up: "NVLS Head  0:  0  8 16", "NVLS Trees : ...".
_NVLS_TREE = re.compile(r'^NVLS (?:Head\s+\d+:(?:\s+-?\d+)+|Trees? ?:)')
_NVLS_COMM = re.compile(r'^NVLS comm 0x[0-9a-f]+ headRank')


def _nvls(an, proc, msg, lineno, raw):
    """NVLS set-up lines: the communicator uses NVLS, or NVLS is not available."""
    if not msg.startswith('NVLS'):
        return None
    if _NVLS_COMM.match(msg):
        proc.nvls = True
        proc.intra['NVLS'] = proc.intra.get('NVLS') or lineno
        an.note('nvls', lineno, raw)
    elif _NVLS_TREE.match(msg):
        proc.nvls = True
        an.note('nvls', lineno, raw)
    elif ('not available' in msg or 'not supported' in msg) and proc.nvls is None:
        proc.nvls = False
        an.note('nvls', lineno, raw)
    return True


def _select(an, proc, name, lineno, raw):
    proc.selected = name
    an.note('selection', lineno, raw)
    return REPLAY_SELECT, name


# The network name NCCL prints: up to five words ("IB", "Socket", "IBext_v8", "AWS Libfabric", "NCCL RDMA Plugin v6").
_NET_NAME = r'\w[\w.\-]{0,63}(?: \w[\w.\-]{0,63}){0,4}'
# 2.2-2.3 "Using internal Network IB" / "Using external Network AWS Libfabric" (a plugin); 2.6+ "Using network IB".
_USING_NET = re.compile(r'^Using (?:internal |external )?[Nn]etwork (' + _NET_NAME + r')\s*$')


def _using(an, proc, msg, lineno, raw):
    """"Using network X": NCCL selected network X."""
    mu = _USING_NET.match(msg)
    if mu:
        return _select(an, proc, mu.group(1), lineno, raw)
    return msg.startswith('Using non-device net plugin')


_ASSIGNED = re.compile(r'^Assigned NET plugin (.+?) to comm')


def _assigned(an, proc, msg, lineno, raw):
    """2.27+: "Assigned NET plugin X to comm"."""
    if not msg.startswith('Assigned NET plugin'):
        return None
    ma = _ASSIGNED.match(msg)
    return _select(an, proc, ma.group(1), lineno, raw) if ma else True


def _initialized(an, proc, msg, lineno, raw):
    """2.27+: "Initialized NET plugin X" (a network is loaded, not selected)."""
    return _NOTHING_NEW if msg.startswith('Initialized NET plugin') else None


def _bootstrap(an, proc, msg, lineno, raw):
    if msg.startswith('Bootstrap'):
        proc.bootstrap = True
        _ifaces(proc, msg, bootstrap=True)
        return True
    return None


# "P2P plugin IBext" (HPC-X nccl-rdma-sharp-plugins up to v7), "P2P plugin v8 IBext_v8" (v8+: API version first).
_P2P_PLUGIN = re.compile(r'^P2P plugin (?:v\d+ )?(\S+)')
_PLUGIN_PATH = re.compile(r'^Plugin Path : (\S+)')


def _p2p_plugin(an, proc, msg, lineno, raw):
    """"P2P plugin IBext" (HPC-X) and "Plugin Path : ..."."""
    mp = _P2P_PLUGIN.match(msg)
    if mp:
        proc.p2p_plugin = mp.group(1)
        an.note('plugin', lineno, raw)
        return True
    mp = _PLUGIN_PATH.match(msg)
    if mp:
        proc.plugin_path = mp.group(1)
        return True
    return None


_TREES = re.compile(r'\[\d+\] ([-\d/]+)->(\d+)->(-?\d+)')


def _trees(an, proc, msg, lineno, raw):
    """"Trees [0] 1/-1/-1->0->-1 ...": the ranks of this process; a node with two children spans nodes."""
    if not msg.startswith('Trees'):
        return None
    for down, me, _up in _TREES.findall(msg):
        proc.own_ranks.add(int(me))
        kids = [d for d in down.split('/') if d and not d.startswith('-')]
        if len(kids) >= 2:
            proc.tree_internode = True
    return _NOTHING_NEW


_CHANNEL_SUMMARY = re.compile(r'(\d+) coll channels, (?:(\d+) collnet channels, )?(?:(\d+) nvls channels, )?')


def _channel_summary(an, proc, msg, lineno, raw):
    """"16 coll channels, 0 collnet channels, 0 nvls channels, ...": CollNet and NVLS in use or not."""
    mc = _CHANNEL_SUMMARY.search(msg) if ' channels' in msg else None
    if mc is None:
        return None
    if mc.group(2) is not None and int(mc.group(2)) == 0 and proc.collnet is None:
        proc.collnet = False
        an.note('collnet', lineno, raw)
    if mc.group(3) is not None:
        if int(mc.group(3)) > 0:
            proc.nvls = True
            an.note('nvls', lineno, raw)
            return REPLAY_NVLS, None
        if proc.nvls is None:
            proc.nvls = False
            an.note('nvls', lineno, raw)
    return _NOTHING_NEW


# "comm 0x.. rank 6 nRanks 8 nNodes 1 localRanks 8 localRank 6 MNNVL 0" (2.1x+): the communicator's node count.
_NNODES = re.compile(r'\brank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+)')
_RANK_NRANKS = re.compile(r'\brank (\d+) nranks (\d+)\b')


def _comm_ranks(an, proc, msg, lineno, raw):
    """A rank of this process and the size of its communicator: "comm 0x.. rank 6 nRanks 8 nNodes 1 localRanks 8 ..."
    (2.1x+, with NCCL's own count of the communicator's nodes) or "ncclCommInitRank comm 0x.. rank 3 nranks 16 ..."."""
    mn = _NNODES.search(msg) if ' nNodes ' in msg else None
    replay = True
    if mn is not None:
        proc.comm_nodes.append((int(mn.group(2)), int(mn.group(3))))
        an.note('nodes', lineno, raw)
    else:
        mn = _RANK_NRANKS.search(msg) if ' nranks ' in msg else None
        if mn is None:
            return None
        replay = _NOTHING_NEW
    proc.ranks_up_to(int(mn.group(1)), int(mn.group(2)))
    return replay


_NIC_DISTANCE = re.compile(r'^CUDA Dev \d+(?:\[\d+\])?, (' + _NET_NAME + r') NIC distance ?:')


def _nic_distance(an, proc, msg, lineno, raw):
    """2.4 prints no selection line; its topology line names the network in use: "CUDA Dev 1[1], AWS Libfabric NIC
    distance : SYS", "CUDA Dev 0[0], IB NIC distance :  PIX"."""
    if 'NIC distance' not in msg:
        return None
    mname = _NIC_DISTANCE.match(msg)
    if mname:
        name = mname.group(1)
        if name in ('IB', 'Socket'):
            if proc.selected is None:
                proc.selected = name
                an.note('selection', lineno, raw)
        else:
            proc.hop_nets.setdefault('name:' + name, 0)
    return True


# info's table: the handlers asked for a message, by its first character, in order (the first that reads it wins).
# Connection lines come before the version banner, every other message after it; the communicator summaries may
# start with any character.
_ANY = (_channel_summary, _comm_ranks, _nic_distance)
_INFO_HANDLERS = {
    'C': (_channel, _collnet, _in_use, _version_banner) + _ANY,
    'R': (_channel, _version_banner) + _ANY,
    'G': (_version_banner, _gdr) + _ANY,
    'D': (_version_banner, _in_use) + _ANY,
    'F': (_version_banner, _ib_failed) + _ANY,
    'N': (_version_banner, _net, _ib_probe_23, _env, _nvls) + _ANY,
    'U': (_version_banner, _using) + _ANY,
    'A': (_version_banner, _assigned) + _ANY,
    'I': (_version_banner, _initialized) + _ANY,
    'B': (_version_banner, _bootstrap) + _ANY,
    'P': (_version_banner, _p2p_plugin) + _ANY,
    'T': (_version_banner, _trees) + _ANY,
}
_INFO_ANY = (_version_banner,) + _ANY


# ---------------------------------------------------------------- NET/ messages
# "[0]mlx5_0:1/IB"; newer NCCL may add rail and plane fields after the port: "[0]mlx5_0:1:0/IB", "[0]mlx5_0:1::0/RoCE".
_IB_DEV = re.compile(r'\[(\d+)\]\s?([\w.\-+]+):(\d+)(?::\d*){0,2}/(IB|RoCE)')
# 2.2/2.3 list the IB devices one per line: "NET/IB: [0] mlx5_1:1/IB"; the NET-subsystem trace of newer releases
# names the uverbs device and adds properties: "NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000 ...".
_IB_DEV_LINE = re.compile(r'^NET/IB ?: \[(\d+)\] ?([\w.\-+]+?)(?::uverbs\d+)?:(\d+)(?::\d*){0,2}/(IB|RoCE)(?:\s+\w+=\S*)*\s*$')
# QP connect trace: "NET/IB: Dev 0 Port 1 qpn 58 mtu 3 GID 3 (0/..)" (2.1x) and
# "NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1047 mtu 5 query_ece={...} GID 0 (80FE/..)" (2.20+); "Dev" is NCCL's device index.
_GID_TRACE = re.compile(r'^NET/IB ?: (?:NCCL (?:Merged)?Dev|Dev) (\d+) (?:IbDev \d+ )?Port (\d+) qpn (\d+) mtu (\d+) '
                        r'(?:query_ece=(?:\{[^}]*\}|\S+) )?GID (\d+) \(([0-9A-Fa-f]{1,16})/([0-9A-Fa-f]{1,16})\)')


def _net_ib(an, proc, msg, lineno, raw):
    """NCCL's IB transport: its device list, a probe that found nothing, the GID of a queue pair."""
    if not msg.startswith('NET/IB'):
        return None
    devs = _IB_DEV.findall(msg) if ' Using ' in msg else _IB_DEV_LINE.findall(msg)
    if devs:
        for idx, name, port, ll in devs:
            k = (name, int(port))
            if k not in proc.ib_dev_keys:
                proc.ib_dev_keys.add(k)
                proc.ib_devices.append({'name': name, 'port': int(port), 'link_layer': ll, 'index': int(idx)})
        _ifaces(proc, msg.split('OOB', 1)[-1] if 'OOB' in msg else '', bootstrap=False)
        an.note('ib_devices', lineno, raw)
        return True
    # (2.2/2.3 print "Using interface X for sideband communication" when IB initialisation starts: with the socket
    # network chosen afterwards, the probe found no device)
    if 'No device found' in msg or 'sideband' in msg or 'No IP interface' in msg or 'Failed to' in msg:
        ib_unavailable(an, proc, lineno, raw)
        return True
    mg = _GID_TRACE.match(msg)
    if mg:
        dev, port, gid_index = int(mg.group(1)), int(mg.group(2)), int(mg.group(5))
        proc.gids[(dev, port)] = (gid_index, mg.group(6), mg.group(7), lineno)
        return True
    return None


# "eth0:10.0.0.1<0>": an interface and its address.
_IFACE_IP = re.compile(r'(?:^|[\s\]])([A-Za-z][\w.\-]*):([0-9A-Fa-f.:%\w]+?)<\d+>')
_LOOPBACK_IFACES = ('lo',)
# An all-digit dotted address that is not a.b.c.d with octets 0-255 (IPv6 and anonymised forms are kept).
_BAD_DOTTED = re.compile(r'^(?=[\d.]+$)(?!(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)$)')


def _ifaces(proc, msg, bootstrap):
    for iface, ip in _IFACE_IP.findall(msg):
        if _BAD_DOTTED.match(ip):
            continue        # "10.10.10..2": mistyped or hand-edited, it would count as another machine
        proc.ifaces.setdefault(iface, set()).add(ip)
        if bootstrap and (iface in _LOOPBACK_IFACES or ip.startswith('127.')):
            proc.loopback_bootstrap = True


def _net_socket(an, proc, msg, lineno, raw):
    """NCCL's socket transport: the interfaces it uses."""
    if not msg.startswith('NET/Socket'):
        return None
    if 'Using' in msg and _IFACE_IP.search(msg):      # not "Using 2 threads and 8 sockets per thread"
        proc.socket_init_line = proc.socket_init_line or lineno
        proc.socket_ifaces = _IFACE_IP.findall(msg)
        _ifaces(proc, msg, bootstrap=False)
        an.note('socket', lineno, raw)
    return True


# Wordings of aws-ofi-nccl releases from 2023 on, which may call the network "Libfabric" rather than "AWS Libfabric".
_OFI_MODERN = re.compile(r'^NET/OFI (?:Running on \S+ platform|Creating one domain|Using transport protocol|Internode latency|'
                         r'NIC group|Support for (?:global|DMA-BUF) registrations|Setting NCCL_TOPO_FILE)')
# "Selected Provider is efa (found 4 nics)"; aws-ofi-nccl 1.13+: "Selected provider is tcp, fabric is 10.0.0.0/24 (found 1 nics)".
_OFI_PROVIDER = re.compile(r'^NET/OFI Selected [Pp]rovider is ([^\s,]+?),?(?: fabric is \S+)?(?: \(found (\d+) nics\))?\s*$')


def _net_ofi(an, proc, msg, lineno, raw):
    """aws-ofi-nccl (the AWS Libfabric plugin): its provider, and GDR turned off."""
    if not msg.startswith('NET/OFI'):
        return None
    proc.ofi = True
    if 'disabling GDR' in msg and proc.gdr_verdict is None:
        proc.gdr_verdict = False    # "NET/OFI Could not disable CUDA API usage for HMEM, disabling GDR"
        an.note('gdr', lineno, raw)
    if _OFI_MODERN.match(msg):
        proc.ofi_modern = True
    mo = _OFI_PROVIDER.match(msg)
    if mo:
        proc.ofi_provider = mo.group(1)
        an.note('plugin', lineno, raw)
    return True


_PLUGIN_LOADED = re.compile(r'^NET/Plugin ?: Loaded (net|coll|collnet) plugin (.+?)(?: \((v\d+)\))?\s*$')
# "NET/Plugin : Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory."
_PLUGIN_LOAD_ERROR = re.compile(r'^NET/Plugin ?: Plugin load returned \d+ ?: ?(.*?)\.?\s*$')
# NCCL plugin-loader wordings and the releases that print them (inclusive, as (major, minor)).
_LOADER_ERAS = (
    (re.compile(r'^NET/Plugin : No plugin found \(libnccl-net\.so\)\.\s*$'), ((2, 3), (2, 4))),
    (re.compile(r'^NET/Plugin : No plugin found \(libnccl-net\.so\), using internal implementation'), ((2, 5), (2, 16))),
    (re.compile(r'^NET/Plugin : Plugin load \(libnccl-net\.so\) returned'), ((2, 17), (2, 18))),
    (re.compile(r'^NET/Plugin : No plugin found, using internal implementation'), ((2, 17), (2, 18))),
    (re.compile(r'^NET/Plugin : dlerror='), ((2, 19), (2, 20))),
)


def _net_plugin(an, proc, msg, lineno, raw):
    """The net plugin loader: a plugin loaded or refused, and the wording of the release that printed it."""
    if not msg.startswith('NET/Plugin'):
        return None
    ml = _PLUGIN_LOAD_ERROR.match(msg)
    if ml and 'No such file or directory' not in ml.group(1):
        # the library exists but the dynamic loader refused it (a missing dependency, GLIBC, wrong ELF class)
        an.add_error(msg.strip(), 'plugin load', lineno, proc, meaning=PLUGIN_LOAD_MEANING)
    mp = _PLUGIN_LOADED.match(msg)
    if mp:
        if mp.group(1) == 'net':
            proc.plugin_loaded = (mp.group(2), mp.group(3))
        else:
            proc.collnet_plugin = mp.group(2) + (' (%s)' % mp.group(3) if mp.group(3) else '')
        an.note('plugin', lineno, raw)
        return True
    for rx, era in _LOADER_ERAS:
        if rx.match(msg):
            proc.eras.append((era, lineno, msg))
            break
    return True


# "NET/..." messages: the handlers in order, the first that reads the message wins (a GDR verdict may come from any
# network transport).
_NET_HANDLERS = (_net_ib, gdr_verdict, _net_socket, _net_ofi, _net_plugin)


def ib_unavailable(an, proc, lineno, raw):
    """The IB probe found no device, or NCCL cannot use IB on this process."""
    proc.ib_probe_line = proc.ib_probe_line or lineno
    an.note('ib_probe', lineno, raw)


def version(an, proc, text, lineno):
    """An NCCL version banner (``text``: "2.21.5") of ``proc`` (None when no process printed it)."""
    major, minor, patch = (int(x) for x in text.split('.'))
    if major >= 10:
        # Older PyTorch decoded NCCL's version code with the pre-2.9 formula: code 21104 (2.11.4) printed as 21.1.4
        code = major * 1000 + minor * 100 + patch
        text = '%d.%d.%d' % (code // 10000, code % 10000 // 100, code % 100)
    an.versions.setdefault(text, lineno)
    if proc is not None:
        proc.versions.add(text)


# ---------------------------------------------------------------- return-code chains
def _return_code(an, proc, mr, lineno):
    """A return-code frame matched by _RET: which network code returned it, and the chain it belongs to."""
    path = mr.group(1)
    if proc.net_code is None and path.startswith('transport/net_'):
        if path.startswith('transport/net_ib'):
            proc.net_code = ('IB', lineno)
        elif path.startswith('transport/net_socket'):
            proc.net_code = ('Socket', lineno)
    _chain(an, proc, path + ':' + mr.group(2) + ' -> ' + mr.group(3), int(mr.group(3)), lineno)


def _chain(an, proc, frame, code, lineno):
    """A return-code frame of ``proc`` printed by thread ``an.tid``.  Each thread has its own open chain (the threads of
    one process that drives several GPUs interleave theirs); a chain passes to another thread only on the very next
    line with the same code (a proxy thread handing its failure to the caller).  ``proc.chain``: None, or {tid: [first
    frame, last frame, code, frames, first line, last line, socket WARN key, a frame of the proxy or network transport
    seen]}."""
    chains = proc.chain
    if chains is None:
        chains = proc.chain = {}
    tid = an.tid
    ch = chains.get(tid)
    # Frames of lines without a process prefix (key '-') may come from any process: they form one call stack only on
    # consecutive lines.
    if ch is None or ch[2] != code or (proc.key == '-' and lineno - ch[5] > 1):
        if ch is not None:
            flush_chain(an, proc, tid)
            chains = proc.chain = proc.chain if proc.chain is not None else {}
        ch = None
        for other, och in chains.items():
            if och[2] == code and och[5] == lineno - 1:
                ch = chains.pop(other)
                chains[tid] = ch
                break
        if ch is None:
            # A socket WARN right before the first frame belongs to this call stack.
            warn = proc.socket_warn[0] if proc.socket_warn is not None and proc.socket_warn[1] == lineno - 1 else None
            ch = chains[tid] = [frame, frame, code, 0, lineno, lineno, warn, False]
    ch[1] = frame
    ch[3] += 1
    ch[5] = lineno
    if ch[6] is not None:
        if 'bootstrap' in frame:
            ch[6] = None        # 2.2-2.4 bootstrap also runs through transport/net_socket: it stays bootstrap
        elif 'proxy.c' in frame or 'transport/net' in frame:
            ch[7] = True


def flush_chain(an, proc, tid):
    """Close the chain of thread ``tid`` of ``proc``: two frames or more with a non-zero code make an error."""
    chains = proc.chain
    ch = chains.pop(tid, None) if chains is not None else None
    if not chains:
        proc.chain = None
    if ch is None:
        return
    if ch[6] is not None and ch[7]:
        # The socket failed under the proxy thread or while connecting the network transport, not in bootstrap.
        entry = an.errors.get(ch[6])
        if entry is not None and entry['category'] == 'bootstrap' and entry['count'] == 1:     # (shared by text)
            entry['category'], entry['meaning'] = 'proxy', PROXY_SOCKET_MEANING
    if ch[3] < 2 or ch[2] == 0:
        return
    an.add_error('%s ... %s' % (ch[0], ch[1]), 'return code', ch[4], proc, meaning=return_code_meaning(ch[2]))


def flush_chains(an, proc):
    """Close every open chain of ``proc``, oldest first."""
    if proc.chain is not None:
        for tid in sorted(proc.chain, key=lambda t: proc.chain[t][4]):
            flush_chain(an, proc, tid)


# ---------------------------------------------------------------- WARN lines
# A data-path failure reported by NCCL's own verbs transport (transport/net_ib.cc, .cu, or transport/net_ib/*.cc).
_IB_DATAPATH_WARN = re.compile(r'^transport/net_ib(?:\.\w+|/[\w.]+):\d+(?: \([^)]*\))? (?:NCCL )?WARN NET/IB ?: (?:\S+ )?'
                               r'(?:Got completion|ncclIbTest: Got CQE)')
# A data-path failure of NCCL's socket transport (transport/net_socket.cc): sockets carried the data.
_SOCKET_DATAPATH_WARN = re.compile(r'^transport/net_socket\.cc:\d+(?: \([^)]*\))? (?:NCCL )?WARN NET/Socket ?:'
                                   r'(?! ?no interface found)')


def warn(an, proc, text, msg, lineno, shown):
    """A WARN line: ``text`` from its source location on, ``msg`` after "WARN", ``shown`` the text as the log prints
    it (it differs when autolinks were removed): that one is quoted in ``errors``."""
    if proc.chain is not None and an.tid in proc.chain:
        flush_chain(an, proc, an.tid)
    text = text.strip()
    if _IB_UNAVAILABLE.match(msg):
        ib_unavailable(an, proc, lineno, text)
    elif proc.socket_datapath_line is None and _SOCKET_DATAPATH_WARN.match(text):
        proc.socket_datapath_line = lineno
        an.note('socket', lineno, text)
    elif proc.ib_datapath_line is None and _IB_DATAPATH_WARN.match(text):
        proc.ib_datapath_line = lineno
        an.note('ib_datapath', lineno, text)
    category, meaning = classify_error(text)
    if category == 'duplicate GPU':
        for r in re.findall(r'rank (\d+)', text):
            proc.own_ranks.add(int(r))
    shown = (shown or text).strip()
    an.add_error(shown, category, lineno, proc, meaning=meaning)
    proc.socket_warn = (shown, lineno) if category == 'bootstrap' else None


# ---------------------------------------------------------------- nccl-tests output
_TESTS_RANK = re.compile(r'^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)')
_TESTS_HEADER = re.compile(r'^#\s+size\s+count\s+type\s')
_TESTS_AVG = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*([\d.]+)')


def tests_comment(an, s):
    """A "#" line of nccl-tests: the rank table, the header of the results table, the average bus bandwidth."""
    mt = _TESTS_RANK.match(s)
    if mt:
        an.tests_devices_seen = True
        an.tests_ranks[int(mt.group(1))] = (mt.group(3), int(mt.group(2)), int(mt.group(4)))
        return
    if _TESTS_HEADER.match(s):
        an.busbw_columns = s.lstrip('#').split()
        an.in_table = True
        return
    ma = _TESTS_AVG.match(s)
    if ma:
        an.busbw_avg = float(ma.group(1))


_TESTS_ROW = re.compile(r'^\s*(\d+)\s+(\d+)\s+([A-Za-z]\w*)\s+(.*)$')      # size count type ... (a dtype name)


def table_line(an, line):
    """A line inside nccl-tests' results table: True when it was one of its rows or comments."""
    s = line.strip()
    for rx in (_WRAP_MPI, _WRAP_SLURM):
        m = rx.match(s)
        if m:
            s = s[m.end():].strip()
            break
    if not s:
        return True
    if s.startswith('#'):
        ma = _TESTS_AVG.match(s)
        if ma:
            an.busbw_avg = float(ma.group(1))
            an.in_table = False
        return bool(ma) or s.startswith('#  ') or s.startswith('# ') and '(B)' in s or s == '#'
    m = _TESTS_ROW.match(s)
    if not m or not an.busbw_columns:
        return False
    if len(an.busbw_rows) < MAX_BUSBW_ROWS:
        an.busbw_rows.append(_table_row(an.busbw_columns, s.split()))
    return True


def _table_row(columns, fields):
    # nccl-tests prints: size count type [redop] [root] | time algbw busbw #wrong | time algbw busbw #wrong
    row = {}
    lead = [c for c in columns if c in ('size', 'count', 'type', 'redop', 'root')]
    for i, col in enumerate(lead):
        if i < len(fields):
            row[col] = fields[i]
    rest = fields[len(lead):]
    names = ('time_us', 'algbw_gbps', 'busbw_gbps', 'wrong')
    for prefix, chunk in (('out_of_place', rest[0:4]), ('in_place', rest[4:8])):
        part = {}
        for name, val in zip(names, chunk):
            try:
                part[name] = float(val) if name != 'wrong' else val
            except ValueError:
                part[name] = val
        if part:
            row[prefix] = part
    for key in ('size', 'count', 'root'):
        if key in row:
            try:
                row[key] = int(row[key])
            except ValueError:
                pass
    return row
