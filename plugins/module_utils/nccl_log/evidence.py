# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-process evidence: what each INFO / WARN message of a process shows (connection hops, communicators, NVLS /
CollNet, versions, settings, return-code chains), and the nccl-tests output.  Messages about the networks (``NET/...``,
the network selected, GDR verdicts, plugins) are read by network.py's handlers, filed in the table here.

A new INFO message goes into ``info``'s table (``_INFO_HANDLERS``): a small handler ``h(an, proc, msg, lineno, raw)``
under the first character of the messages it reads.  A handler returns a false value when the message is not its
own (the next handler is asked), True when it read it, or ``(replay kind, value)`` when a repeat of the same line may
be replayed from scan.py's memo without parsing: only for handlers whose effect on a repeat is that kind
(``REPLAY_NONE``: nothing new; ``REPLAY_NET``: one more hop over network ``value``; ``REPLAY_SELECT``: network ``value``
selected; ``REPLAY_NVLS``: NVLS evidence) once the process has seen the line.  The kinds are defined in network.py.

Connection lines: ``Ring|Channel NN[/C] : a[x] -> b[y] [send|receive] via NET/<name>/<dev>[/GDRDMA]``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.comms import comm_of_thread, name_comm
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.grammar import _RANK_TAG, _WRAP_MPI, _WRAP_SLURM
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.network import (
    REPLAY_NET, REPLAY_NVLS, _IB_UNAVAILABLE, _NOTHING_NEW, _assigned, _bootstrap, _gdr, _ib_failed, _ib_probe_23,
    _initialized, _net, _nic_distance, _p2p_plugin, _using, ib_unavailable)
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.rules import (
    PROXY_SOCKET_MEANING, classify_error, return_code_meaning)

