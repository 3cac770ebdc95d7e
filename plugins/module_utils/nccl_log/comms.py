# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Communicators: ranks are per communicator (``ncclCommSplit`` and ``ncclCommShrink`` renumber them), so the ranks a
connection line names are read in the communicator of the thread that printed it - the one its last communicator
line named.  NCCL prints a communicator's connections from the thread that initialises it or, with runtime connect
(2.22+), first uses it.  The line forms (init.cc): ``[[Rank R] ]<call> comm 0x.. rank R nranks N cudaDev D nvmlDev D
busId B commId 0x.. - Init START|COMPLETE``, a split / shrink's ``... parent 0x.. [childCount C ]color X key K- Init
START``, ``comm 0x.. rank R nRanks N nNodes M localRanks L localRank l MNNVL x`` (2.20+)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# Communicators kept in memory, all processes together: past KEEP_ALL, one its thread has left is dropped when no
# network connection was read in it (only its ranks were kept: another process's NIC loopback in the same
# communicator is then not recognised); past MAX_COMMS a new one is not followed (its lines count as unkeyed).  A log
# of thousands of ranks times hundreds of communicators stays in bounded memory.
KEEP_ALL = 256
MAX_COMMS = 4096


class Comm:
    """One communicator as one process printed it.  Ranks are per communicator (``ncclCommSplit`` /
    ``ncclCommShrink`` renumber them), so the ranks a connection line names are read in the communicator of the thread
    that printed it: ``ranks`` this process's and its node's ranks that lines of this communicator show, ``peers``
    (peer rank, network) of its network connections.  ``comm_id`` (``commId 0x..``, 2.16+), or ``function``, ``color``
    and ``child_count`` of a split / shrink, tell the same communicator in another process (its pointer differs)."""

    __slots__ = ('ptr', 'rank', 'nranks', 'nnodes', 'local_ranks', 'comm_id', 'function', 'parent', 'color',
                 'child_count', 'ranks', 'peers')

    def __init__(self, ptr):
        self.ptr = ptr
        self.rank = self.nranks = self.nnodes = self.local_ranks = self.comm_id = self.function = None
        self.parent = self.color = self.child_count = None
        self.ranks = self.peers = None      # (made when a line adds one: most communicators never need them)

    def add_ranks(self, *ranks):
        """Ranks of this process or its node that a line of this communicator shows."""
        if self.ranks is None:
            self.ranks = set()
        self.ranks.update(ranks)

    def add_peer(self, own, peer, name):
        """A network connection of rank ``own`` (this process's) to ``peer`` over network ``name``."""
        self.add_ranks(own)
        if self.peers is None:
            self.peers = set()
        self.peers.add((peer, name))

    def shown_ranks(self):
        """This process's rank and the ranks its lines of this communicator show."""
        shown = set(self.ranks) if self.ranks else set()
        if self.rank is not None:
            shown.add(self.rank)
        return shown

    def identity(self):
        """What the same communicator has in common in every process that printed it."""
        if self.comm_id and int(self.comm_id, 16):
            return ('id', self.comm_id)
        if self.color is not None:
            return ('split', self.function, self.nranks, self.color, self.child_count)
        return ('size', self.nranks)

    def public(self, proc):
        out = {'host': proc.host, 'pid': proc.pid, 'comm': self.ptr, 'rank': self.rank, 'nranks': self.nranks}
        for key in ('nnodes', 'local_ranks', 'comm_id', 'function', 'parent'):
            val = getattr(self, key)
            if val is not None:
                out[key] = val
        return out


def comm_of_thread(proc, tid):
    """The communicator thread ``tid`` of ``proc`` last named, or None."""
    return proc.tid_comm.get(tid) if proc.tid_comm else None


# The communicator a line names: "[Rank 3] ncclCommInitRank comm 0x.. rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId ..
# commId 0x.. - Init START" (commId 2.16+, "[Rank N] " 2.29+), "ncclCommShrink comm 0x.. rank 1 nranks 2 ... parent
# 0x.. childCount 0 color 0 key 3- Init START" (split 2.18+, shrink 2.27+, childCount 2.29+), "comm 0x.. rank 6 nRanks
# 8 nNodes 1 localRanks 8 localRank 6 MNNVL 0" (2.20+), "comm 0x.. rank 0 nranks 16 cudaDev 0 busId 1a000 - Init
# COMPLETE" (older).
_COMM_NAMED = re.compile(r'(?:^(ncclComm\w*) )?\bcomm (0x[0-9a-fA-F]+) rank (\d+) n[Rr]anks (\d+)')
_COMM_FIELDS = re.compile(r'\b(commId|parent|color|childCount|localRanks) (-?0x[0-9a-fA-F]+|-?\d+)')


def name_comm(kept, proc, tid, msg, nnodes):
    """The communicator named by ``msg`` (a line of thread ``tid`` of ``proc`` that gives a rank and a size; ``nnodes``
    NCCL's node count when the line has it), made the thread's current one.  ``kept``: a one-element list, the number
    of communicators kept by all processes."""
    mc = _COMM_NAMED.search(msg)
    if mc is None:
        return
    ptr = mc.group(2)
    comm = proc.comms.get(ptr)
    old = proc.tid_comm.get(tid) if proc.tid_comm else None
    if old is not None and old is not comm and old.peers is None and kept[0] > KEEP_ALL \
            and sum(1 for c in proc.tid_comm.values() if c is old) == 1:
        del proc.comms[old.ptr]         # left by its thread, no network connection read in it: see KEEP_ALL
        kept[0] -= 1
    if comm is None:
        if kept[0] >= MAX_COMMS:
            proc.tid_comm.pop(tid, None)
            return
        comm = proc.comms[ptr] = Comm(ptr)
        kept[0] += 1
    comm.rank, comm.nranks = int(mc.group(3)), int(mc.group(4))
    if mc.group(1):
        comm.function = mc.group(1)
    if nnodes:
        comm.nnodes = nnodes
    for key, val in _COMM_FIELDS.findall(msg[mc.end():]):
        if key == 'commId':
            comm.comm_id = val
        elif key == 'parent':
            comm.parent = val
        elif key == 'color':
            comm.color = int(val)
        elif key == 'childCount':
            comm.child_count = int(val)
        else:
            comm.local_ranks = int(val)
    proc.tid_comm[tid] = comm
