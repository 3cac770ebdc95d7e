# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""analyze_file: the file scanners (GNU grep selecting the lines, or whole-chunk scans in pure Python) and the memo
that replays repeats of common lines.  This is the hot path: see README.md beside this file before changing it.

Everything a line of a multi-GB log costs happens here, in this one module, so that the loops call locals and this
module's globals only (a global of another module would cost an attribute lookup per call): grep's output is split
and cut into lines with C-level calls (``map``, ``bytes.split``), a batch of lines is looked up in the memo with one
``map(memo.get, ...)``, and a stretch of memorised lines is applied as counts per distinct entry (``Counter``), never
line by line.  Only a line seen for the first time reaches the analyser (analyzer.py).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import shutil
import stat
import tempfile
from collections import Counter
from operator import itemgetter, methodcaller

from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import tool_runner
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.grammar import (
    MAX_LINE, _LEADING, _LINE_BYTES, _TOKENS, _wanted)
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.network import REPLAY_NET, REPLAY_NVLS, REPLAY_SELECT
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.analyzer import NcclLogAnalyzer

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
_MEMO_MAX = 100000


def _replayable(line):
    """Is ``line`` read as it stands (ASCII, no colour codes, not cut, not two lines run together, no Ray suffix)?"""
    return line.isascii() and b'\x1b' not in line and len(line) <= MAX_LINE and line.count(b'] NCCL ') < 2 \
        and not line.endswith(b'across cluster]')


