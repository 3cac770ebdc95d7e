# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Streaming analyser for NCCL_DEBUG=INFO output (NCCL 2.2 - 2.30).

Pure Python, no Ansible imports.  Feed it lines (``NcclLogAnalyzer.feed``) or a whole
file (``analyze_file``) and ask for ``result()``.  Memory is bounded by the number of
processes, ranks and distinct error texts, never by the size of the log.

Grammar notes (from NCCL's printf formats, not from sample files):

* line prefix ``host:pid:tid [cudaDev] NCCL INFO msg`` (2.3+), ``host:pid:tid [dev] INFO msg`` (2.2),
  ``host:pid:tid [dev] file:line [(func)] NCCL WARN msg``; an optional ``[%F %T] `` timestamp in front;
  launchers add ``[1,3]<stdout>:``, ``0: ``, ``[trainer3]:`` or ``(pid=.., ip=..)`` in front; log
  shippers wrap the line in JSON.  The bare ``NCCL version X`` banner has no prefix up to 2.21.
* network selection: ``Using internal Network X`` (2.2-2.3), none (2.4-2.5), ``Using network X`` (2.6+),
  ``Assigned NET plugin X to comm`` (2.27+, where ``IB``/``Socket`` are the built-in transports).
* ``NET/Socket : Using ...`` up to 2.4 is the bootstrap network, not the data transport.
* connection lines ``Ring|Channel NN[/C] : a[x] -> b[y] [send|receive] via NET/<name>/<dev>[/GDRDMA]``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections import Counter
from operator import itemgetter, methodcaller

from ansible_collections.hpcnet.rdma.plugins.module_utils.rdma_sysfs import RdmaSysfs, SysfsError, select_roce_v2_ipv4_gid_index

RETURN_CODES = {
    0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
    4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress",
}

# ibv_wc_status values (rdma-core, libibverbs/verbs.h) and what they usually mean under NCCL.
WC_STATUS = {
    1: ("IBV_WC_LOC_LEN_ERR", "local length error"),
    2: ("IBV_WC_LOC_QP_OP_ERR", "local QP operation error"),
    4: ("IBV_WC_LOC_PROT_ERR", "local protection error: memory registration failed, often GPUDirect RDMA "
        "(nvidia_peermem / DMA-BUF) not usable for the buffer"),
    5: ("IBV_WC_WR_FLUSH_ERR", "work request flushed: the QP already went to error state after an earlier failure"),
    7: ("IBV_WC_BAD_RESP_ERR", "bad response"),
    8: ("IBV_WC_LOC_ACCESS_ERR", "local access error"),
    9: ("IBV_WC_REM_INV_REQ_ERR", "remote invalid request"),
    10: ("IBV_WC_REM_ACCESS_ERR", "remote access error: peer memory registration / rkey problem"),
    11: ("IBV_WC_REM_OP_ERR", "remote operation error"),
    12: ("IBV_WC_RETRY_EXC_ERR", "transport retry counter exceeded: the peer did not answer - link down, "
         "wrong GID index / unroutable RoCE GID, lossy fabric (PFC/ECN) or peer process gone"),
    13: ("IBV_WC_RNR_RETRY_EXC_ERR", "receiver-not-ready retry counter exceeded"),
    15: ("IBV_WC_REM_INV_RD_REQ_ERR", "remote invalid RD request"),
    16: ("IBV_WC_REM_ABORT_ERR", "remote aborted"),
    19: ("IBV_WC_FATAL_ERR", "fatal error"),
    20: ("IBV_WC_RESP_TIMEOUT_ERR", "response timeout"),
    21: ("IBV_WC_GENERAL_ERR", "general error"),
}

MAX_ERRORS = 200
MAX_LINE = 1 << 16      # characters of one line that are read
MAX_BUSBW_ROWS = 1000

# ---------------------------------------------------------------- regexes
# "host:pid:tid [cudaDev] ": the host part may come truncated ("...-48") from a pasted or clipped log.
# A paste may put a blank before the first colon ("NAME :70918:70927 [0] ", an anonymised host).
_PREFIX = re.compile(r'(?<![\w.\-])([\w.\-]+) ?:(\d+):(\d+) \[(-?\d+)\] ')
# A prefix whose first colon was lost ("host22337:22400 [6] "): host and pid run together.
_PREFIX_GLUED = re.compile(r'(?<![\w.\-])([\w.\-]*\d):(\d+) \[(-?\d+)\] ')
# A prefix the poster masked with words ("hostname:portnum [0] INFO ..."), only when INFO or WARN follows.
_MASKED_PREFIX = re.compile(r'^(?![\d:.,]+ \[)[^\s:\[\]]{1,64}(?::[^\s:\[\]]{1,64}){1,2} \[-?\d+\] '
                            r'(?=(?:NCCL )?(?:INFO|WARN) |[\w./\-+]+:\d+ (?:NCCL )?WARN )')
# Two processes writing into one line: "g183:161264:166015g183:161258:166018 [1] " - the second prefix follows a cut
# "host:pid:" of the first, whose tid digits run into the second host name.
_CUT_PREFIX = re.compile(r'(?<![\w.\-])[\w.\-]+:\d+:$')
# The source location NCCL (or a net plugin) prints before WARN: "transport/net_ib.cc:93", "misc/socket.cc:50
# (ncclSocketConnect)", or a plugin's C++ signature "tcpxResult_t tcpxCommProgress(tcpxComm*):1231".
_WARN_LOC = r'(?:[\w./\-+]+|(?:[\w:<>*&~,]+ ){0,8}[\w:~<>]+\([^()]*\)(?: const)?):\d+'
# The network name NCCL prints: up to five words ("IB", "Socket", "IBext_v8", "AWS Libfabric", "NCCL RDMA Plugin v6").
_NET_NAME = r'\w[\w.\-]{0,63}(?: \w[\w.\-]{0,63}){0,4}'
_TIMESTAMP = re.compile(r'^\[\d{4}-\d\d-\d\d[ T][\d:.,]+\] ')
# A log viewer's column of ISO timestamps (CloudWatch console copy: "  | 2025-05-16T16:39:51.208-07:00 | line", the
# separator sometimes lost), stripped before the line is read.
_ISO_COLUMN = re.compile(r'^\|?\s*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s*\|\s*|\s+|(?=\S))')
# Terminal colour codes (Ray, rich consoles): "\x1b[36m(pid=12)\x1b[0m ...".
_ANSI = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')
# Ray's log deduplication appends " [repeated 15x across cluster]".
_RAY_REPEATED = re.compile(r'\s*\[repeated \d+x across cluster\]\s*$')
# Several NCCL lines joined into one by a terminal paste: split before each further "host:pid:tid [dev] NCCL INFO|WARN".
_JOINED = re.compile(r'\s+(?=[\w.\-]+:\d+:\d+ \[-?\d+\] NCCL (?:INFO|WARN) )')
# A WARN anywhere in a line without the NCCL prefix ("[5] misc/ibvwrap.cc:173 NCCL WARN ..."): from its source location.
_WARN_ANY = re.compile(r'(?:^|\s)((?:' + _WARN_LOC + r'(?: \([^)]*\))? )?NCCL WARN (.*))$')
# NCCL INFO messages recognised even when a log shipper dropped "host:pid:tid [dev] NCCL INFO" as well.
# Without a prefix, "Using network X" is read only for network names NCCL and its usual plugins print (an
# application's "Using network interface eth0" is not NCCL's).
_BARE_NET_NAME = r'(?:IB|Socket|IBext\w*|(?:AWS )?Libfabric|NCCL RDMA Plugin v\d+|[A-Za-z]\w*_v\d+|FastSocket|\w*TCPX\w*)'
_BARE_INFO = re.compile(r'^(?:NET/\w+ ?:|NET/Plugin|Using (?:internal )?[Nn]etwork ' + _BARE_NET_NAME + r'\s*$|'
                        r'P2P plugin \S|Plugin Path : |Bootstrap ?: |'
                        r'NCCL_[A-Z0-9_]+ set (?:by \w+(?: \w+)? )?to |(?:Channel|Ring) \d+(?:/\d+)? : \d|Trees \[|'
                        r'Connected NVLS|NVLS comm 0x|CollNet \d+|Assigned NET plugin |Initialized NET plugin |'
                        r'ncclCommInit\w* comm 0x|comm 0x[0-9a-f]+ rank \d+ n[Rr]anks \d+|\d+ coll channels, )')
# Cheap test for a line that may hold a bare message once timestamps and wrappers are removed (_BARE_INFO decides).
_BARE_HINT = re.compile(r'NET/|[Nn]etwork |P2P plugin |Plugin Path|Bootstrap|NCCL_[A-Z0-9_]+ set |Channel |Ring |Trees|NVLS|'
                        r'CollNet|NET plugin|ncclCommInit|comm 0x| coll channels')
# Markdown autolinks a code host adds to a pasted log: "[net_ib.cc:1909](http://net_ib.cc:1909/)" -> "net_ib.cc:1909".
_AUTOLINK = re.compile(r'\[([^\[\]\s]+)\]\((?:https?://)?[^()\s]*\)')
_WRAP_MPI = re.compile(r'^\[(\d+),(\d+)\]<(?:stdout|stderr)>:')
_WRAP_SLURM = re.compile(r'^(\d+): ')
_WRAP_TAG = re.compile(r'^\[([\w.\-]+)\]: ?')
# pdsh / mpi-operator "node01: " or "10.3.35.83: " in front of nccl-tests "#" lines, version banners or NCCL lines.
_WRAP_HOST = re.compile(r'^[A-Za-z0-9][\w.\-]{0,127}: (?=#|[NR]CCL (?:version|INFO|WARN)|[\w.\-]+ ?:\d+:\d+ \[)')
_WRAP_RAY = re.compile(r'^\((?:[\w.\-]+ )?pid=(\d+)(?:, ip=([\w.:\-]+))?\) ')
_RANK_TAG = re.compile(r'^\[Rank (\d+)\] ')
_WARN_HEAD = re.compile(r'^(?:(' + _WARN_LOC + r')(?: \([^)]*\))? )?(?:NCCL )?WARN (.*)$')
# "NCCL version 2.21.5+cuda12.4"; RCCL (ROCm): "RCCL version : 2.21.5-HEAD:9a0e6a1".
_VERSION = re.compile(r'[NR]CCL version :? ?(\d{1,6}\.\d{1,6}\.\d{1,6})')
# The bracket after a rank is the GPU's busId (2.5-2.11, hex) or NVML index (2.12+): both name a GPU of one machine.
_HOP = re.compile(r'^(?:Ring|Channel) (\d+)(?:/(\d+))? : (\d+)(?:\[([0-9a-fA-Fx]+)\])? -> (\d+)(?:\[([0-9a-fA-Fx]+)\])?'
                  r'(?: \[(send|receive)\])? via (.*\S)\s*$')
# RCCL (ROCm's NCCL) ends connection lines with the communicator: "via P2P/IPC comm 0x5609976f9470 nRanks 32".
_RCCL_COMM_TAIL = re.compile(r' comm 0x[0-9a-fA-F]+ nRanks \d+(?: busId [0-9a-fA-F]+)?$')
_COLLNET_HOP = re.compile(r'^(?:CollNet|Coll) (\d+)(?:/\d+)? : (\d+) \[(send|receive)\] via (.*\S)\s*$')
# "NET/<name>/<dev>[(<proxy rank>)][/GDRDMA][/Shared]": the "(N)" is the PXN proxy rank (2.12+).
_NET_VIA = re.compile(r'^(?:NET|COLLNET)/(.+?)/(\d+)(?:\((\d+)\))?((?:/[^/\s]+)*)$')
_RING_LIST = re.compile(r'^(?:Channel|Ring) \d+(?:/\d+)? :((?:\s+\d+)+)\s*$')
_RING_LIST_CUT = (20, 32)
_NIC_DISTANCE = re.compile(r'^CUDA Dev \d+(?:\[\d+\])?, (' + _NET_NAME + r') NIC distance ?:')
_TREES = re.compile(r'\[\d+\] ([-\d/]+)->(\d+)->(-?\d+)')
# "[0]mlx5_0:1/IB"; newer NCCL may add rail and plane fields after the port: "[0]mlx5_0:1:0/IB", "[0]mlx5_0:1::0/RoCE".
_IB_DEV = re.compile(r'\[(\d+)\]\s?([\w.\-+]+):(\d+)(?::\d*){0,2}/(IB|RoCE)')
# 2.2/2.3 list the IB devices one per line: "NET/IB: [0] mlx5_1:1/IB"; the NET-subsystem trace of newer releases
# names the uverbs device and adds properties: "NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000 ...".
_IB_DEV_LINE = re.compile(r'^NET/IB ?: \[(\d+)\] ?([\w.\-+]+?)(?::uverbs\d+)?:(\d+)(?::\d*){0,2}/(IB|RoCE)(?:\s+\w+=\S*)*\s*$')
_IFACE_IP = re.compile(r'(?:^|[\s\]])([A-Za-z][\w.\-]*):([0-9A-Fa-f.:%\w]+?)<\d+>')
_ENV = re.compile(r'^(NCCL_[A-Z0-9_]+) set (?:by environment )?to ((?:.*\S)?)\s*$')
_ENV_CONF = re.compile(r'^(NCCL_[A-Z0-9_]+) set by (?:environment|config file|[\w ]+) to ((?:.*\S)?)\s*$')
# 2.2-2.3 "Using internal Network IB" / "Using external Network AWS Libfabric" (a plugin); 2.6+ "Using network IB".
_USING_NET = re.compile(r'^Using (?:internal |external )?[Nn]etwork (' + _NET_NAME + r')\s*$')
_ASSIGNED = re.compile(r'^Assigned NET plugin (.+?) to comm')
# Return-code frame: "init.cc:903 -> 5", "... -> 2 [Proxy Thread]", "misc/socket.cc:100 -> 2 (Connection refused)" (EQCHECK).
_RET = re.compile(r'^([\w./\-+]+\.(?:cc|cu|cpp|c|h|hpp)):(\d+) -> (\d+)(?:\s+\S.*)?$')
_RANK_NRANKS = re.compile(r'\brank (\d+) nranks (\d+)\b')
# "comm 0x.. rank 6 nRanks 8 nNodes 1 localRanks 8 localRank 6 MNNVL 0" (2.1x+): the communicator's node count.
_NNODES = re.compile(r'\brank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+)')
_CHANNEL_SUMMARY = re.compile(r'(\d+) coll channels, (?:(\d+) collnet channels, )?(?:(\d+) nvls channels, )?')
# QP connect trace: "NET/IB: Dev 0 Port 1 qpn 58 mtu 3 GID 3 (0/..)" (2.1x) and
# "NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1047 mtu 5 query_ece={...} GID 0 (80FE/..)" (2.20+); "Dev" is NCCL's device index.
_GID_TRACE = re.compile(r'^NET/IB ?: (?:NCCL (?:Merged)?Dev|Dev) (\d+) (?:IbDev \d+ )?Port (\d+) qpn (\d+) mtu (\d+) '
                        r'(?:query_ece=(?:\{[^}]*\}|\S+) )?GID (\d+) \(([0-9A-Fa-f]{1,16})/([0-9A-Fa-f]{1,16})\)')
# libibverbs could not be loaded (misc/ibvwrap.cc; WARN up to 2.18, INFO from 2.19), or the built-in IB transport failed to
# initialise (2.27+): NCCL cannot use IB on this process.
_IB_UNAVAILABLE = re.compile(r'^(?:Failed to open libibverbs\.so|Failed to initialize NET plugin IB\b)')
# A data-path failure reported by NCCL's own verbs transport (transport/net_ib.cc, .cu, or transport/net_ib/*.cc).
_IB_DATAPATH_WARN = re.compile(r'^transport/net_ib(?:\.\w+|/[\w.]+):\d+(?: \([^)]*\))? (?:NCCL )?WARN NET/IB ?: (?:\S+ )?'
                               r'(?:Got completion|ncclIbTest: Got CQE)')
# A data-path failure of NCCL's socket transport (transport/net_socket.cc): sockets carried the data.
_SOCKET_DATAPATH_WARN = re.compile(r'^transport/net_socket\.cc:\d+(?: \([^)]*\))? (?:NCCL )?WARN NET/Socket ?:'
                                   r'(?! ?no interface found)')
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
_PLUGIN_LOADED = re.compile(r'^NET/Plugin ?: Loaded (net|coll|collnet) plugin (.+?)(?: \((v\d+)\))?\s*$')
# "NET/Plugin : Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory."
_PLUGIN_LOAD_ERROR = re.compile(r'^NET/Plugin ?: Plugin load returned \d+ ?: ?(.*?)\.?\s*$')
# "P2P plugin IBext" (HPC-X nccl-rdma-sharp-plugins up to v7), "P2P plugin v8 IBext_v8" (v8+: API version first).
_P2P_PLUGIN = re.compile(r'^P2P plugin (?:v\d+ )?(\S+)')
_PLUGIN_PATH = re.compile(r'^Plugin Path : (\S+)')
# Wordings of aws-ofi-nccl releases from 2023 on, which may call the network "Libfabric" rather than "AWS Libfabric".
_OFI_MODERN = re.compile(r'^NET/OFI (?:Running on \S+ platform|Creating one domain|Using transport protocol|Internode latency|'
                         r'NIC group|Support for (?:global|DMA-BUF) registrations|Setting NCCL_TOPO_FILE)')
# "Selected Provider is efa (found 4 nics)"; aws-ofi-nccl 1.13+: "Selected provider is tcp, fabric is 10.0.0.0/24 (found 1 nics)".
_OFI_PROVIDER = re.compile(r'^NET/OFI Selected [Pp]rovider is ([^\s,]+?),?(?: fabric is \S+)?(?: \(found (\d+) nics\))?\s*$')
_TESTS_RANK = re.compile(r'^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)')
_TESTS_HEADER = re.compile(r'^#\s+size\s+count\s+type\s')
_TESTS_AVG = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*([\d.]+)')
_TESTS_ROW = re.compile(r'^\s*(\d+)\s+(\d+)\s+([A-Za-z]\w*)\s+(.*)$')      # size count type ... (a dtype name)
_TESTS_FAIL = re.compile(r'(Test (?:NCCL|CUDA) failure .*|Test failure \S+)$')
_WATCHDOG = re.compile(r'(\[Rank \d+\] Watchdog caught collective operation timeout.*)$')
_TORCH_NCCL_ERR = re.compile(r'((?:torch\.distributed\.)?(?:DistBackendError|RuntimeError): NCCL error.*|NCCL error in: .*|'
                             r'(?:(?<=what\(\): )|(?<=what\(\):  ))NCCL error.*)$')
_WC_STATUS = re.compile(r'(?:with (?:error|status)[ =]|status=)(?:IBV_WC_\w+\()?(\d+)')
# connectNvls prints the NVLS heads / trees only when NVLS is set up: "NVLS Head  0:  0  8 16", "NVLS Trees : ...".
_NVLS_TREE = re.compile(r'^NVLS (?:Head\s+\d+:(?:\s+-?\d+)+|Trees? ?:)')
# A process killed by a signal: Open MPI "[host:pid] *** Process received signal ***", UCX "[host:pid:0:tid] Caught
# signal 11 (Segmentation fault: ...)".
_CRASH = re.compile(r'\*\*\* Process received signal \*\*\*|Caught signal (\d+) \(([^:)]{1,64})')
_NVLS_COMM = re.compile(r'^NVLS comm 0x[0-9a-f]+ headRank')

# analyze_file's line filter: a line reaches the Python parser only when it holds one of these tokens (or when
# _LEADING matches its start).  This tuple is the ONE list: _relevant(), the grep pattern (_GREP_ERE) and the
# coverage test of the chunk scans (_TOKEN_SCANS) all derive from it.
_TOKENS = (b'NET/', b'via ', b'-> ', b'WARN', b'Using', b'#', b'NCCL_', b'version', b'lugin', b'nranks ', b'channels',
           b'NVLS', b'ollNet', b'Trees', b'Channel ', b'Ring ', b'failure', b'Watchdog', b'NCCL error', b'NIC distance',
           b'Bootstrap', b'Init COMPLETE', b'libibverbs', b'nNodes', b'Net/IB', b'Direct RDMA', b'DMA-BUF',
           b'received signal', b'Caught signal')


_TOKEN_SEARCH = re.compile(b'|'.join(re.escape(t) for t in _TOKENS)).search


def _relevant(line):
    """Could any rule use this line (bytes)?  True when it holds one of ``_TOKENS``."""
    return _TOKEN_SEARCH(line) is not None


# Whole-chunk scans used by analyze_file (each runs in C over a multi-MB chunk, never per line), together covering
# exactly _TOKENS: (anchor byte or None, literal or None, regex "token ... up to the end of its line").  A scan is
# skipped when its rare anchor byte (a memchr-speed test) or its literal (a fast substring search) is absent from the
# chunk; tokens sharing a literal start share one scan.
_TOKEN_SCANS = tuple((anchor, literal, re.compile(rx)) for anchor, literal, rx in (
    (None, None, rb'N(?:ET/|et/IB|CCL_|VLS|CCL error|IC distance|(?<=ollN)et)[^\n]*'),   # NET/ Net/IB NCCL_ NVLS NCCL error NIC distance ollNet
    (None, None, rb'v(?:ia |ersion)[^\n]*'),                                       # via, version
    (None, None, rb'hannel(?:(?<=Channel) |(?<=channel)s)[^\n]*'),                 # Channel, channels
    (b'W', None, rb'W(?:ARN|atchdog)[^\n]*'),
    (b'>', b'-> ', rb'-> [^\n]*'),
    (b'U', b'Using', rb'Using[^\n]*'),
    (b'#', None, rb'#[^\n]*'),
    (None, b'lugin', rb'lugin[^\n]*'),
    (None, b'nranks ', rb'nranks [^\n]*'),
    (None, b'nNodes', rb'nNodes[^\n]*'),
    (b'T', b'Trees', rb'Trees[^\n]*'),
    (None, b'Ring ', rb'Ring [^\n]*'),
    (None, b'failure', rb'failure[^\n]*'),
    (None, b'libibverbs', rb'libibverbs[^\n]*'),
    (b'B', b'Bootstrap', rb'Bootstrap[^\n]*'),
    (b'M', b'Init COMPLETE', rb'Init COMPLETE[^\n]*'),
    (b'R', b'Direct RDMA', rb'Direct RDMA[^\n]*'),
    (b'F', b'DMA-BUF', rb'DMA-BUF[^\n]*'),
    (None, b' signal', rb'(?:(?<=received)|(?<=Caught)) signal[^\n]*'),
))
# Lines _LEADING can match start with whitespace, '{' or a digit.
_LEAD_SCAN = re.compile(rb'\n[ \t\r\x0b\x0c{0-9]')

# The common line shape "host:pid:tid [dev] NCCL INFO msg" (ASCII, no surrounding blanks): for it the per-line rules
# are known exactly, so a repeat of a line already analysed can be replayed without parsing it again.
_STRICT = re.compile(rb'([A-Za-z0-9_][\w.\-]*):(\d+):\d+ \[-?\d+\] NCCL INFO (\S(?:[^\n]*\S)?)\Z')
_COMM_INIT = re.compile(rb'ncclCommInit\w* comm 0x[0-9a-f]+ rank (\d+) nranks (\d+) ')
_STRICT_PREFIX = re.compile(rb'[A-Za-z0-9_][\w.\-]*:\d+:\d+ \[-?\d+\] NCCL INFO \Z')
_MEMO_MAX = 100000
_REPLAY_NONE, _REPLAY_NET, _REPLAY_SELECT, _REPLAY_NVLS = 0, 1, 2, 3


def _hop_via(mh):
    """The transport of a connection line matched by _HOP (``mh``), without RCCL's communicator tail."""
    via = mh.group(8)
    if ' nRanks ' in via:
        via = _RCCL_COMM_TAIL.sub('', via) or via
    return via


def _replay_kind(msg):
    """How to replay a repeat of a strict INFO line with message ``msg`` (str), mirroring ``_info``'s branch order.

    Returns (kind, value) or None when a repeat must be parsed again (state-dependent or unknown rules).
    Replays never add evidence: the caller falls back to the parser while an evidence list still has room.
    """
    if msg.startswith('[Rank ') or 'CCL version' in msg:
        return None
    if ' -> ' in msg and _RET.match(msg):
        return None
    c0 = msg[0]
    if c0 == 'C' or c0 == 'R':
        if (msg.startswith('Channel ') or msg.startswith('Ring ')) and ' via ' in msg:
            mh = _HOP.match(msg)
            if mh:
                via = _hop_via(mh)
                mn = _NET_VIA.match(via)
                if mn and via.startswith('NET/'):
                    return _REPLAY_NET, mn.group(1)
                return _REPLAY_NONE, None
        return None
    if c0 == 'T':
        return (_REPLAY_NONE, None) if msg.startswith('Trees') else None
    if c0 == 'U':
        mu = _USING_NET.match(msg)
        return (_REPLAY_SELECT, mu.group(1)) if mu else None
    if c0 == 'A':
        if msg.startswith('Assigned NET plugin'):
            ma = _ASSIGNED.match(msg)
            return (_REPLAY_SELECT, ma.group(1)) if ma else None
        return None
    if c0 == 'I':
        return (_REPLAY_NONE, None) if msg.startswith('Initialized NET plugin') else None
    if c0.isdigit() and ' channels' in msg:
        mc = _CHANNEL_SUMMARY.search(msg)
        if mc:
            if mc.group(3) is not None and int(mc.group(3)) > 0:
                return _REPLAY_NVLS, None
            return _REPLAY_NONE, None
        return None
    if c0 == 'n' and msg.startswith('ncclCommInit') and ' nranks ' in msg and ' channels' not in msg:
        return (_REPLAY_NONE, None) if _RANK_NRANKS.search(msg) else None
    return None


class _ChunkScanner:
    """analyze_file's engine: finds the lines the old per-line filter would pass with whole-chunk C scans, and
    replays repeats of common lines (channel connections, Trees, comm init, network selection) from a memo."""

    def __init__(self, an):
        self.an = an
        self.memo = {}
        self.prefixes = {}

    def chunk(self, data, base):
        """Analyse the complete lines of ``data`` (no trailing newline); ``base`` lines precede it.  Returns its line count."""
        ends = set()
        find = data.find
        for anchor, literal, rx in _TOKEN_SCANS:
            if anchor is not None and anchor not in data:
                continue
            pos = 0
            if literal is not None:
                pos = find(literal)
                if pos < 0:
                    continue
            ends.update([m.end() for m in rx.finditer(data, pos)])
        leading = _LEADING.match
        starts = [m.start() + 1 for m in _LEAD_SCAN.finditer(data)]
        starts.append(0)
        for s in starts:
            e = find(b'\n', s)
            if e < 0:
                e = len(data)
            if e not in ends and leading(data, s, e):
                ends.add(e)
        count = data.count
        rfind = data.rfind
        ends = sorted(ends)
        starts = [rfind(b'\n', 0, e) + 1 for e in ends]
        state = [0, 0]      # newlines counted in data[:state[1]], state[1]

        def lineno_of(i):
            s = starts[i]
            state[0] += count(b'\n', state[1], s)
            state[1] = s
            return base + state[0] + 1

        lines = [data[s:e] for s, e in zip(starts, ends)]
        if lines and max(map(len, lines)) > _LINE_BYTES:       # (max/map/len run in C)
            lines = _heads(lines)
        self.take_many(lines, lineno_of)
        return state[0] + count(b'\n', state[1]) + 1

    def take_many(self, lines, lineno_of, check=False):
        """``take`` each of ``lines`` in order; ``lineno_of(i)`` gives the number of ``lines[i]`` (asked in increasing i).

        Same effect as ``for i, line in enumerate(lines): take(line, lineno_of(i), check)``, computed by runs: a run is
        a stretch of lines that all repeat memorised lines (``_lookup``), so no line of it is parsed and the state the
        replay conditions read (return-code chains, evidence counts) is constant along it.  A run's replays only add
        counts or set ``selected``, so they are applied per distinct memo entry (``_replay_run``); a run where one of
        them is not allowed goes line by line through ``take``.
        """
        hits = list(map(self.memo.get, lines))
        lookup = self._lookup
        find = hits.index
        start = 0       # first line of the pending run
        pos = 0
        end = len(hits)
        while pos < end:
            try:
                pos = find(None, pos)
            except ValueError:
                break
            hit = lookup(lines[pos])    # memorised since the batch lookup, or a comm-init line with a known key
            if hit is not None:
                hits[pos] = hit
            else:
                if start < pos:
                    self._replay_run(hits, lines, start, pos, lineno_of, check)
                self.take(lines[pos], lineno_of(pos), check)
                start = pos + 1
            pos += 1
        if start < end:
            self._replay_run(hits, lines, start, end, lineno_of, check)

    def _replay_run(self, hits, lines, start, end, lineno_of, check):
        an = self.an
        counts = Counter(hits[start:end])
        select = {}
        sel_ok = len(an.evidence.get('selection', ())) >= 5
        nvls_ok = len(an.evidence.get('nvls', ())) >= 5
        for proc, kind, value in counts:
            if proc.chain is not None or (kind == _REPLAY_NVLS and not nvls_ok):
                break
            if kind == _REPLAY_SELECT:
                if not sel_ok or select.setdefault(proc, value) != value:
                    break
        else:
            for (proc, kind, value), n in counts.items():
                if kind == _REPLAY_NET:
                    proc.hop_nets[value] = proc.hop_nets.get(value, 0) + n
                elif kind == _REPLAY_SELECT:
                    proc.selected = value
            an.lines_seen += end - start
            an.nccl_lines += end - start
            return
        take = self.take
        for i in range(start, end):
            take(lines[i], lineno_of(i), check)

    def _lookup(self, line):
        """The memo entry that replays ``line``, or None (no side effect)."""
        hit = self.memo.get(line)
        if hit is None:
            key = self._comm_key(line)
            if key is not None:
                hit = self.memo.get(key)
        return hit

    def _comm_key(self, line):
        """Memo key of an ``ncclCommInit* comm 0x.. rank R nranks N`` strict INFO line: its prefix, R and N (the comm
        pointer and id differ between communicators, the replay does not depend on them).  None for other lines.

        Same test as ``_STRICT.match(line)`` + ``_COMM_INIT.match`` of its message, with the prefix check cached: the
        host part has no blank, so the prefix ends at the first " NCCL INFO "."""
        idx = line.find(b' NCCL INFO ')
        if idx < 0 or not line.startswith(b'ncclCommInit', idx + 11):
            return None
        prefix = line[:idx + 11]
        ok = self.prefixes.get(prefix)
        if ok is None:
            if len(self.prefixes) >= _MEMO_MAX:
                self.prefixes.clear()
            ok = self.prefixes[prefix] = _STRICT_PREFIX.match(prefix) is not None
        msg = line[idx + 11:]
        if not ok or msg[-1:].isspace() or b'\n' in msg or not line.isascii():
            return None
        mi = _COMM_INIT.match(msg)
        if mi is None or b'CCL version' in line or b' channels' in line or line.count(b'] NCCL ') > 1 or b'\x1b' in line \
                or len(line) > MAX_LINE or line.endswith(b'across cluster]'):
            return None
        return b'\x00%s\x00%s\x00%s' % (prefix, mi.group(1), mi.group(2))

    def take(self, line, lineno, check=False):
        """Analyse one selected ``line`` (bytes, no newline) numbered ``lineno``; replay it when it repeats a memorised line.

        ``check``: apply the exact selection rule (``_wanted``) first, for lines a superset filter (grep) passed.  A
        memorised line or comm-init key always passed that rule when it was first seen, so only new lines are checked.
        """
        an = self.an
        memo = self.memo
        hit = memo.get(line)
        if hit is None:
            key = self._comm_key(line)
            if key is not None:
                # (_COMM_INIT matched " nranks ": the line is one analyze_file selects)
                hit = memo.get(key)
                if hit is None:
                    an.feed_at(line, lineno)
                    self._remember(key, line)
                    return
            if hit is None:
                if check and not _wanted(line):
                    return
                an.feed_at(line, lineno)
                self._remember(line, line)
                return
        proc, kind, value = hit
        if proc.chain is None and (kind != _REPLAY_SELECT or len(an.evidence.get('selection', ())) >= 5) and \
                (kind != _REPLAY_NVLS or len(an.evidence.get('nvls', ())) >= 5):
            an.lines_seen += 1
            an.nccl_lines += 1
            if kind == _REPLAY_NET:
                proc.hop_nets[value] = proc.hop_nets.get(value, 0) + 1
            elif kind == _REPLAY_SELECT:
                proc.selected = value
            return
        an.feed_at(line, lineno)

    def _remember(self, key, line):
        if not line.isascii() or b'](' in line or b'\x1b' in line or len(line) > MAX_LINE or line.count(b'] NCCL ') > 1 \
                or line.endswith(b'across cluster]'):
            return      # autolinks are rewritten and joined lines split before parsing: never replay those
        # What the parser read once wrappers, timestamps, quotes and blanks were off, and the process it chose.
        inner = self.an._inner
        if inner is None:
            return
        text, proc = inner
        ms = _STRICT.match(text.encode('ascii'))
        if ms is None:
            return
        msg = ms.group(3).decode('ascii')
        kind = _replay_kind(msg)
        if kind is None:
            return
        if self.an.procs.get(ms.group(1).decode('ascii') + ':' + ms.group(2).decode('ascii')) is not proc:
            return      # the host was mapped (_known_host): a later process may change that mapping
        if len(self.memo) >= _MEMO_MAX:
            self.memo.clear()
        self.memo[key] = (proc, kind[0], kind[1])


# nccl-tests result rows and JSON records are recognised by their start.
_LEADING = re.compile(rb'\s*(?:\{|\d+\s+\d+\s+\w)')
# The same rule as a POSIX ERE for GNU grep in the C locale, where [[:space:]] is Python's bytes \s (space, \t, \n,
# \v, \f, \r) and [[:alnum:]_] its bytes \w.  Lines grep passes are checked again in Python (``_wanted``), so this
# pattern only has to select a superset; the tests check that it selects exactly the same lines.
_LEADING_ERE = '^[[:space:]]*([{]|[0-9]+[[:space:]]+[0-9]+[[:space:]]+[[:alnum:]_])'


def _ere_literal(token):
    """``token`` (ASCII bytes) as an ERE matching it literally: specials in brackets (where they are plain), ``^`` escaped."""
    return ''.join('\\^' if c == '^' else ('[%s]' % c if c in '.[]()*+?{}|$\\' else c) for c in token.decode('ascii'))


_GREP_ERE = '|'.join([_ere_literal(t) for t in _TOKENS] + [_LEADING_ERE])


def _wanted(line):
    """The exact selection rule of analyze_file (bytes line without its newline)."""
    return _relevant(line) or _LEADING.match(line) is not None


# Lines worth a closer look contain one of these; everything else is skipped cheaply.
_MARKERS = ('INFO', 'WARN', 'NCCL', 'RCCL', 'Rank', 'failure', 'bandwidth', 'Watchdog', 'received signal', 'Caught signal')

# NCCL plugin-loader wordings and the releases that print them (inclusive, as (major, minor)).
_LOADER_ERAS = (
    (re.compile(r'^NET/Plugin : No plugin found \(libnccl-net\.so\)\.\s*$'), ((2, 3), (2, 4))),
    (re.compile(r'^NET/Plugin : No plugin found \(libnccl-net\.so\), using internal implementation'), ((2, 5), (2, 16))),
    (re.compile(r'^NET/Plugin : Plugin load \(libnccl-net\.so\) returned'), ((2, 17), (2, 18))),
    (re.compile(r'^NET/Plugin : No plugin found, using internal implementation'), ((2, 17), (2, 18))),
    (re.compile(r'^NET/Plugin : dlerror='), ((2, 19), (2, 20))),
)

_LOOPBACK_IFACES = ('lo',)
# An all-digit dotted address that is not a.b.c.d with octets 0-255 (IPv6 and anonymised forms are kept).
_BAD_DOTTED = re.compile(r'^(?=[\d.]+$)(?!(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)$)')


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


class _Proc:
    """Evidence collected for one process (host + pid, or one launcher tag when the NCCL prefix is missing)."""

    __slots__ = ('key', 'host', 'pid', 'devs', 'versions', 'selected', 'hop_nets', 'hop_line',
                 'gdr_true', 'gdr_false', 'intra', 'ib_devices', 'ib_dev_keys', 'ib_probe_line',
                 'socket_init_line', 'bootstrap', 'ofi', 'ofi_provider', 'plugin_loaded', 'p2p_plugin', 'plugin_path',
                 'collnet_plugin', 'nvls', 'nvls_line', 'collnet', 'own_ranks', 'net_peers', 'nranks', 'env',
                 'ifaces', 'eras', 'gids', 'chain', 'tree_internode', 'loopback_bootstrap', 'socket_ifaces',
                 'internal_plugin', 'ib_datapath_line', 'net_code', 'comm_nodes', 'ofi_modern', 'net_same_gpu',
                 'socket_warn', 'gdr_no_module', 'dmabuf', 'gdr_verdict', 'gdr_topo',
                 'socket_datapath_line')

    def __init__(self, key, host, pid):
        self.key = key
        self.host = host
        self.pid = pid
        self.devs = set()
        self.versions = set()
        self.selected = None
        self.hop_nets = {}
        self.hop_line = None
        self.gdr_true = None
        self.gdr_false = None
        self.intra = {}
        self.ib_devices = []
        self.ib_dev_keys = set()
        self.ib_probe_line = None
        self.socket_init_line = None
        self.bootstrap = False
        self.ofi = False
        self.ofi_provider = None
        self.plugin_loaded = None
        self.p2p_plugin = None
        self.plugin_path = None
        self.collnet_plugin = None
        self.nvls = None
        self.nvls_line = None
        self.collnet = None
        self.own_ranks = set()
        self.net_peers = set()
        self.net_same_gpu = set()      # peers of network hops between two GPUs printing the same busId / NVML index
        self.socket_warn = None     # (errors key, line) of this process's last WARN classified as bootstrap
        self.gdr_no_module = None   # line of "GPU Direct RDMA Disabled for HCA n 'x'" without a reason, or "(no module)"
        self.dmabuf = False         # "DMA-BUF is available on GPU device N": GDR without nvidia_peermem (2.13+)
        self.gdr_verdict = None     # the network transport's own verdict (True/False), when no connection line decides
        self.socket_datapath_line = None    # a WARN of NCCL's socket transport on the data path
        self.gdr_topo = []          # (rank or None, True/False) of the topology's GPU / NIC verdicts
        self.nranks = None
        self.env = {}
        self.ifaces = {}
        self.eras = []
        self.gids = {}
        self.chain = None
        self.tree_internode = False
        self.loopback_bootstrap = False
        self.socket_ifaces = []
        self.internal_plugin = False
        self.ib_datapath_line = None
        self.net_code = None
        self.comm_nodes = []
        self.ofi_modern = False


class NcclLogAnalyzer:
    """Incremental analyser: ``feed(line)`` any number of times, then ``result()``."""

    def __init__(self):
        self.lineno = 0
        self.procs = {}
        self._tid = None            # thread id of the line being read (its prefix), for return-code chains
        self._inner = None          # (text after wrappers, process) of the last whole INFO line read, see _ChunkScanner
        self.glued_keys = {}        # host + pid run together -> that process (prefixes that lost their first colon)
        self.hosts_seen = set()
        self.pid_suffixes = {}      # (pid, proper suffix of a host seen with that pid) -> the first such host
        self.versions = {}
        self.errors = {}
        self.errors_dropped = 0
        self.env = {}
        self.tests_ranks = {}
        self.tests_devices_seen = False
        self.busbw_rows = []
        self.busbw_columns = None
        self.busbw_avg = None
        self.in_table = False
        self.evidence = {}
        self.lines_seen = 0
        self.nccl_lines = 0
        self.parse_errors = 0
        self._linked = None

    # ------------------------------------------------------------ input
    def feed_lines(self, lines):
        for line in lines:
            self.feed(line)
        return self

    def feed(self, line):
        """Analyse the next line (str or bytes, with or without its newline).

        Lines that no rule can use (the selection rule of analyze_file, ``_wanted``) are only counted, so a log gives
        the same result whether it comes as a file, a string or a command's output.
        """
        self.lineno += 1
        raw = line if isinstance(line, bytes) else line.encode('utf-8', 'replace')
        if len(raw) > _LINE_BYTES:
            raw = raw[:_LINE_BYTES]     # a line is read up to its first _LINE_BYTES bytes, in every input mode
        if _wanted(raw.rstrip(b'\r\n')):
            self.feed_at(raw, self.lineno)

    def feed_at(self, line, lineno):
        """Analyse one line whose 1-based line number the caller knows (used by analyze_file)."""
        self._inner = None
        if isinstance(line, bytes):
            line = line.decode('utf-8', 'replace')
        try:
            self._feed(line, lineno)
        except Exception:  # pylint: disable=broad-except
            # A malformed line must never stop the analysis of the rest of the log; the fuzz tests keep this at 0.
            self.parse_errors += 1

    def _feed(self, line, lineno):
        if not line:
            return
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE]      # no NCCL line is this long: keep memory and output bounded
        line = line.rstrip('\r\n')
        stripped = line.lstrip()
        if not stripped:
            return
        if stripped[0] == '{' and '"' in stripped:
            text = _json_message(stripped)
            if text is not None:
                for sub in text.splitlines():
                    self._line(sub, lineno)
                return
        if line.count('] NCCL ') > 1:
            for i, part in enumerate(_JOINED.split(line)):
                self._line(part, lineno, joined=i > 0)
            return
        self._line(line, lineno, whole=True)

    # ------------------------------------------------------------ per line
    def _line(self, line, lineno, joined=False, whole=False):
        """Analyse one line (``whole``: the whole input line, not a part of a JSON record or of joined lines)."""
        self._inner = None
        if self.in_table:
            if self._table_line(line):
                return
        for marker in _MARKERS:
            if marker in line:
                break
        else:
            if not (self.tests_devices_seen or '#' in line or _BARE_HINT.search(line)):
                return
        s = line.strip()
        if s.startswith('> '):
            s = s[2:]
        if '\x1b' in s:
            s = _ANSI.sub('', s)
        if s.endswith('across cluster]'):
            s = _RAY_REPEATED.sub('', s)
        self._linked = None
        if '](' in s:
            linked = s
            s = _AUTOLINK.sub(r'\1', s)
            if s != linked:
                self._linked = (linked, s)
        if s[:1] == '|' or s[:1].isdigit():
            m = _ISO_COLUMN.match(s)
            if m:
                s = s[m.end():]
                head, sep, tail = s.partition(' | ')
                if sep and tail.strip() == head.strip():     # the viewer repeats the message after the column
                    s = head
        c0 = s[:1]
        if c0 == '[':
            m = _TIMESTAMP.match(s)
            if m:
                s = s[m.end():]
                c0 = s[:1]
        tag = None
        if c0 == '[' or c0 == '(' or c0.isalnum():      # the launcher wrappers start with one of these
            for rx in ((_WRAP_MPI, _WRAP_RAY, _WRAP_SLURM, _WRAP_TAG, _WRAP_HOST) if not c0.isalpha() else (_WRAP_HOST,)):
                m = rx.match(s)
                if m:
                    tag = m.group(0).strip()
                    s = s[m.end():].lstrip()
                    m2 = _TIMESTAMP.match(s)
                    if m2:
                        s = s[m2.end():]
                    break
        m = _PREFIX.search(s)
        proc = None
        rest = s
        self._tid = None
        if m and m.start() <= 64:
            host, pid, dev = m.group(1), m.group(2), m.group(4)
            self._tid = m.group(3)
            if m.start() and host[0].isdigit() and _CUT_PREFIX.search(s, 0, m.start()):
                cut = host.lstrip('0123456789')     # the cut tid may have run into a host name seen before
                if cut in self.hosts_seen:
                    host = cut
            if host not in self.hosts_seen:
                # (a clipped host sticks to the text before it, "[15]23:83:"; a host at the start of the text or
                # after a blank is taken as printed: containers often share pid 1)
                clipped = m.start() > 0 and not s[m.start() - 1].isspace()
                host = self._known_host(host, pid, joined, clipped)
            key = host + ':' + pid
            proc = self.procs.get(key)
            if proc is None:
                proc = self.procs[key] = _Proc(key, host, int(pid))
                self.hosts_seen.add(host)
                for i in range(max(1, len(host) - 253), len(host)):      # (pid, proper suffix of a host) -> the first such host
                    self.pid_suffixes.setdefault((pid, host[i:]), host)
                glued = host + pid
                # two processes whose host and pid run together alike ("node1"+"23", "node12"+"3"): neither
                self.glued_keys[glued] = proc if glued not in self.glued_keys else None
            proc.devs.add(int(dev))
            rest = s[m.end():]
        else:
            mg = _PREFIX_GLUED.search(s)
            if mg and mg.start() <= 64:
                proc = self.glued_keys.get(mg.group(1))      # only a process already seen by its whole prefix
                if proc is not None:
                    self._tid = mg.group(2)
                    proc.devs.add(int(mg.group(3)))
                    rest = s[mg.end():]
            else:
                mm = _MASKED_PREFIX.match(s)
                if mm:
                    # a prefix the poster masked ("hostname:portnum [0] INFO ..."): no process, but the message is read
                    rest = s[mm.end():]
                    if rest.startswith('INFO '):
                        rest = 'NCCL ' + rest
        self.lines_seen += 1
        # Level and message.
        if proc is not None:
            if rest.startswith('NCCL INFO ') or rest.startswith('INFO '):
                self.nccl_lines += 1
                if whole and m is not None and m.start() == 0:
                    # what the prefix and message were read from once launcher wrappers and timestamps were taken
                    # off: the memo may replay repeats of this line like those of a bare prefixed line
                    self._inner = (s, proc)
                self._info(proc, rest[10:] if rest[0] == 'N' else rest[5:], lineno, line)
                return
            mw = _WARN_HEAD.match(rest)
            if mw:
                self.nccl_lines += 1
                self._warn(proc, rest, mw.group(2), lineno, self._as_printed(rest))
                return
            idx = rest.find('NCCL WARN ')
            if idx >= 0:        # a source location _WARN_HEAD does not know, e.g. "[Rank 3] file.cc:12 NCCL WARN ..."
                self.nccl_lines += 1
                self._warn(proc, rest, rest[idx + 10:], lineno, self._as_printed(rest))
                return
            self._other(proc, rest, lineno, tag)
            return
        # No NCCL prefix (stripped by a shipper, or not an NCCL line).
        idx = rest.find('NCCL INFO ')
        if idx >= 0:
            self.nccl_lines += 1
            self._info(self._tag_proc(tag), rest[idx + 10:], lineno, line)
            return
        mw = _WARN_HEAD.match(rest)
        if mw and 'WARN' in rest:
            self.nccl_lines += 1
            self._warn(self._tag_proc(tag), rest, mw.group(2), lineno, self._as_printed(rest))
            return
        mw = _WARN_ANY.search(rest) if 'NCCL WARN ' in rest else None
        if mw:
            self.nccl_lines += 1
            self._warn(self._tag_proc(tag), mw.group(1), mw.group(2), lineno, self._as_printed(mw.group(1)))
            return
        if _BARE_INFO.match(rest):
            self.nccl_lines += 1
            self._info(self._tag_proc(tag), rest, lineno, line)
            return
        self._other(None, rest, lineno, tag)

    def _known_host(self, host, pid, joined, clipped):
        """``host`` of a new prefix, or the host already seen that it stands for: a host clipped at its start with the
        pid of a process of that host ("[15]23:83:" for "worker-23:83:"), or, in a line several writes ran into, one
        whose end it is ("...cudaDev 1 nvmlax-vllm-0:273:273 [3]" for "lax-vllm-0")."""
        seen = self.pid_suffixes.get((pid, host)) if clipped else None
        if seen is not None:
            return seen
        if joined:
            for i in range(max(1, len(host) - 253), len(host) - 2):     # the longest seen host name (3-253 characters) ending host
                if host[i:] in self.hosts_seen:
                    return host[i:]
        return host

    def _as_printed(self, tail):
        """``tail`` (the end of the current line as read, autolinks removed) as the log shows it, for quoting."""
        if self._linked is None:
            return tail
        linked, clean = self._linked
        head = clean[:len(clean) - len(tail)]
        return linked[len(head):] if clean.endswith(tail) and linked.startswith(head) else tail

    def _tag_proc(self, tag):
        key = 'tag:' + tag if tag else '-'
        proc = self.procs.get(key)
        if proc is None:
            proc = self.procs[key] = _Proc(key, None, None)
        return proc

    # ------------------------------------------------------------ messages
    def _info(self, proc, msg, lineno, raw):
        m = _RANK_TAG.match(msg)
        if m:
            proc.own_ranks.add(int(m.group(1)))
            msg = msg[m.end():]
        msg = msg.strip()
        if not msg:
            return
        c0 = msg[0]
        # Return-code traces: "init.cc:903 -> 5".
        if ' -> ' in msg:
            mr = _RET.match(msg)
            if mr:
                if proc.net_code is None and mr.group(1).startswith('transport/net_'):
                    if mr.group(1).startswith('transport/net_ib'):
                        proc.net_code = ('IB', lineno)
                    elif mr.group(1).startswith('transport/net_socket'):
                        proc.net_code = ('Socket', lineno)
                self._chain(proc, mr.group(1) + ':' + mr.group(2) + ' -> ' + mr.group(3), int(mr.group(3)), lineno)
                return
        if proc.chain is not None and self._tid in proc.chain:
            self._flush_chain(proc, self._tid)
        if c0 == 'C' or c0 == 'R':
            if msg.startswith('Channel ') or msg.startswith('Ring '):
                if ' via ' in msg:
                    mh = _HOP.match(msg)
                    if mh:
                        self._hop(proc, mh, lineno, raw)
                        return
                else:
                    ml = _RING_LIST.match(msg)
                    if ml:
                        # NCCL cuts this list at 20 ranks (2.3/2.4) or a 128-byte line (2.5-2.7, 28-32 ranks;
                        # 2.8+ ends a cut list with "...", which this pattern does not match): 20-32 may be cut
                        n = len(ml.group(1).split())
                        if not _RING_LIST_CUT[0] <= n <= _RING_LIST_CUT[1] and (proc.nranks is None or n > proc.nranks):
                            proc.nranks = n
                        return
            if msg.startswith('CollNet') or msg.startswith('Coll '):
                mc = _COLLNET_HOP.match(msg)
                if mc:
                    proc.collnet = True
                    self._evidence('collnet', lineno, raw)
                    if 'GDRDMA' in mc.group(4):
                        proc.gdr_true = proc.gdr_true or lineno
                    return
            if msg.startswith('Connected') and 'ollNet' in msg:
                proc.collnet = True
                self._evidence('collnet', lineno, raw)
                return
            if msg.startswith('Connected NVLS'):
                proc.nvls = True
                proc.nvls_line = proc.nvls_line or lineno
                self._evidence('nvls', lineno, raw)
                return
        if 'CCL version' in msg:
            mv = _VERSION.search(msg)
            if mv:
                self._version(proc, mv.group(1), lineno)
                return
        if c0 == 'G' and msg.startswith('GPU Direct RDMA') and self._gdr_verdict(proc, msg, lineno, raw):
            return
        if c0 == 'D' and msg.startswith('DMA-BUF is available on GPU device'):
            proc.dmabuf = True
            self._evidence('dmabuf', lineno, raw)
            return
        if c0 == 'F' and _IB_UNAVAILABLE.match(msg):
            self._ib_unavailable(proc, lineno, raw)
            return
        if c0 == 'N':
            if msg.startswith('NET/'):
                self._net(proc, msg, lineno, raw)
                return
            if msg.startswith('Net/IB') and 'returned 0 devices' in msg:
                # 2.3: "Net/IB: call to devices() returned 0 devices." - the IB probe found nothing
                proc.ib_probe_line = proc.ib_probe_line or lineno
                self._evidence('ib_probe', lineno, raw)
                return
            if msg.startswith('NCCL_'):
                me = _ENV_CONF.match(msg) or _ENV.match(msg)
                if me:
                    name, value = me.group(1), me.group(2)
                    if value.endswith('.') and not value.endswith('..'):
                        value = value[:-1]
                    proc.env.setdefault(name, value)
                    self.env.setdefault(name, value)
                    return
            if msg.startswith('NVLS'):
                if _NVLS_COMM.match(msg):
                    proc.nvls = True
                    proc.intra['NVLS'] = proc.intra.get('NVLS') or lineno
                    self._evidence('nvls', lineno, raw)
                elif _NVLS_TREE.match(msg):
                    proc.nvls = True
                    self._evidence('nvls', lineno, raw)
                elif 'not available' in msg or 'not supported' in msg:
                    if proc.nvls is None:
                        proc.nvls = False
                        self._evidence('nvls', lineno, raw)
                return
        if c0 == 'U':
            mu = _USING_NET.match(msg)
            if mu:
                proc.selected = mu.group(1)
                self._evidence('selection', lineno, raw)
                return
            if msg.startswith('Using non-device net plugin'):
                return
        if c0 == 'A' and msg.startswith('Assigned NET plugin'):
            ma = _ASSIGNED.match(msg)
            if ma:
                proc.selected = ma.group(1)
                self._evidence('selection', lineno, raw)
            return
        if c0 == 'I' and msg.startswith('Initialized NET plugin'):
            proc.internal_plugin = True
            return
        if c0 == 'B' and msg.startswith('Bootstrap'):
            proc.bootstrap = True
            self._ifaces(proc, msg, bootstrap=True)
            return
        if c0 == 'P':
            mp = _P2P_PLUGIN.match(msg)
            if mp:
                proc.p2p_plugin = mp.group(1)
                self._evidence('plugin', lineno, raw)
                return
            mp = _PLUGIN_PATH.match(msg)
            if mp:
                proc.plugin_path = mp.group(1)
                return
        if c0 == 'T' and msg.startswith('Trees'):
            for down, me, _up in _TREES.findall(msg):
                proc.own_ranks.add(int(me))
                kids = [d for d in down.split('/') if d and not d.startswith('-')]
                if len(kids) >= 2:
                    proc.tree_internode = True
            return
        if ' channels' in msg:
            mc = _CHANNEL_SUMMARY.search(msg)
            if mc:
                if mc.group(2) is not None and int(mc.group(2)) == 0 and proc.collnet is None:
                    proc.collnet = False
                    self._evidence('collnet', lineno, raw)
                if mc.group(3) is not None:
                    nv = int(mc.group(3))
                    if nv > 0:
                        proc.nvls = True
                        self._evidence('nvls', lineno, raw)
                    elif proc.nvls is None:
                        proc.nvls = False
                        self._evidence('nvls', lineno, raw)
                return
        if ' nNodes ' in msg:
            mn = _NNODES.search(msg)
            if mn:
                proc.own_ranks.add(int(mn.group(1)))
                n = int(mn.group(2))
                if proc.nranks is None or n > proc.nranks:
                    proc.nranks = n
                proc.comm_nodes.append((n, int(mn.group(3))))
                self._evidence('nodes', lineno, raw)
                return
        if ' nranks ' in msg:
            mn = _RANK_NRANKS.search(msg)
            if mn:
                proc.own_ranks.add(int(mn.group(1)))
                n = int(mn.group(2))
                if proc.nranks is None or n > proc.nranks:
                    proc.nranks = n
                return
        if 'NIC distance' in msg:
            # 2.4 prints no selection line; its topology line names the network in use:
            # "CUDA Dev 1[1], AWS Libfabric NIC distance : SYS", "CUDA Dev 0[0], IB NIC distance :  PIX"
            mname = _NIC_DISTANCE.match(msg)
            if mname:
                name = mname.group(1)
                if name in ('IB', 'Socket'):
                    if proc.selected is None:
                        proc.selected = name
                        self._evidence('selection', lineno, raw)
                else:
                    proc.hop_nets.setdefault('name:' + name, 0)
            return

    def _net(self, proc, msg, lineno, raw):
        if msg.startswith('NET/IB'):
            devs = _IB_DEV.findall(msg) if ' Using ' in msg else _IB_DEV_LINE.findall(msg)
            if devs:
                for idx, name, port, ll in devs:
                    k = (name, int(port))
                    if k not in proc.ib_dev_keys:
                        proc.ib_dev_keys.add(k)
                        proc.ib_devices.append({'name': name, 'port': int(port), 'link_layer': ll, 'index': int(idx)})
                self._ifaces(proc, msg.split('OOB', 1)[-1] if 'OOB' in msg else '', bootstrap=False)
                self._evidence('ib_devices', lineno, raw)
                return
            # (2.2/2.3 print "Using interface X for sideband communication" when IB initialisation starts: with
            # the socket network chosen afterwards, the probe found no device)
            if 'No device found' in msg or 'sideband' in msg or 'No IP interface' in msg or 'Failed to' in msg:
                proc.ib_probe_line = proc.ib_probe_line or lineno
                self._evidence('ib_probe', lineno, raw)
                return
            mg = _GID_TRACE.match(msg)
            if mg:
                dev, port, gid_index = int(mg.group(1)), int(mg.group(2)), int(mg.group(5))
                proc.gids[(dev, port)] = (gid_index, mg.group(6), mg.group(7), lineno)
                return
        if self._gdr_verdict(proc, msg, lineno, raw):
            return
        if msg.startswith('NET/Socket'):
            if 'Using' in msg and _IFACE_IP.search(msg):      # not "Using 2 threads and 8 sockets per thread"
                proc.socket_init_line = proc.socket_init_line or lineno
                proc.socket_ifaces = _IFACE_IP.findall(msg)
                self._ifaces(proc, msg, bootstrap=False)
                self._evidence('socket', lineno, raw)
            return
        if msg.startswith('NET/OFI'):
            proc.ofi = True
            if 'disabling GDR' in msg and proc.gdr_verdict is None:
                proc.gdr_verdict = False    # "NET/OFI Could not disable CUDA API usage for HMEM, disabling GDR"
                self._evidence('gdr', lineno, raw)
            if _OFI_MODERN.match(msg):
                proc.ofi_modern = True
            mo = _OFI_PROVIDER.match(msg)
            if mo:
                proc.ofi_provider = mo.group(1)
                self._evidence('plugin', lineno, raw)
            return
        if msg.startswith('NET/Plugin'):
            ml = _PLUGIN_LOAD_ERROR.match(msg)
            if ml and 'No such file or directory' not in ml.group(1):
                # the library exists but the dynamic loader refused it (a missing dependency, GLIBC, wrong ELF class)
                self._add_error(msg.strip(), 'plugin load', lineno, proc,
                                meaning='a net plugin library was found but the dynamic loader refused it (the reason is in '
                                        'the line): NCCL goes on with its internal network - fix the library or unset '
                                        'NCCL_NET_PLUGIN')
            mp = _PLUGIN_LOADED.match(msg)
            if mp:
                if mp.group(1) == 'net':
                    proc.plugin_loaded = (mp.group(2), mp.group(3))
                else:
                    proc.collnet_plugin = mp.group(2) + (' (%s)' % mp.group(3) if mp.group(3) else '')
                self._evidence('plugin', lineno, raw)
                return
            for rx, era in _LOADER_ERAS:
                if rx.match(msg):
                    proc.eras.append((era, lineno, msg))
                    break
            return
        if msg.startswith('NET : Using') or msg.startswith('NET: Using'):
            self._ifaces(proc, msg, bootstrap=True)
            proc.bootstrap = True

    def _gdr_verdict(self, proc, msg, lineno, raw):
        """A GPU Direct RDMA verdict line (not a connection line); True when ``msg`` is one."""
        mt = _GDR_TOPO.match(msg)
        if mt:
            if len(proc.gdr_topo) < 64:
                proc.gdr_topo.append((int(mt.group(2)) if mt.group(2) else None, mt.group(1) == 'Enabled'))
            self._evidence('gdr', lineno, raw)
            return True
        mp = _GDR_PLUGIN_MODE.match(msg)
        if mp:
            if mp.group(1) == 'DMABUF':
                proc.dmabuf = True
            proc.gdr_verdict = True
            self._evidence('gdr', lineno, raw)
            return True
        md = _GDR_VERDICT.match(msg)
        if md is None:
            return False
        reason = md.group(2).strip()
        if md.group(1) == 'Enabled':
            proc.gdr_verdict = True
        elif not reason or reason.startswith('(no module'):
            # nvidia_peermem is missing; GDR may still work through DMA-BUF (2.13+), see _Proc.dmabuf
            proc.gdr_no_module = proc.gdr_no_module or lineno
        elif proc.gdr_verdict is None:
            proc.gdr_verdict = False        # e.g. "(distance 4 >= 2)"
        self._evidence('gdr', lineno, raw)
        return True

    def _ifaces(self, proc, msg, bootstrap):
        for iface, ip in _IFACE_IP.findall(msg):
            if _BAD_DOTTED.match(ip):
                continue        # "10.10.10..2": mistyped or hand-edited, it would count as another machine
            proc.ifaces.setdefault(iface, set()).add(ip)
            if bootstrap and (iface in _LOOPBACK_IFACES or ip.startswith('127.')):
                proc.loopback_bootstrap = True

    def _hop(self, proc, mh, lineno, raw):
        src, dst, side, via = int(mh.group(3)), int(mh.group(5)), mh.group(7), _hop_via(mh)
        mn = _NET_VIA.match(via)
        if mn and via.startswith('NET/'):
            name = mn.group(1)
            proc.hop_nets[name] = proc.hop_nets.get(name, 0) + 1
            if proc.hop_line is None:
                proc.hop_line = lineno
                self._evidence('hop', lineno, raw)
            if 'GDRDMA' in mn.group(4):
                if proc.gdr_true is None:
                    proc.gdr_true = lineno
                    self._evidence('gdr', lineno, raw)
            elif proc.gdr_false is None:
                proc.gdr_false = lineno
                self._evidence('gdr', lineno, raw)
            if src != dst and mh.group(4) is not None and mh.group(4) == mh.group(6) and len(proc.net_same_gpu) < 64:
                proc.net_same_gpu.add(dst if side == 'send' else src)
            if side == 'send':
                proc.own_ranks.add(src)
                proc.net_peers.add((dst, name))
            elif side == 'receive':
                proc.own_ranks.add(dst)
                proc.net_peers.add((src, name))
            return
        if via.startswith('COLLNET'):
            proc.collnet = True
            return
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
            self._evidence('intra', lineno, raw)

    def _chain(self, proc, frame, code, lineno):
        """A return-code frame of ``proc`` printed by thread ``self._tid``.  Each thread has its own open chain (the
        threads of one process that drives several GPUs interleave theirs); a chain passes to another thread only on
        the very next line with the same code (a proxy thread handing its failure to the caller).  ``proc.chain``:
        None, or {tid: [first frame, last frame, code, frames, first line, last line, socket WARN key, a frame of the
        proxy or network transport seen]}."""
        chains = proc.chain
        if chains is None:
            chains = proc.chain = {}
        tid = self._tid
        ch = chains.get(tid)
        # Frames of lines without a process prefix (key '-') may come from any process: they form one call stack
        # only on consecutive lines.
        if ch is None or ch[2] != code or (proc.key == '-' and lineno - ch[5] > 1):
            if ch is not None:
                self._flush_chain(proc, tid)
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

    def _flush_chain(self, proc, tid):
        """Close the chain of thread ``tid`` of ``proc``: two frames or more with a non-zero code make an error."""
        chains = proc.chain
        ch = chains.pop(tid, None) if chains is not None else None
        if not chains:
            proc.chain = None
        if ch is None:
            return
        if ch[6] is not None and ch[7]:
            # The socket failed under the proxy thread or while connecting the network transport, not in bootstrap.
            entry = self.errors.get(ch[6])
            if entry is not None and entry['category'] == 'bootstrap' and entry['count'] == 1:     # (shared by text)
                entry['category'], entry['meaning'] = 'proxy', _PROXY_SOCKET_MEANING
        if ch[3] < 2 or ch[2] == 0:
            return
        name = RETURN_CODES.get(ch[2], 'error %d' % ch[2])
        text = '%s ... %s' % (ch[0], ch[1])
        self._add_error(text, 'return code', ch[4], proc, meaning='%s (%d) returned up the call stack' % (name, ch[2]))

    def _flush_chains(self, proc):
        """Close every open chain of ``proc``, oldest first."""
        if proc.chain is not None:
            for tid in sorted(proc.chain, key=lambda t: proc.chain[t][4]):
                self._flush_chain(proc, tid)

    def _ib_unavailable(self, proc, lineno, raw):
        proc.ib_probe_line = proc.ib_probe_line or lineno
        self._evidence('ib_probe', lineno, raw)

    def _warn(self, proc, text, msg, lineno, shown=None):
        """A WARN line: ``text`` from its source location on, ``msg`` after "WARN", ``shown`` the text as the log prints
        it (it differs when autolinks were removed): that one is quoted in ``errors``."""
        if proc is not None and proc.chain is not None and self._tid in proc.chain:
            self._flush_chain(proc, self._tid)
        text = text.strip()
        if proc is not None:
            if _IB_UNAVAILABLE.match(msg):
                self._ib_unavailable(proc, lineno, text)
            elif proc.socket_datapath_line is None and _SOCKET_DATAPATH_WARN.match(text):
                proc.socket_datapath_line = lineno
                self._evidence('socket', lineno, text)
            elif proc.ib_datapath_line is None and _IB_DATAPATH_WARN.match(text):
                proc.ib_datapath_line = lineno
                self._evidence('ib_datapath', lineno, text)
        category, meaning = classify_error(text)
        if category == 'duplicate GPU' and proc is not None:
            for r in re.findall(r'rank (\d+)', text):
                proc.own_ranks.add(int(r))
        self._add_error((shown or text).strip(), category, lineno, proc, meaning=meaning)
        if proc is not None:
            proc.socket_warn = ((shown or text).strip(), lineno) if category == 'bootstrap' else None

    def _version(self, proc, version, lineno):
        major, minor, patch = (int(x) for x in version.split('.'))
        if major >= 10:
            # Older PyTorch decoded NCCL's version code with the pre-2.9 formula: code 21104 (2.11.4) printed as 21.1.4
            code = major * 1000 + minor * 100 + patch
            version = '%d.%d.%d' % (code // 10000, code % 10000 // 100, code % 100)
        entry = self.versions.get(version)
        if entry is None:
            self.versions[version] = lineno
        if proc is not None:
            proc.versions.add(version)

    def _other(self, proc, rest, lineno, tag):
        """Lines that are not NCCL INFO/WARN: version banner, nccl-tests output, framework errors."""
        if 'CCL version' in rest:
            mv = _VERSION.search(rest)
            if mv:
                self._version(proc, mv.group(1), lineno)
        s = rest.strip()
        if s.startswith('#'):
            mt = _TESTS_RANK.match(s)
            if mt:
                self.tests_devices_seen = True
                self.tests_ranks[int(mt.group(1))] = (mt.group(3), int(mt.group(2)), int(mt.group(4)))
                return
            if _TESTS_HEADER.match(s):
                self.busbw_columns = s.lstrip('#').split()
                self.in_table = True
                return
            ma = _TESTS_AVG.match(s)
            if ma:
                self.busbw_avg = float(ma.group(1))
            return
        mf = _TESTS_FAIL.search(s)
        if mf:
            self._add_error(mf.group(1).strip(), 'nccl-tests', lineno, proc)
            return
        mc = _CRASH.search(s)
        if mc:
            sig = mc.group(1) or mc.group(2)
            self._add_error(s, 'system', lineno, proc,
                            meaning='the process crashed%s: its peers then fail or time out - look at the backtrace that '
                                    'follows' % (' (signal %s)' % sig if sig else ''))
            return
        mw = _WATCHDOG.search(s)
        if mw:
            self._add_error(mw.group(1).strip(), 'timeout', lineno, proc,
                            meaning='a collective did not finish within the framework timeout: a hung peer, a dead link or a '
                                    'transport that never connected')
            return
        mt = _TORCH_NCCL_ERR.search(s)
        if mt:
            # PyTorch may print NCCL's own last error on the same line: "... Last error: <the WARN text>"
            head, sep, cause = mt.group(1).partition('Last error:')
            category, meaning = classify_error(cause.strip() if sep and cause.strip() else head)
            if meaning is None:
                low = head.lower()
                meaning = next((m for phrase, m in _NCCL_RESULT_PHRASES if phrase in low), None)
            self._add_error(mt.group(1).strip(), category if category != 'other' else 'framework', lineno, proc, meaning=meaning)

    def _table_line(self, line):
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
                self.busbw_avg = float(ma.group(1))
                self.in_table = False
            return bool(ma) or s.startswith('#  ') or s.startswith('# ') and '(B)' in s or s == '#'
        m = _TESTS_ROW.match(s)
        if not m or not self.busbw_columns:
            return False
        fields = s.split()
        if len(self.busbw_rows) < MAX_BUSBW_ROWS:
            self.busbw_rows.append(_table_row(self.busbw_columns, fields))
        return True

    def _add_error(self, text, category, lineno, proc, meaning=None):
        entry = self.errors.get(text)
        if entry is None:
            if len(self.errors) >= MAX_ERRORS:
                self.errors_dropped += 1
                return
            entry = {'line': lineno, 'text': text, 'category': category, 'count': 0, 'hosts': []}
            if meaning:
                entry['meaning'] = meaning
            self.errors[text] = entry
        entry['count'] += 1
        if proc is not None and proc.host and proc.host not in entry['hosts'] and len(entry['hosts']) < 16:
            entry['hosts'].append(proc.host)

    def _evidence(self, kind, lineno, raw):
        lst = self.evidence.setdefault(kind, [])
        if len(lst) < 5:
            lst.append({'line': lineno, 'text': raw.strip()[:300]})

    # ------------------------------------------------------------ result
    def result(self):
        """Return the analysis as a JSON-serialisable dict (see the module RETURN for the keys)."""
        for proc in self.procs.values():
            self._flush_chains(proc)
        return _Summariser(self).summary()


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


# ibv async events that report a subnet manager / port change rather than a failure.
_IB_SM_EVENTS = ('client reregistration', 'sm change', 'lid change', 'pkey change', 'gid table change', 'port active')


# The ncclResult_t wording a framework prints ("NCCL error in: ..., remote process exited or there was a network error").
_NCCL_RESULT_PHRASES = (
    ('remote process exited', 'ncclRemoteError: a peer process exited or the network failed - find the first error on '
                              'the other hosts (a crash, out of memory, a network WARN)'),
    ('unhandled system error', 'ncclSystemError: a system or library call failed (sockets, memory, IB verbs) - the NCCL '
                               'WARN lines before it say which'),
    ('invalid usage', 'ncclInvalidUsage: NCCL was called wrongly (two ranks on one GPU, mismatched communicators or '
                      'collectives) - see the WARN before it'),
    ('internal error', 'ncclInternalError: an internal check failed, often a topology or settings mismatch between '
                       'ranks - see the WARN before it'),
    ('invalid argument', 'ncclInvalidArgument: an NCCL call got a wrong argument'),
)
# "Cuda failure 'out of memory'" and its kin: what the CUDA error string means for an NCCL job.
_CUDA_FAILURES = (
    (('out of memory',), 'the GPU ran out of memory while NCCL set up its buffers: leave more GPU memory free or lower '
                         'NCCL_BUFFSIZE / the channel count'),
    (('no kernel image',), 'the binary has no kernels for this GPU architecture: use a PyTorch / NCCL build that '
                           'supports its compute capability'),
    (('unknown error', 'initialization error', 'system not yet initialized'),
     'the CUDA driver is in a failed state: check nvidia-smi and dmesg (Xid errors, the fabric manager on NVSwitch '
     'systems), then reset the GPU or reboot'),
    (('ipc', 'cumem', 'invalid device context', 'operation not permitted'),
     'CUDA could not share GPU memory between processes: run containers with --ipc=host (or a shared IPC namespace) '
     'or set NCCL_CUMEM_ENABLE=0'),
)
_NET_NOT_FOUND = re.compile(r'error: network .{1,64} not found')
_PROXY_SOCKET_MEANING = ("a socket of NCCL's proxy thread failed while connecting or running the network transport (not "
                         "bootstrap): the peer's process usually failed first (look for its own error), or "
                         "NCCL_SOCKET_IFNAME / a firewall blocks the connection between the nodes")


def _any(*words):
    """A rule test: any of ``words`` in the lower-cased text."""
    return lambda low: any(w in low for w in words)


def _completion_meaning(text, low):
    m = _WC_STATUS.search(text)
    if m is None:
        return 'an RDMA work completion failed'
    status = int(m.group(1))
    name, meaning = WC_STATUS.get(status, ('status %d' % status, 'see ibv_wc_status'))
    return '%s (%d): %s' % (name, status, meaning)


def _qp_meaning(text, low):
    if 'unreachable' in low or 'timed out' in low:
        return ('queue pair setup failed: the peer GID was not reachable - on RoCE a wrong NCCL_IB_GID_INDEX (RoCE v1 or '
                'link-local instead of RoCE v2), a route or ARP entry missing between the subnets, or a down link')
    return 'queue pair setup failed'


def _cuda_failure_meaning(text, low):
    return next((meaning for words, meaning in _CUDA_FAILURES if any(w in low for w in words)), None)


# classify_error's rules, first match wins: (test of the lower-cased text, category, meaning or meaning(text, low)).
_ERROR_RULES = (
    (lambda low: low.startswith('ras/') or ' ras/' in low or low.startswith('ras '), 'RAS',
     "NCCL's RAS monitoring service (2.24+) failed; it does not carry collective traffic - a bind failure usually means "
     "another job on the host already uses the RAS port (NCCL_RAS_ADDR)"),
    (_any('shmutils', '/dev/shm', 'shared memory segment'), 'shared memory',
     "NCCL could not create its shared-memory segment: the container's /dev/shm is too small (docker --shm-size=..., "
     "Kubernetes an emptyDir with medium: Memory at /dev/shm, or --ipc=host)"),
    (lambda low: 'async event' in low and any(w in low for w in _IB_SM_EVENTS), 'IB event',
     'a subnet manager notice about the port, not an error by itself'),
    (_any('iommu'), 'system',
     'a host configuration warning (the kernel command line lacks iommu=pt, which RCCL/AMD GPUs need for peer-to-peer), '
     'not a transport failure'),
    (_any('libcuda'), 'system',
     'the CUDA driver library libcuda.so was not found: install the NVIDIA driver (or the container toolkit) where the '
     'job runs; on WSL add /usr/lib/wsl/lib to LD_LIBRARY_PATH'),
    (_NET_NOT_FOUND.search, 'plugin load',
     'NCCL_NET names a network that no loaded plugin provides: check NCCL_NET and that the net plugin library '
     '(libnccl-net-*.so) is found (NCCL_NET_PLUGIN, LD_LIBRARY_PATH)'),
    (_any('allocation failed'), 'system',
     'NCCL could not allocate a buffer for a peer (usually the GPU is out of memory): leave more GPU memory free or lower '
     'NCCL_BUFFSIZE / the channel count'),
    (_any('ibv_reg_dmabuf_mr'), 'device',
     'the RDMA stack cannot register GPU memory through DMA-BUF: set NCCL_DMABUF_ENABLE=0 to use nvidia_peermem instead, '
     'or upgrade the kernel (5.12+), rdma-core and the NIC driver'),
    (_any('cuda failure'), 'system',
     lambda text, low: _cuda_failure_meaning(text, low) or 'a CUDA call failed (the quoted CUDA error says which)'),
    (_any('libibverbs'), 'device',
     'libibverbs could not be loaded: NCCL cannot use InfiniBand/RoCE and falls back to sockets - install the rdma-core '
     'user space (libibverbs / rdma-core, or DOCA-OFED / MLNX_OFED)'),
    (_any('duplicate gpu'), 'duplicate GPU',
     'two ranks of one communicator use the same GPU: check CUDA_VISIBLE_DEVICES / local rank mapping'),
    (_any('completion', 'got cqe'), 'completion', _completion_meaning),
    (_any('modify_qp', 'ibv_create_qp', ' qp '), 'QP', _qp_meaning),
    (_any('gid'), 'GID', 'GID lookup failed: check NCCL_IB_GID_INDEX and that the netdev has an IP address'),
    (_any('net/ofi', 'plugin', 'dlopen', 'libnccl-net'), 'plugin load', 'the external network plugin failed'),
    (lambda low: low.startswith('proxy.cc') or 'proxy' in low and ('failed' in low or 'closed' in low or 'broken pipe' in low),
     'proxy', "NCCL's proxy thread lost a connection to a peer: that peer's process usually failed first (look for its "
              "own error: Cuda failure, out of memory, a killed rank) or the network dropped"),
    (_any('no transport found'), 'topology',
     'NCCL found no transport between two ranks: P2P and SHM are disabled or impossible and no network is usable '
     '(NCCL_P2P_DISABLE / NCCL_SHM_DISABLE, NCCL_NET, NCCL_IB_DISABLE, containers without a shared IPC namespace)'),
    (lambda low: 'does not loop back' in low or 'ring' in low and 'loop' in low, 'topology',
     'the rings NCCL built are inconsistent between ranks: ranks see a different topology or different NCCL settings '
     '(NCCL_* variables, NCCL_TOPO_FILE) - make them identical on all nodes'),
    (_any('already checked in'), 'bootstrap',
     'two processes registered the same rank with the bootstrap root: duplicated launcher tasks (srun / mpirun), a wrong '
     'RANK / LOCAL_RANK, or two jobs sharing MASTER_ADDR:MASTER_PORT or NCCL_COMM_ID'),
    (_any('mismatch in rank count'), 'bootstrap',
     'the processes disagree on the number of ranks: check WORLD_SIZE / nranks on every node, and that no other job uses '
     'the same MASTER_ADDR:MASTER_PORT or NCCL_COMM_ID'),
    (lambda low: low.startswith('transport/net_socket.cc') and 'warn' in low and 'no interface found' not in low,
     'proxy', _PROXY_SOCKET_MEANING),
    (_any('closed by remote peer', 'connection reset by peer'), 'bootstrap',
     'the peer closed the connection: its process usually exited or crashed first - look for the first error on the other '
     'host; if there is none, check NCCL_SOCKET_IFNAME, firewalls and routes'),
    (lambda low: low.startswith('net :') or any(w in low for w in ('socket', 'bootstrap', 'connect', ' net : ', 'address')),
     'bootstrap', 'out-of-band TCP connection between ranks failed: check NCCL_SOCKET_IFNAME, firewalls and routes'),
    (_any('timeout', 'timed out', 'watchdog'), 'timeout', 'an operation timed out'),
    (_any('real path'), 'device',
     'NCCL could not resolve the PCI path of the RDMA device (usual for soft-RoCE rxe and other virtual devices): topology '
     'detection treats it as remote'),
    (_any('ibv_', 'net/ib', 'no device', 'mlx5', 'device'), 'device', 'an RDMA device call failed'),
    (_any('nvml', 'cuda'), 'system', 'a CUDA / NVML call failed'),
)


def classify_error(text):
    """Return (category, meaning) for a WARN / error line: the first of ``_ERROR_RULES`` that matches, else
    ('other', None)."""
    low = text.lower()
    for test, category, meaning in _ERROR_RULES:
        if test(low):
            return category, meaning(text, low) if callable(meaning) else meaning
    return 'other', None


def _json_message(text):
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    for key in ('log', 'message', 'msg', 'MESSAGE', '@message', 'textPayload', 'line', 'text'):
        val = obj.get(key)
        if isinstance(val, str):
            return val
        if isinstance(val, dict):
            inner = _first_string(val)
            if inner is not None:
                return inner
    return _first_string(obj)


def _first_string(obj, depth=0):
    if depth > 4:
        return None
    if isinstance(obj, dict):
        for val in obj.values():
            if isinstance(val, str) and ('NCCL' in val or 'INFO' in val or 'WARN' in val):
                return val
        for val in obj.values():
            if isinstance(val, (dict, list)):
                found = _first_string(val, depth + 1)
                if found is not None:
                    return found
    elif isinstance(obj, list):
        for val in obj:
            found = _first_string(val, depth + 1)
            if found is not None:
                return found
    return None


class _Summariser:
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
                'nvls': p.nvls,
                'intra_node': list(p.intra),
                'ranks': sorted(p.own_ranks)[:64],
                'env': dict(p.env),
            }
            if p.ofi_provider:
                entry['plugin_provider'] = p.ofi_provider
            per[p.key] = entry
            p_t = t
            if p.host:
                host_ranks.setdefault(p.host, set()).update(p.own_ranks)
                host_devs.setdefault(p.host, 0)
                host_devs[p.host] += max(1, len(p.devs))
                host_procs.setdefault(p.host, []).append(p)
            entry['_t'] = p_t
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
        for p in self.procs:
            for label in p.intra:
                if label not in intra:
                    intra.append(label)
            # NET hops whose peer lives in the same process/host: loopback through the NIC.  (Not for lines without a
            # process prefix: they may come from several machines.)
            if p.host is None:
                continue
            local = host_ranks.get(p.host, set())
            for peer, name in p.net_peers:
                if peer in local or peer in p.own_ranks:
                    label = 'NET/' + name
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
            'per_host': {},
            'hosts': sorted(host_procs),
            'machines': machines,
            'processes': len([p for p in self.procs if p.host]),
            'ranks': self._nranks(),
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
        for key, e in per.items():
            e.pop('_t', None)
            result['per_host'][key] = e
        result['mismatch'] = len(transports) > 1
        return result

    # -- helpers
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
        if info and (info.get('p2p_name') or info.get('name')):
            names = set(p.selected for p in self.procs if p.selected) | set(n for p in self.procs for n in p.hop_nets)
            plug = info.get('p2p_name') or info.get('name')
            if names:
                info['usable'] = any(n == plug or (n and n.startswith(plug)) for n in names) or (plug == self.ofi_name)
        return info or None

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