MAX_BUSBW_ROWS = 1000


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
    ``chain``: the open return-code chains (see ``_chain``).  ``comms``: the communicators this process printed, by comm
    pointer (``Comm``); ``tid_comm``: the communicator each thread last named (its connection lines belong to it).
    ``nvls`` is use (an NVLS buffer set up or an NVLS tree connected), ``nvls_capacity`` the first line that only shows
    NVLS possible (non-zero ``nvls channels``, ``NVLS Head``, ``NVLS multicast support is available``).
    """

    __slots__ = ('key', 'host', 'pid', 'devs', 'versions', 'selected', 'hop_nets', 'hop_line',
                 'gdr_true', 'gdr_false', 'intra', 'ib_devices', 'ib_dev_keys', 'ib_probe_line',
                 'socket_init_line', 'bootstrap', 'ofi', 'ofi_provider', 'plugin_loaded', 'p2p_plugin', 'plugin_path',
                 'collnet_plugin', 'nvls', 'collnet', 'own_ranks', 'net_peers', 'nranks', 'env',
                 'ifaces', 'eras', 'gids', 'chain', 'tree_internode', 'loopback_bootstrap', 'socket_ifaces',
                 'ib_datapath_line', 'net_code', 'comm_nodes', 'ofi_modern', 'net_same_gpu',
                 'socket_warn', 'gdr_no_module', 'dmabuf', 'gdr_verdict', 'gdr_topo',
                 'socket_datapath_line', 'comms', 'tid_comm', 'nvls_capacity')

    def __init__(self, key, host, pid):
        self.key, self.host, self.pid = key, host, pid
        self.hop_line = self.gdr_true = self.gdr_false = self.ib_probe_line = self.socket_init_line = None
        self.ib_datapath_line = self.socket_datapath_line = self.gdr_no_module = None
        self.selected = self.ofi_provider = self.plugin_loaded = self.p2p_plugin = self.plugin_path = None
        self.collnet_plugin = self.nranks = self.chain = self.net_code = self.socket_warn = None
        self.nvls = self.collnet = self.gdr_verdict = self.nvls_capacity = None       # (None: the log does not say)
        self.bootstrap = self.ofi = self.ofi_modern = False
        self.dmabuf = self.tree_internode = self.loopback_bootstrap = False
        self.devs, self.versions, self.own_ranks, self.net_peers, self.net_same_gpu, self.ib_dev_keys = (
            set(), set(), set(), set(), set(), set())
        self.hop_nets, self.intra, self.env, self.ifaces, self.gids, self.comms, self.tid_comm = {}, {}, {}, {}, {}, {}, {}
        self.ib_devices, self.eras, self.socket_ifaces, self.comm_nodes, self.gdr_topo = [], [], [], [], []

    def ranks_up_to(self, rank, nranks):
        """A message names ``rank`` of this process in a communicator of ``nranks`` ranks."""
        self.own_ranks.add(rank)
        if self.nranks is None or nranks > self.nranks:
            self.nranks = nranks


# ---------------------------------------------------------------- INFO messages
# Return-code frame: "init.cc:903 -> 5", "... -> 2 [Proxy Thread]", "misc/socket.cc:100 -> 2 (Connection refused)"
# (EQCHECK).
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
        comm = comm_of_thread(proc, an.tid)
        if side == 'send':
            proc.own_ranks.add(src)
            proc.net_peers.add((dst, name))
            if comm is not None:
                comm.add_peer(src, dst, name)
        elif side == 'receive':
            proc.own_ranks.add(dst)
            proc.net_peers.add((src, name))
            if comm is not None:
                comm.add_peer(dst, src, name)
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
    comm = comm_of_thread(proc, an.tid)
    if comm is not None:
        comm.add_ranks(src, dst)
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
    """"Connected ... CollNet", "Connected NVLS", "DMA-BUF is available on GPU device N" (GDR without
    nvidia_peermem)."""
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


# graph/connect.cc (connectNvls, 2.18+) prints the NVLS heads / trees of the topology whenever NVLS is supported,
# before any algorithm is chosen: "NVLS Head  0:  0  8 16", "NVLS Trees : ...".  Capacity, not use.
_NVLS_TREE = re.compile(r'^NVLS (?:Head\s+\d+:(?:\s+-?\d+)+|Trees? ?:)')
# transport/nvls.cc: "NVLS comm 0x.. headRank h nHeads n ..." when the NVLS buffers are set up (2.18-2.21 at init,
# 2.22+ with runtime connect at the first collective that runs an NVLS algorithm).  Use.
_NVLS_COMM = re.compile(r'^NVLS comm 0x[0-9a-f]+ headRank')


def _nvls(an, proc, msg, lineno, raw):
    """NVLS lines: buffers set up (use), the NVLS topology or multicast support (capacity), or NVLS not available."""
    if not msg.startswith('NVLS'):
        return None
    if _NVLS_COMM.match(msg):
        proc.nvls = True
        proc.intra['NVLS'] = proc.intra.get('NVLS') or lineno
        an.note('nvls', lineno, raw)
    elif _NVLS_TREE.match(msg) or msg.startswith('NVLS multicast support is available'):
        proc.nvls_capacity = proc.nvls_capacity or lineno
        an.note('nvls', lineno, raw)
    elif ('not available' in msg or 'not supported' in msg) and proc.nvls is None:
        proc.nvls = False
        an.note('nvls', lineno, raw)
    return True


_TREES = re.compile(r'\[\d+\] ([-\d/]+)->(\d+)->(-?\d+)')


def _trees(an, proc, msg, lineno, raw):
    """"Trees [0] 1/-1/-1->0->-1 ...": the ranks of this process; a node with two children spans nodes."""
    if not msg.startswith('Trees'):
        return None
    comm = comm_of_thread(proc, an.tid)
    for down, me, _up in _TREES.findall(msg):
        proc.own_ranks.add(int(me))
        if comm is not None:
            comm.add_ranks(int(me))
        kids = [d for d in down.split('/') if d and not d.startswith('-')]
        if len(kids) >= 2:
            proc.tree_internode = True
    return _NOTHING_NEW


_CHANNEL_SUMMARY = re.compile(r'(\d+) coll channels, (?:(\d+) collnet channels, )?(?:(\d+) nvls channels, )?')


def _channel_summary(an, proc, msg, lineno, raw):
    """"16 coll channels, 0 collnet channels, 0 nvls channels, ..." (init.cc): channels the communicator may use.  Zero
    says a feature is off; a non-zero count is capacity, not use (NCCL_ALGO may exclude NVLS, and 2.22+ sets NVLS
    up only when a collective chooses it)."""
    mc = _CHANNEL_SUMMARY.search(msg) if ' channels' in msg else None
    if mc is None:
        return None
    if mc.group(2) is not None and int(mc.group(2)) == 0 and proc.collnet is None:
        proc.collnet = False
        an.note('collnet', lineno, raw)
    if mc.group(3) is not None:
        if int(mc.group(3)) > 0:
            proc.nvls_capacity = proc.nvls_capacity or lineno
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
    (2.1x+, with NCCL's own count of the communicator's nodes) or "ncclCommInitRank comm 0x.. rank 3 nranks 16 ...";
    the communicator they name becomes the one of the thread that printed them (parsed every time: the pointer
    differs between communicators)."""
    mn = _NNODES.search(msg) if ' nNodes ' in msg else None
    if mn is not None:
        proc.comm_nodes.append((int(mn.group(2)), int(mn.group(3))))
        an.note('nodes', lineno, raw)
    else:
        mn = _RANK_NRANKS.search(msg) if ' nranks ' in msg else None
        if mn is None:
            return None
    proc.ranks_up_to(int(mn.group(1)), int(mn.group(2)))
    name_comm(an.comms_kept, proc, an.tid, msg, mn.re is _NNODES and int(mn.group(3)))
    return True