class _ChunkScanner:
    """analyze_file's engine: finds the lines the old per-line filter would pass with whole-chunk C scans, and
    replays repeats of common lines (channel connections, Trees, comm init, network selection) from a memo."""

    def __init__(self, an):
        self.an = an
        self.memo = {}

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
        a stretch of lines that all repeat memorised lines (the memo), so no line of it is parsed and the state the
        replay conditions read (return-code chains, evidence counts) is constant along it.  A run's replays only add
        counts or set ``selected``, so they are applied per distinct memo entry (``_replay_run``).
        """
        hits = list(map(self.memo.get, lines))
        memo_get = self.memo.get
        index = hits.index
        start = 0       # first line of the pending run
        pos = 0
        end = len(hits)
        while pos < end:
            try:
                pos = index(None, pos)
            except ValueError:
                break
            hit = memo_get(lines[pos])      # memorised since the batch lookup
            if hit is not None:
                hits[pos] = hit
            else:
                if start < pos:
                    self._replay_run(hits, lines, start, pos, lineno_of)
                self._parse(lines[pos], lineno_of(pos), check)
                start = pos + 1
            pos += 1
        if start < end:
            self._replay_run(hits, lines, start, end, lineno_of)

    def take(self, line, lineno, check=False):
        """Analyse one selected ``line`` (bytes, no newline) numbered ``lineno``; replay it when it repeats a memorised line.

        ``check``: apply the exact selection rule (``_wanted``) first, for lines a superset filter (grep) passed.  A
        memorised line always passed that rule when it was first seen, so only new lines are checked.
        """
        hit = self.memo.get(line)
        if hit is None:
            self._parse(line, lineno, check)
        elif not self._replay(hit):
            self.an.feed_at(line, lineno)

    def _replay_run(self, hits, lines, start, end, lineno_of):
        """Replay ``lines[start:end]``, all memorised (``hits``): per distinct entry when every replay of the run is
        allowed now, else line by line (parsing those whose replay is not)."""
        an = self.an
        counts = Counter(hits[start:end])
        select = {}
        sel_ok = len(an.evidence.get('selection', ())) >= 5
        nvls_ok = len(an.evidence.get('nvls', ())) >= 5
        for proc, kind, value in counts:
            if proc.chain is not None or (kind == REPLAY_NVLS and not nvls_ok):
                break
            if kind == REPLAY_SELECT:
                if not sel_ok or select.setdefault(proc, value) != value:
                    break
        else:
            for (proc, kind, value), n in counts.items():
                if kind == REPLAY_NET:
                    proc.hop_nets[value] = proc.hop_nets.get(value, 0) + n
                elif kind == REPLAY_SELECT:
                    proc.selected = value
            an.nccl_lines += end - start
            return
        replay = self._replay
        for i in range(start, end):
            if not replay(hits[i]):
                an.feed_at(lines[i], lineno_of(i))

    def _replay(self, hit):
        """Replay one memo entry when allowed now (no open return-code chain, room left in the evidence it would add
        to: a repeat then changes nothing else); False when the line must be parsed."""
        proc, kind, value = hit
        an = self.an
        if proc.chain is not None or kind == REPLAY_SELECT and len(an.evidence.get('selection', ())) < 5 \
                or kind == REPLAY_NVLS and len(an.evidence.get('nvls', ())) < 5:
            return False
        an.nccl_lines += 1
        if kind == REPLAY_NET:
            proc.hop_nets[value] = proc.hop_nets.get(value, 0) + 1
        elif kind == REPLAY_SELECT:
            proc.selected = value
        return True

    def _parse(self, line, lineno, check):
        """Analyse a line that no memo entry replays, and remember what a repeat of it does.  (Communicator lines,
        "ncclCommInit* comm 0x.. rank R nranks N", are never replayed: the communicator they name becomes their
        thread's, see comms.name_comm.)"""
        if check and not _wanted(line):
            return
        self.an.feed_at(line, lineno)
        self._remember(line)

    def _remember(self, line):
        """Memorise how to replay a repeat of ``line`` (just parsed): when the parser read it as a strict
        INFO line of a process of its own prefix and the handler that read it said how (``an.inner``)."""
        inner = self.an.inner
        if inner is None or b'](' in line or not _replayable(line):
            return      # autolinks are rewritten and joined lines split before parsing: never replay those
        text, proc, replay = inner      # what the parser read once wrappers, timestamps, quotes and blanks were off
        ms = _STRICT.match(text.encode('ascii'))
        if ms is None or self.an.procs.get(ms.group(1).decode('ascii') + ':' + ms.group(2).decode('ascii')) is not proc:
            return      # the host was mapped (_known_host): a later process may change that mapping
        if len(self.memo) >= _MEMO_MAX:
            self.memo.clear()
        self.memo[line] = (proc, replay[0], replay[1])


# The same rule as a POSIX ERE for GNU grep in the C locale, where [[:space:]] is Python's bytes \s (space, \t, \n,
# \v, \f, \r) and [[:alnum:]_] its bytes \w.  Lines grep passes are checked again in Python (``_wanted``), so this
# pattern only has to select a superset; the tests check that it selects exactly the same lines.
_LEADING_ERE = '^[[:space:]]*([{]|[0-9]+[[:space:]]+[0-9]+[[:space:]]+[[:alnum:]_])'


def _ere_literal(token):
    """``token`` (ASCII bytes) as an ERE matching it literally: specials in brackets (where they are plain), ``^`` escaped."""
    return ''.join('\\^' if c == '^' else ('[%s]' % c if c in '.[]()*+?{}|$\\' else c) for c in token.decode('ascii'))


_GREP_ERE = '|'.join([_ere_literal(t) for t in _TOKENS] + [_LEADING_ERE])


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
            out = tool_runner.run_process([exe, '--version'], timeout=30, unset=_GREP_UNSET)['output']
        except (OSError, ValueError):
            out = ''
        _GNU_GREP[exe] = 'GNU grep' in out
    return exe if _GNU_GREP[exe] else None


# what would change grep's output: its options and colours, a locale other than C
_GREP_UNSET = ('GREP_OPTIONS', 'GREP_COLOR', 'GREP_COLORS', 'LANG', 'LANGUAGE')


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
    argv = [grep, '-a', '-n', '-E', '-e', _GREP_ERE]
    procs = []
    files = []

    def start(args, **kw):
        proc = tool_runner.popen(args, stderr=tool_runner.DEVNULL, unset=_GREP_UNSET, **kw)
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
                count_all = start([wc, '-l'], stdin=opened_at(0), stdout=tool_runner.PIPE)
                count_second = start([wc, '-l'], stdin=opened_at(mid), stdout=tool_runner.PIPE)
                part = start([head, '-c', str(mid), '--', path], stdin=tool_runner.DEVNULL, stdout=tool_runner.PIPE)
                first = start(argv, stdin=part.stdout, stdout=tool_runner.PIPE)
                part.stdout.close()
            else:
                count_all = start([grep, '-a', '-c', '', '--', path], stdin=tool_runner.DEVNULL, stdout=tool_runner.PIPE)
                first = start(argv + ['--', path], stdin=tool_runner.DEVNULL, stdout=tool_runner.PIPE)
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