def analyze_lines(lines):
    an = NcclLogAnalyzer()
    an.feed_lines(lines)
    return an.result()


def analyze_text(text):
    """Analyse a whole log given as one string."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    lines = text.split('\n')        # newlines only, as in a file (a bare CR stays inside its line)
    if lines and lines[-1] == '':
        lines.pop()
    return analyze_lines(lines)


def analyze_file(path, chunk_size=1 << 23, use_grep=True):
    """Analyse a log file in constant memory.

    Same result as feeding the parser every line that holds one of ``_TOKENS`` (or matches ``_LEADING``), in order,
    with its 1-based line number; ``lines`` is the file's line count (a last line without a newline counts).

    * ``use_grep`` (default): GNU grep selects those lines and concurrent processes count the lines (``_grep_scan``);
      Python only sees the selected lines.  Used for regular files when GNU grep is on PATH and the environment does
      not set ``HPCNET_NCCL_NO_GREP=1``; when grep is missing or fails (exit status above 1) the pure-Python path runs.
    * pure Python (``use_grep=False``, the reference): the file is read in ``chunk_size`` binary chunks cut at a newline;
      whole-chunk C scans (``_TOKEN_SCANS``, ``_LEAD_SCAN``) find those lines without splitting the chunk.
    Both paths replay repeats of common lines from a bounded memo (``_ChunkScanner``).

    Raises OSError (FileNotFoundError, PermissionError, IsADirectoryError) when ``path`` cannot be opened.
    """
    with open(path, 'rb') as fh:
        if use_grep and os.environ.get('HPCNET_NCCL_NO_GREP', '') in ('', '0'):
            an = _grep_scan(path, fh)
            if an is not None:
                return an.result()
            fh.seek(0)
        return _python_scan(fh, chunk_size).result()


def _heads(lines):
    """``lines`` with each line longer than _LINE_BYTES cut to its head, or dropped when the head is not selected."""
    out = []
    for line in lines:
        if len(line) > _LINE_BYTES:
            line = line[:_LINE_BYTES]
            if not _wanted(line):
                line = b''      # an empty line: nothing to analyse, but it keeps the numbering of take_many
        out.append(line)
    return out


# Bytes of one line kept while it is read (a line is analysed up to its first MAX_LINE characters; UTF-8 needs at most
# 4 bytes a character, and grep adds "N:"): a log with a huge line without newlines stays in bounded memory.
_LINE_BYTES = 4 * MAX_LINE + 32


def _python_scan(fh, chunk_size):
    an = NcclLogAnalyzer()
    scanner = _ChunkScanner(an)
    base = 0
    rest = b''
    long_line = None     # the head of a line longer than _LINE_BYTES, while its end is skipped
    while True:
        data = fh.read(chunk_size)
        if not data:
            break
        if long_line is not None:
            nl = data.find(b'\n')
            if nl < 0:
                continue
            # The long line ends here: analyse its head like any other line (selection on the head).
            line, long_line = long_line, None
            base += 1
            if _wanted(line):
                scanner.take(line, base)
            data = data[nl + 1:]
            if not data:
                continue
        if rest:
            data = rest + data
        cut = data.rfind(b'\n')
        if cut < 0:
            if len(data) > _LINE_BYTES:
                long_line, rest = data[:_LINE_BYTES], b''
            else:
                rest = data
            continue
        rest = data[cut + 1:]
        base += scanner.chunk(data[:cut], base)
    if long_line is not None:
        rest = long_line
    if rest:
        base += 1
        if _wanted(rest.rstrip(b'\r')):
            an.feed_at(rest, base)
    an.lineno = base
    return an


_GNU_GREP = {}
_SPLIT_MIN = 64 << 20
_PARTITION_COLON = methodcaller('partition', b':')
_AFTER_COLON = itemgetter(2)


def _gnu_grep():
    """Absolute path of grep when it is GNU grep (its ERE dialect and -a are relied on), else None.  Cached."""
    exe = shutil.which('grep')
    if exe is None:
        return None
    if exe not in _GNU_GREP:
        try:
            out = subprocess.run([exe, '--version'], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_c_env(),
                                 timeout=30, check=False).stdout
        except (OSError, subprocess.SubprocessError):
            out = b''
        _GNU_GREP[exe] = b'GNU grep' in out
    return exe if _GNU_GREP[exe] else None


def _c_env():
    env = dict(os.environ)
    for key in ('GREP_OPTIONS', 'GREP_COLOR', 'GREP_COLORS', 'LANG', 'LANGUAGE'):
        env.pop(key, None)
    env['LC_ALL'] = 'C'
    return env


def _last_line(fh, size):
    """The last line (up to its first _LINE_BYTES bytes) of the open file ``fh`` of ``size`` bytes, which does not end
    with a newline."""
    pos = size
    start = 0
    while pos > 0:
        step = min(1 << 16, pos)
        pos -= step
        fh.seek(pos)
        cut = fh.read(step).rfind(b'\n')
        if cut >= 0:
            start = pos + cut + 1
            break
    fh.seek(start)
    return fh.read(min(_LINE_BYTES, size - start))


def _grep_scan(path, fh):
    """analyze_file's accelerated path: GNU grep selects the lines, Python analyses them.  None: use the Python path.

    ``grep -a -n -E -e _GREP_ERE`` (argv lists, LC_ALL=C, never a shell) prints each selected line as ``N:line``; its
    output is read in binary blocks as it comes (memory stays flat) and goes through ``_ChunkScanner.take_many`` with
    the exact rule re-applied.  Exit status 1 means "no line selected"; any other failure returns None.

    * small file, or one CPU: one grep over ``path``; a concurrent ``grep -a -c ''`` counts the lines (a last line
      without a newline counts, as in Python).
    * file of ``_SPLIT_MIN`` bytes or more on a multi-core host, with ``head`` and ``wc`` on PATH: the scan is split at
      a line start near the middle so that two greps run at once: ``head -c MID path | grep`` is read live, the grep of
      the second half (stdin seeked to MID) writes to an unnamed temporary file, read after the first half (disk use:
      the selected lines of the second half).  Its line numbers are shifted by the line count of the first half, from
      two concurrent ``wc -l`` (whole file; second half).
    """
    grep = _gnu_grep()
    if grep is None:
        return None
    try:
        st = os.fstat(fh.fileno())
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None     # a pipe or device can be read only once
    size = st.st_size
    head = shutil.which('head')
    wc = shutil.which('wc')
    mid = 0
    if size >= _SPLIT_MIN and (os.cpu_count() or 1) > 1 and head and wc:
        fh.seek(size // 2)
        pos = size // 2
        while pos < size:       # the next line start, read in bounded blocks (the line may be huge)
            block = fh.read(1 << 16)
            nl = block.find(b'\n')
            if nl >= 0:
                if pos + nl + 1 < size:
                    mid = pos + nl + 1
                break
            pos += len(block)
            if not block:
                break
    env = _c_env()
    argv = [grep, '-a', '-n', '-E', '-e', _GREP_ERE]
    procs = []
    files = []

    def start(args, **kw):
        proc = subprocess.Popen(args, stderr=subprocess.DEVNULL, env=env, **kw)
        procs.append(proc)
        return proc

    def opened_at(offset):
        f = open(path, 'rb', buffering=0)
        files.append(f)
        f.seek(offset)
        return f

    an = NcclLogAnalyzer()
    scanner = _ChunkScanner(an)
    try:
        try:
            if mid:
                spool = tempfile.TemporaryFile()
                files.append(spool)
                second = start(argv, stdin=opened_at(mid), stdout=spool)
                count_all = start([wc, '-l'], stdin=opened_at(0), stdout=subprocess.PIPE)
                count_second = start([wc, '-l'], stdin=opened_at(mid), stdout=subprocess.PIPE)
                part = start([head, '-c', str(mid), '--', path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
                first = start(argv, stdin=part.stdout, stdout=subprocess.PIPE)
                part.stdout.close()
            else:
                count_all = start([grep, '-a', '-c', '', '--', path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
                first = start(argv + ['--', path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        except (OSError, ValueError):
            return None
        try:
            import fcntl
            fcntl.fcntl(first.stdout.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)     # fewer, larger reads (Linux); optional
        except (ImportError, AttributeError, OSError):
            pass
        last = _take_grep_output(scanner, first.stdout.fileno(), 0)
        if last is None or first.wait() not in (0, 1) or (mid and part.wait() != 0):
            return None
        newlines = int(count_all.communicate()[0].split()[0])
        if mid:
            if second.wait() not in (0, 1):
                return None
            before = newlines - int(count_second.communicate()[0].split()[0])    # lines of the first half
            if count_all.returncode or count_second.returncode or before < last:
                return None
            spool.seek(0)
            last = _take_grep_output(scanner, spool.fileno(), before)
            if last is None:
                return None
        elif count_all.returncode not in (0, 1):      # grep -c '' exits 1 on an empty file
            return None
        total = newlines
    except (ValueError, IndexError):      # output that is not "N:line" / a count
        return None
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            if proc.stdout is not None:
                proc.stdout.close()
            proc.wait()
        for f in files:
            f.close()
    size = os.fstat(fh.fileno()).st_size
    if size:
        fh.seek(size - 1)
        if fh.read(1) != b'\n':
            if mid:
                total += 1      # wc -l counts newlines; grep -c '' and Python count an unterminated last line
            if total > last:
                line = _last_line(fh, size)
                if _wanted(line.rstrip(b'\r')):       # the same selection rule as every other line
                    an.feed_at(line, total)
    an.lineno = max(total, last)
    return an


def _take_grep_output(scanner, fd, offset):
    """Feed grep's ``N:line`` output read from ``fd`` to ``scanner`` (line N + ``offset``).  Returns the last number
    (``offset`` when there was no line), or None when the output is cut short."""
    read = os.read
    take_many = scanner.take_many
    rest = b''
    last = offset
    skipping = False    # the end of a line longer than _LINE_BYTES is being dropped
    while True:
        block = read(fd, 1 << 20)
        if not block:
            break
        if skipping:
            nl = block.find(b'\n')
            if nl < 0:
                continue
            block, skipping = block[nl:], False
        if rest:
            block = rest + block
        cut = block.rfind(b'\n')
        if cut < 0:
            if len(block) > _LINE_BYTES + 24:
                rest, skipping = block[:_LINE_BYTES + 24], True
            else:
                rest = block
            continue
        rest = block[cut + 1:]
        items = block[:cut].split(b'\n')
        lines = list(map(_AFTER_COLON, map(_PARTITION_COLON, items)))
        if len(block) > _LINE_BYTES and max(map(len, lines)) > _LINE_BYTES:
            lines = [x[:_LINE_BYTES] for x in lines]        # take_many re-applies _wanted to the head
        take_many(lines, lambda i, items=items: int(items[i].partition(b':')[0]) + offset, True)
        last = int(items[-1].partition(b':')[0]) + offset
    return None if rest else last


# ---------------------------------------------------------------- running a command (no Ansible needed)
def run_logged_command(argv, env, timeout, chdir=None):
    """Run ``argv`` (no shell) with NCCL_DEBUG=INFO, stream its output into the analyser, kill it after ``timeout`` s.

    Returns a dict: analysis, rc, timed_out, error (a message when the command could not start).
    """
    import threading

    full_env = dict(os.environ)
    full_env['LC_ALL'] = 'C'
    full_env.setdefault('NCCL_DEBUG', 'INFO')
    for key, val in (env or {}).items():
        full_env[str(key)] = str(val)
    if 'NCCL_DEBUG' not in (env or {}):
        full_env['NCCL_DEBUG'] = 'INFO'
    an = NcclLogAnalyzer()
    out = {'analysis': None, 'rc': None, 'timed_out': False, 'error': None}
    try:
        proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env,
                                cwd=chdir, start_new_session=True)
    except (OSError, ValueError) as exc:
        out['error'] = 'command %s: cannot run it: %s' % (argv[0], exc)
        out['rc'] = 127
        return out

    def _kill():
        out['timed_out'] = True
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            try:
                proc.kill()
            except OSError:
                pass

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


# ---------------------------------------------------------------- expectations
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
    """Return a list of messages, one per unmet expectation (empty when all are met)."""
    findings = []
    per = result.get('per_host') or {}
    if expect_transport:
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
            ib_missing = any('libibverbs' in e.get('text', '') for e in result.get('errors') or []) or any(
                'libibverbs' in ev.get('text', '') for ev in (result.get('evidence') or {}).get('ib_probe', []))
            if (got == 'Socket' or 'Socket' in bad.values()) and ib_missing and expect_transport.lower() != 'socket':
                msg += ('. Cause: libibverbs could not be loaded (%s): install the rdma-core user space (libibverbs1 / '
                        'rdma-core, or DOCA-OFED) in the image or on the host' % _quote(result, ('ib_probe',), 1))
            elif (got == 'Socket' or 'Socket' in bad.values()) and result.get('ib_disabled_by_env') \
                    and expect_transport.lower() != 'socket':
                msg += ('. Cause: NCCL_IB_DISABLE=1 is set (echoed in the log); unset it or set it to 0')
            elif (got == 'Socket' or 'Socket' in bad.values()) and expect_transport.lower() != 'socket':
                msg += ('. Likely cause: NCCL found no usable RDMA device (%s); check that the HCAs are visible in the '
                        'container (/dev/infiniband, /sys/class/infiniband), NCCL_IB_DISABLE is unset, NCCL_IB_HCA matches '
                        'real device names and, for RoCE, NCCL_IB_GID_INDEX points at a RoCE v2 GID'
                        % _quote(result, ('ib_probe',), 2))
            elif expect_transport.lower() == 'socket' and got and got != 'Socket':
                msg += ('. NCCL found a usable RDMA network and preferred it; to force TCP sockets set NCCL_NET=Socket '
                        '(or NCCL_IB_DISABLE=1 for the built-in IB transport)')
            elif expect_transport.lower() == 'ib' and got and got.startswith('plugin:'):
                msg += ('. Likely cause: an external net plugin (libnccl-net.so, e.g. HPC-X) was loaded and took '
                        'precedence; set NCCL_NET=IB or NCCL_NET_PLUGIN=none to use the built-in verbs transport')
            elif got and got.startswith('plugin:') is False and expect_transport.lower() not in ('ib', 'socket'):
                msg += ('. Likely cause: the plugin %s was not found or failed to initialise; check NCCL_NET_PLUGIN / '
                        'LD_LIBRARY_PATH and the plugin\'s own WARN lines' % expect_transport)
            findings.append(msg)
    if expect_link_layer:
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
    if expect_gdr is not None:
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
    if expect_hcas:
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
    if forbid_fallback:
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
    if findings:
        findings.extend(h for h in _gid_hints(result, sysfs_root) if h not in findings)
    return findings
