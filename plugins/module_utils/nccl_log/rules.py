# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an error line means: the error-rule table of WARN lines, and the error lines of frameworks and nccl-tests.

A new error meaning goes here: a row of ``_ERROR_RULES`` (a pattern searched in the lower-cased WARN text, the
category, the meaning or a function that words it), placed before the rules it must win over (the first match wins).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

RETURN_CODES = {
    0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
    4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress",
}

# ibv_wc_status (rdma-core, libibverbs/verbs.h) in enum order, and what a status usually means under NCCL ("N meaning").
_WC_NAMES = ('SUCCESS LOC_LEN_ERR LOC_QP_OP_ERR LOC_EEC_OP_ERR LOC_PROT_ERR WR_FLUSH_ERR MW_BIND_ERR BAD_RESP_ERR '
             'LOC_ACCESS_ERR REM_INV_REQ_ERR REM_ACCESS_ERR REM_OP_ERR RETRY_EXC_ERR RNR_RETRY_EXC_ERR LOC_RDD_VIOL_ERR '
             'REM_INV_RD_REQ_ERR REM_ABORT_ERR INV_EECN_ERR INV_EEC_STATE_ERR FATAL_ERR RESP_TIMEOUT_ERR GENERAL_ERR').split()
_WC_MEANINGS = """
1 local length error
2 local QP operation error
4 local protection error: memory registration failed, often GPUDirect RDMA (nvidia_peermem / DMA-BUF) not usable for the buffer
5 work request flushed: the QP already went to error state after an earlier failure
7 bad response
8 local access error
9 remote invalid request
10 remote access error: peer memory registration / rkey problem
11 remote operation error
12 transport retry counter exceeded: the peer did not answer - link down, wrong GID index / unroutable RoCE GID, lossy fabric (PFC/ECN) or peer process gone
13 receiver-not-ready retry counter exceeded
15 remote invalid RD request
16 remote aborted
19 fatal error
20 response timeout
21 general error
"""
WC_STATUS = dict((int(n), ('IBV_WC_' + _WC_NAMES[int(n)], meaning))
                 for n, meaning in (row.split(' ', 1) for row in _WC_MEANINGS.strip().split('\n')))

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
PROXY_SOCKET_MEANING = ("a socket of NCCL's proxy thread failed while connecting or running the network transport (not "
                        "bootstrap): the peer's process usually failed first (look for its own error), or "
                        "NCCL_SOCKET_IFNAME / a firewall blocks the connection between the nodes")
PLUGIN_LOAD_MEANING = ('a net plugin library was found but the dynamic loader refused it (the reason is in the line): NCCL '
                       'goes on with its internal network - fix the library or unset NCCL_NET_PLUGIN')
_WC_STATUS = re.compile(r'(?:with (?:error|status)[ =]|status=)(?:IBV_WC_\w+\()?(\d+)')


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


# classify_error's rules, first match wins: (pattern searched in the lower-cased text, category, meaning or
# meaning(text, low)).
_ERROR_RULES = tuple((re.compile(pattern).search, category, meaning) for pattern, category, meaning in (
    (r'^ras/| ras/|^ras ', 'RAS',
     "NCCL's RAS monitoring service (2.24+) failed; it does not carry collective traffic - a bind failure usually means "
     "another job on the host already uses the RAS port (NCCL_RAS_ADDR)"),
    ('shmutils|/dev/shm|shared memory segment', 'shared memory',
     "NCCL could not create its shared-memory segment: the container's /dev/shm is too small (docker --shm-size=..., "
     "Kubernetes an emptyDir with medium: Memory at /dev/shm, or --ipc=host)"),
    (r'(?s)^(?=.*async event).*(?:' + '|'.join(_IB_SM_EVENTS) + ')', 'IB event',
     'a subnet manager notice about the port, not an error by itself'),
    ('iommu', 'system',
     'a host configuration warning (the kernel command line lacks iommu=pt, which RCCL/AMD GPUs need for peer-to-peer), '
     'not a transport failure'),
    ('libcuda', 'system',
     'the CUDA driver library libcuda.so was not found: install the NVIDIA driver (or the container toolkit) where the '
     'job runs; on WSL add /usr/lib/wsl/lib to LD_LIBRARY_PATH'),
    ('error: network .{1,64} not found', 'plugin load',
     'NCCL_NET names a network that no loaded plugin provides: check NCCL_NET and that the net plugin library '
     '(libnccl-net-*.so) is found (NCCL_NET_PLUGIN, LD_LIBRARY_PATH)'),
    ('allocation failed', 'system',
     'NCCL could not allocate a buffer for a peer (usually the GPU is out of memory): leave more GPU memory free or lower '
     'NCCL_BUFFSIZE / the channel count'),
    ('ibv_reg_dmabuf_mr', 'device',
     'the RDMA stack cannot register GPU memory through DMA-BUF: set NCCL_DMABUF_ENABLE=0 to use nvidia_peermem instead, '
     'or upgrade the kernel (5.12+), rdma-core and the NIC driver'),
    ('cuda failure', 'system',
     lambda text, low: _cuda_failure_meaning(text, low) or 'a CUDA call failed (the quoted CUDA error says which)'),
    ('libibverbs', 'device',
     'libibverbs could not be loaded: NCCL cannot use InfiniBand/RoCE and falls back to sockets - install the rdma-core '
     'user space (libibverbs / rdma-core, or DOCA-OFED / MLNX_OFED)'),
    ('duplicate gpu', 'duplicate GPU',
     'two ranks of one communicator use the same GPU: check CUDA_VISIBLE_DEVICES / local rank mapping'),
    ('completion|got cqe', 'completion', _completion_meaning),
    ('modify_qp|ibv_create_qp| qp ', 'QP', _qp_meaning),
    ('gid', 'GID', 'GID lookup failed: check NCCL_IB_GID_INDEX and that the netdev has an IP address'),
    ('net/ofi|plugin|dlopen|libnccl-net', 'plugin load', 'the external network plugin failed'),
    (r'(?s)^proxy\.cc|^(?=.*proxy).*(?:failed|closed|broken pipe)',
     'proxy', "NCCL's proxy thread lost a connection to a peer: that peer's process usually failed first (look for its "
              "own error: Cuda failure, out of memory, a killed rank) or the network dropped"),
    ('no transport found', 'topology',
     'NCCL found no transport between two ranks: P2P and SHM are disabled or impossible and no network is usable '
     '(NCCL_P2P_DISABLE / NCCL_SHM_DISABLE, NCCL_NET, NCCL_IB_DISABLE, containers without a shared IPC namespace)'),
    ('(?s)does not loop back|^(?=.*ring).*loop', 'topology',
     'the rings NCCL built are inconsistent between ranks: ranks see a different topology or different NCCL settings '
     '(NCCL_* variables, NCCL_TOPO_FILE) - make them identical on all nodes'),
    ('already checked in', 'bootstrap',
     'two processes registered the same rank with the bootstrap root: duplicated launcher tasks (srun / mpirun), a wrong '
     'RANK / LOCAL_RANK, or two jobs sharing MASTER_ADDR:MASTER_PORT or NCCL_COMM_ID'),
    ('mismatch in rank count', 'bootstrap',
     'the processes disagree on the number of ranks: check WORLD_SIZE / nranks on every node, and that no other job uses '
     'the same MASTER_ADDR:MASTER_PORT or NCCL_COMM_ID'),
    (r'(?s)^(?!.*no interface found)(?=.*warn)transport/net_socket\.cc',
     'proxy', PROXY_SOCKET_MEANING),
    ('closed by remote peer|connection reset by peer', 'bootstrap',
     'the peer closed the connection: its process usually exited or crashed first - look for the first error on the other '
     'host; if there is none, check NCCL_SOCKET_IFNAME, firewalls and routes'),
    ('^net :|socket|bootstrap|connect| net : |address',
     'bootstrap', 'out-of-band TCP connection between ranks failed: check NCCL_SOCKET_IFNAME, firewalls and routes'),
    ('timeout|timed out|watchdog', 'timeout', 'an operation timed out'),
    ('real path', 'device',
     'NCCL could not resolve the PCI path of the RDMA device (usual for soft-RoCE rxe and other virtual devices): topology '
     'detection treats it as remote'),
    ('ibv_|net/ib|no device|mlx5|device', 'device', 'an RDMA device call failed'),
    ('nvml|cuda', 'system', 'a CUDA / NVML call failed'),
))


