# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The line grammar of NCCL_DEBUG=INFO output: which lines are read, and what is taken off a line before its message.

A new log form goes here: a launcher wrapper, a timestamp, a viewer's column, a prefix NCCL or a paste mangles, a
record format of a log shipper.  The order a line goes through is ``split_line`` (JSON records, joined lines),
``worth_reading``, ``unwrap`` (quotes, colours, autolinks, timestamps, wrappers), the process prefix (``_PREFIX`` and
its damaged forms, resolved to a process by the analyser) and ``message`` (level and message).  A message that
holds none of ``_TOKENS`` never reaches the parser of a file: add its token here (scan.py's ``_TOKEN_SCANS`` must
then find it too; a test checks that they agree).

Grammar notes (from NCCL's printf formats, not from sample files):

* line prefix ``host:pid:tid [cudaDev] NCCL INFO msg`` (2.3+), ``host:pid:tid [dev] INFO msg`` (2.2),
  ``host:pid:tid [dev] file:line [(func)] NCCL WARN msg``; an optional ``[%F %T] `` timestamp in front;
  launchers add ``[1,3]<stdout>:``, ``0: ``, ``[trainer3]:`` or ``(pid=.., ip=..)`` in front; log
  shippers wrap the line in JSON.  The bare ``NCCL version X`` banner has no prefix up to 2.21.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type
import json
import re
MAX_LINE = 1 << 16      # characters of one line that are read
# Bytes of one line kept while it is read (a line is analysed up to its first MAX_LINE characters; UTF-8 needs at most
# 4 bytes a character, and grep adds "N:"): a log with a huge line without newlines stays in bounded memory.
_LINE_BYTES = 4 * MAX_LINE + 32

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


# nccl-tests result rows and JSON records are recognised by their start.
_LEADING = re.compile(rb'\s*(?:\{|\d+\s+\d+\s+\w)')


def _wanted(line):
    """The selection rule of every input (bytes line without its newline): a line that holds one of ``_TOKENS`` or
    matches ``_LEADING``.  Other lines are only counted."""
    return _relevant(line) or _LEADING.match(line) is not None


# Several NCCL lines joined into one by a terminal paste: split before each further "host:pid:tid [dev] NCCL INFO|WARN".
_JOINED = re.compile(r'\s+(?=[\w.\-]+:\d+:\d+ \[-?\d+\] NCCL (?:INFO|WARN) )')


def split_line(line):
    """The lines one input line (str, at most MAX_LINE characters read) holds, as (text, joined, whole): the message of
    a JSON record, each of several NCCL lines a terminal paste joined (``joined`` for all but the first), or the
    line itself (``whole``)."""
    line = line[:MAX_LINE].rstrip('\r\n')       # no NCCL line is this long: keep memory and output bounded
    stripped = line.lstrip()
    if not stripped:
        return ()
    if stripped[0] == '{' and '"' in stripped:
        text = _json_message(stripped)
        if text is not None:
            return [(sub, False, False) for sub in text.splitlines()]
    if line.count('] NCCL ') > 1:
        return [(part, i > 0, False) for i, part in enumerate(_JOINED.split(line))]
    return ((line, False, True),)


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


# Lines worth a closer look contain one of these; everything else is skipped cheaply.
_MARKERS = ('INFO', 'WARN', 'NCCL', 'RCCL', 'Rank', 'failure', 'bandwidth', 'Watchdog', 'received signal', 'Caught signal')
# Cheap test for a line that may hold a bare message once timestamps and wrappers are removed (_BARE_INFO decides).
_BARE_HINT = re.compile(r'NET/|[Nn]etwork |P2P plugin |Plugin Path|Bootstrap|NCCL_[A-Z0-9_]+ set |Channel |Ring |Trees|NVLS|'
                        r'CollNet|NET plugin|ncclCommInit|comm 0x| coll channels')


def worth_reading(line, tests_output):
    """Could ``line`` be an NCCL, framework or nccl-tests line?  (``tests_output``: nccl-tests' header was seen.)"""
    for marker in _MARKERS:
        if marker in line:
            return True
    return tests_output or '#' in line or _BARE_HINT.search(line) is not None


# A log viewer's column of ISO timestamps (CloudWatch console copy: "  | 2025-05-16T16:39:51.208-07:00 | line", the
# separator sometimes lost), stripped before the line is read.
_ISO_COLUMN = re.compile(r'^\|?\s*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s*\|\s*|\s+|(?=\S))')
_TIMESTAMP = re.compile(r'^\[\d{4}-\d\d-\d\d[ T][\d:.,]+\] ')


def _untimed(s):
    """``s`` without a log viewer's time column in front, then without NCCL_DEBUG_TIMESTAMP's "[date time] "."""
    if s[:1] == '|' or s[:1].isdigit():
        m = _ISO_COLUMN.match(s)
        if m:
            s = s[m.end():]
            head, sep, tail = s.partition(' | ')
            if sep and tail.strip() == head.strip():     # the viewer repeats the message after the column
                s = head
    if s[:1] == '[':
        m = _TIMESTAMP.match(s)
        if m:
            s = s[m.end():]
    return s


# Terminal colour codes (Ray, rich consoles): "\x1b[36m(pid=12)\x1b[0m ...".
_ANSI = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')
# Ray's log deduplication appends " [repeated 15x across cluster]".
_RAY_REPEATED = re.compile(r'\s*\[repeated \d+x across cluster\]\s*$')
# Markdown autolinks a code host adds to a pasted log: "[net_ib.cc:1909](http://net_ib.cc:1909/)" -> "net_ib.cc:1909".
_AUTOLINK = re.compile(r'\[([^\[\]\s]+)\]\((?:https?://)?[^()\s]*\)')


def _clean(line):
    """``line`` stripped of a quote mark, console colours, Ray's repeat count and a code host's autolinks, then of the
    time in front (``_untimed``).  Returns (text, linked): see ``unwrap``."""
    s = line.strip()
    if s.startswith('> '):
        s = s[2:]
    if '\x1b' in s:
        s = _ANSI.sub('', s)
    if s.endswith('across cluster]'):
        s = _RAY_REPEATED.sub('', s)
    linked = None
    if '](' in s:
        with_links = s
        s = _AUTOLINK.sub(r'\1', s)
        if s != with_links:
            linked = (with_links, s)
    return _untimed(s), linked


# Launcher wrappers, in the order they are tried: mpirun --tag-output "[1,3]<stdout>:", Ray "(pid=12, ip=..) ", Slurm
# "0: ", "[trainer3]: ", and pdsh / mpi-operator "node01: " or "10.3.35.83: " in front of nccl-tests "#" lines,
# version banners or NCCL lines (the only one that may start with a letter).
_WRAPPERS = _WRAP_MPI, _WRAP_RAY, _WRAP_SLURM, _WRAP_TAG, _WRAP_HOST = tuple(re.compile(rx) for rx in (
    r'^\[(\d+),(\d+)\]<(?:stdout|stderr)>:',
    r'^\((?:[\w.\-]+ )?pid=(\d+)(?:, ip=([\w.:\-]+))?\) ',
    r'^(\d+): ',
    r'^\[([\w.\-]+)\]: ?',
    r'^[A-Za-z0-9][\w.\-]{0,127}: (?=#|[NR]CCL (?:version|INFO|WARN)|[\w.\-]+ ?:\d+:\d+ \[)',
))


def unwrap(line):
    """``line`` without what consoles, log viewers, code hosts and launchers put around it.

    Returns (text, tag, linked): ``tag`` the launcher wrapper taken off (it names the process when NCCL's own prefix is
    missing), ``linked`` (text with autolinks, text without) when a code host's autolinks were removed, else None.
    """
    s, linked = _clean(line)
    c0 = s[:1]
    tag = None
    if c0 == '[' or c0 == '(' or c0.isalnum():      # the launcher wrappers start with one of these
        for rx in (_WRAPPERS if not c0.isalpha() else (_WRAP_HOST,)):
            m = rx.match(s)
            if m:
                tag = m.group(0).strip()
                s = s[m.end():].lstrip()
                m2 = _TIMESTAMP.match(s)
                if m2:
                    s = s[m2.end():]
                break
    return s, tag, linked


# ---------------------------------------------------------------- process prefixes (read by the analyser)
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

# ---------------------------------------------------------------- level and message
# The source location NCCL (or a net plugin) prints before WARN: "transport/net_ib.cc:93", "misc/socket.cc:50
# (ncclSocketConnect)", or a plugin's C++ signature "tcpxResult_t tcpxCommProgress(tcpxComm*):1231".
_WARN_LOC = r'(?:[\w./\-+]+|(?:[\w:<>*&~,]+ ){0,8}[\w:~<>]+\([^()]*\)(?: const)?):\d+'
_WARN_HEAD = re.compile(r'^(?:(' + _WARN_LOC + r')(?: \([^)]*\))? )?(?:NCCL )?WARN (.*)$')
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
# "[Rank 3] " that a framework puts before an NCCL message.
_RANK_TAG = re.compile(r'^\[Rank (\d+)\] ')

INFO, WARN = 'INFO', 'WARN'


def message(rest, prefixed):
    """The level and message of a line once its process prefix is off (``prefixed``: there was one).

    Returns (INFO, None, message), (WARN, text from the source location on, message after "WARN"), or (None, None,
    None) for a line that is neither (a version banner, nccl-tests output, a framework's error).  Without a prefix
    (a shipper dropped it) "NCCL INFO" / "NCCL WARN" may stand anywhere, and some INFO messages are known bare.
    """
    if prefixed:
        if rest.startswith('NCCL INFO '):
            return INFO, None, rest[10:]
        if rest.startswith('INFO '):
            return INFO, None, rest[5:]
        mw = _WARN_HEAD.match(rest)
        if mw:
            return WARN, rest, mw.group(2)
        idx = rest.find('NCCL WARN ')
        if idx >= 0:        # a source location _WARN_HEAD does not know, e.g. "[Rank 3] file.cc:12 NCCL WARN ..."
            return WARN, rest, rest[idx + 10:]
        return None, None, None
    idx = rest.find('NCCL INFO ')
    if idx >= 0:
        return INFO, None, rest[idx + 10:]
    mw = _WARN_HEAD.match(rest)
    if mw and 'WARN' in rest:
        return WARN, rest, mw.group(2)
    mw = _WARN_ANY.search(rest) if 'NCCL WARN ' in rest else None
    if mw:
        return WARN, mw.group(1), mw.group(2)
    if _BARE_INFO.match(rest):
        return INFO, None, rest
    return None, None, None