# "Rank 1: 0 CollNet devices" (each rank) and "Local CollNet device counts across ranks: min 0 max 0" (rank 0), 2.30.3+;
# "Communicator has 1 nodes which is less than CollNet node threshold 2, disabling CollNet" (2.7+).
_COLLNET_OFF = re.compile(r'^(?:Rank \d+: 0 CollNet devices|Local CollNet device counts across ranks: min \d+ max 0\b|'
                          r'Communicator has \d+ nodes which is less than CollNet node threshold \d+, disabling CollNet)')


def _collnet_off(an, proc, msg, lineno, raw):
    """NCCL says this communicator has no CollNet: CollNet is not used unless a CollNet connection shows otherwise."""
    if 'CollNet' not in msg or _COLLNET_OFF.match(msg) is None:
        return None
    if proc.collnet is None:
        proc.collnet = False
        an.note('collnet', lineno, raw)
    return _NOTHING_NEW


# info's table: the handlers asked for a message, by its first character, in order (the first that reads it wins).
# Connection lines come before the version banner, every other message after it; the communicator summaries may
# start with any character.
_ANY = (_channel_summary, _comm_ranks, _nic_distance)
_INFO_HANDLERS = {
    'C': (_channel, _collnet, _in_use, _version_banner, _collnet_off) + _ANY,
    'R': (_channel, _version_banner, _collnet_off) + _ANY,
    'L': (_version_banner, _collnet_off) + _ANY,
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
_IB_DATAPATH_WARN = re.compile(r'^transport/net_ib(?:\.\w+|/[\w.]+):\d+(?: \([^)]*\))? (?:NCCL )?WARN NET/IB ?: '
                               r'(?:\S+ )?(?:Got completion|ncclIbTest: Got CQE)')
# A data-path failure of NCCL's socket transport (transport/net_socket.cc): sockets carried the data.
_SOCKET_DATAPATH_WARN = re.compile(r'^transport/net_socket\.cc:\d+(?: \([^)]*\))? (?:NCCL )?WARN NET/Socket ?:'
                                   r'(?! ?no interface found)')


def warn(an, proc, text, msg, lineno, shown):
    """A WARN line: ``text`` from its source location on, ``msg`` after "WARN", ``shown`` the text as the log prints
    it (it differs when autolinks were removed): that one is quoted in ``errors``."""
    if proc.chain is not None and an.tid in proc.chain:
        flush_chain(an, proc, an.tid)
    text = text.strip()
    if msg.startswith('NET/OFI'):
        proc.ofi = True     # aws-ofi-nccl's own WARN: the plugin library is loaded in this process
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