def classify_error(text):
    """Return (category, meaning) for a WARN / error line: the first of ``_ERROR_RULES`` that matches, else
    ('other', None)."""
    low = text.lower()
    for search, category, meaning in _ERROR_RULES:
        if search(low):
            return category, meaning(text, low) if callable(meaning) else meaning
    return 'other', None


def return_code_meaning(code):
    """The meaning of a chain of return-code frames ("init.cc:903 -> 5 ... init.cc:916 -> 5") ending with ``code``."""
    return '%s (%d) returned up the call stack' % (RETURN_CODES.get(code, 'error %d' % code), code)


# Error lines that are not NCCL WARN lines: nccl-tests, a crashed process, framework watchdogs and exceptions.
_TESTS_FAIL = re.compile(r'(Test (?:NCCL|CUDA) failure .*|Test failure \S+)$')
# A process killed by a signal: Open MPI "[host:pid] *** Process received signal ***", UCX "[host:pid:0:tid] Caught
# signal 11 (Segmentation fault: ...)".
_CRASH = re.compile(r'\*\*\* Process received signal \*\*\*|Caught signal (\d+) \(([^:)]{1,64})')
_WATCHDOG = re.compile(r'(\[Rank \d+\] Watchdog caught collective operation timeout.*)$')
_TORCH_NCCL_ERR = re.compile(r'((?:torch\.distributed\.)?(?:DistBackendError|RuntimeError): NCCL error.*|NCCL error in: .*|'
                             r'(?:(?<=what\(\): )|(?<=what\(\):  ))NCCL error.*)$')


def other_error(s):
    """(text, category, meaning) of a line that is not an NCCL INFO / WARN line but reports an error (``s`` stripped),
    else None."""
    mf = _TESTS_FAIL.search(s)
    if mf:
        return mf.group(1).strip(), 'nccl-tests', None
    mc = _CRASH.search(s)
    if mc:
        sig = mc.group(1) or mc.group(2)
        return s, 'system', ('the process crashed%s: its peers then fail or time out - look at the backtrace that follows'
                             % (' (signal %s)' % sig if sig else ''))
    mw = _WATCHDOG.search(s)
    if mw:
        return mw.group(1).strip(), 'timeout', ('a collective did not finish within the framework timeout: a hung peer, a '
                                                'dead link or a transport that never connected')
    mt = _TORCH_NCCL_ERR.search(s)
    if mt:
        # PyTorch may print NCCL's own last error on the same line: "... Last error: <the WARN text>"
        head, sep, cause = mt.group(1).partition('Last error:')
        category, meaning = classify_error(cause.strip() if sep and cause.strip() else head)
        if meaning is None:
            low = head.lower()
            meaning = next((m for phrase, m in _NCCL_RESULT_PHRASES if phrase in low), None)
        return mt.group(1).strip(), category if category != 'other' else 'framework', meaning
    return None
