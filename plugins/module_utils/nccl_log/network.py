# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What NCCL says about its networks: the ``NET/...`` messages of its transports and of its plugin loader (IB devices
and queue-pair GIDs, socket interfaces, aws-ofi-nccl, a net plugin loaded or refused, the loader's wording per
release), the network it selected, GPU Direct RDMA verdicts, P2P plugins, bootstrap interfaces, IB found unusable.

Network selection (from NCCL's printf formats): ``Using internal Network X`` (2.2-2.3), none (2.4-2.5), ``Using
network X`` (2.6+), ``Assigned NET plugin X to comm`` (2.27+, where ``IB``/``Socket`` are the built-in transports).
``NET/Socket : Using ...`` up to 2.4 is the bootstrap network, not the data transport.

The handlers here are filed in evidence.py's ``_INFO_HANDLERS`` (``_net`` asks ``_NET_HANDLERS`` in turn) and follow
its protocol (see evidence.py).  The replay kinds (``REPLAY_*``) are defined here, in the lower of the two handler
modules, so that evidence.py and scan.py import them from one place without a cycle.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.rules import PLUGIN_LOAD_MEANING

REPLAY_NONE, REPLAY_NET, REPLAY_SELECT, REPLAY_NVLS = 0, 1, 2, 3
_NOTHING_NEW = (REPLAY_NONE, None)


# ---------------------------------------------------------------- INFO messages of the network
# GPU Direct RDMA verdicts of the network transport: per HCA ("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
# (no module)") or, in 2.4, per connection ("NET/IB : GPU Direct RDMA Enabled for GPU 0[0] / HCA 0 (distance 2 < 3)").
_GDR_VERDICT = re.compile(r"^NET/\w+ ?: GPU Direct RDMA (Enabled|Disabled) for "
                          r"(?:HCA \d+ '[^']*'|GPU [0-9A-Fa-fx]+(?:\[\d+\])? / HCA [\w.\-]+)(.*)$")
# HPC-X plugin: "NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0'", "... (nvidia-peermem) enabled ...".
_GDR_PLUGIN_MODE = re.compile(r"^NET/\w+ ?: GPU Direct RDMA \((DMABUF|nvidia-peermem)\) enabled for HCA")
# The topology's verdict for one GPU / NIC pair of the node (2.5+ graph/paths.cc, every pair, not only this process's
# GPU): "GPU Direct RDMA Enabled for GPU 81000 / HCA 0 (distance 4 <= 5), read 0", newest "... for GPU/0-1b000 (rank 0)
# - NET/0-0 (distance 3 <= 4, read 1, mode Default)".
_GDR_TOPO = re.compile(r'^GPU Direct RDMA (Enabled|Disabled) for '
                       r'(?:GPU [0-9A-Fa-fx]+ / HCA [\w.\-]+|GPU/\S+ \(rank (\d+)\))')


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


# libibverbs could not be loaded (misc/ibvwrap.cc; WARN up to 2.18, INFO from 2.19), or the built-in IB transport failed
# to initialise (2.27+): NCCL cannot use IB on this process.
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


# ---------------------------------------------------------------- NET/ messages
# "[0]mlx5_0:1/IB"; newer NCCL may add rail and plane fields after the port: "[0]mlx5_0:1:0/IB", "[0]mlx5_0:1::0/RoCE".
_IB_DEV = re.compile(r'\[(\d+)\]\s?([\w.\-+]+):(\d+)(?::\d*){0,2}/(IB|RoCE)')
# 2.2/2.3 list the IB devices one per line: "NET/IB: [0] mlx5_1:1/IB"; the NET-subsystem trace of newer releases
# names the uverbs device and adds properties: "NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000 ...".
_IB_DEV_LINE = re.compile(r'^NET/IB ?: \[(\d+)\] ?([\w.\-+]+?)(?::uverbs\d+)?:(\d+)(?::\d*){0,2}/(IB|RoCE)'
                          r'(?:\s+\w+=\S*)*\s*$')
# QP connect trace: "NET/IB: Dev 0 Port 1 qpn 58 mtu 3 GID 3 (0/..)" (2.1x) and
# "NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1047 mtu 5 query_ece={...} GID 0 (80FE/..)" (2.20+); "Dev" is NCCL's device
# index.
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
_OFI_MODERN = re.compile(r'^NET/OFI (?:Running on \S+ platform|Creating one domain|Using transport protocol|'
                         r'Internode latency|NIC group|Support for (?:global|DMA-BUF) registrations|'
                         r'Setting NCCL_TOPO_FILE)')
# "Selected Provider is efa (found 4 nics)"; aws-ofi-nccl 1.13+: "Selected provider is tcp, fabric is 10.0.0.0/24
# (found 1 nics)".
_OFI_PROVIDER = re.compile(r'^NET/OFI Selected [Pp]rovider is ([^\s,]+?),?(?: fabric is \S+)?'
                           r'(?: \(found (\d+) nics\))?\s*$')


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
    (re.compile(r'^NET/Plugin : No plugin found \(libnccl-net\.so\), using internal implementation'),
     ((2, 5), (2, 16))),
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
