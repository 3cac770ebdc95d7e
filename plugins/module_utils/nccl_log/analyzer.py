# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NcclLogAnalyzer: takes one line through the grammar to the process it belongs to and hands its message to the
evidence handlers or the error rules; ``result()`` asks the summariser.  Memory is bounded by the number of
processes, ranks and distinct error texts, never by the size of the log."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.grammar import (
    INFO, _CUT_PREFIX, _LINE_BYTES, _MASKED_PREFIX, _PREFIX, _PREFIX_GLUED, _wanted, message,
    split_line, unwrap, worth_reading)
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.evidence import (
    Proc, _VERSION, flush_chains, info, table_line, tests_comment, version, warn)
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.rules import other_error
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log.summary import Summariser

MAX_ERRORS = 200


class NcclLogAnalyzer:
    """Incremental analyser: ``feed(line)`` any number of times, then ``result()``."""

    def __init__(self):
        self.lineno = 0
        self.procs = {}
        self.tid = None             # thread id of the line being read (its prefix), for return-code chains
        self.inner = None           # (text after wrappers, process, replay) of the last whole INFO line read, see scan.py
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
        self.nccl_lines = 0
        self.comms_kept = [0]       # communicators kept by all processes (comms.name_comm bounds them)
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
        self.inner = None
        if isinstance(line, bytes):
            line = line.decode('utf-8', 'replace')
        try:
            for text, joined, whole in split_line(line):
                self._line(text, lineno, joined, whole)
        except Exception:  # pylint: disable=broad-except
            # A malformed line must never stop the analysis of the rest of the log; the fuzz tests keep this at 0.
            self.parse_errors += 1

    # ------------------------------------------------------------ per line
    def _line(self, line, lineno, joined, whole):
        """Analyse one line (``whole``: the whole input line, not a part of a JSON record or of joined lines)."""
        self.inner = None
        if self.in_table and table_line(self, line):
            return
        if not worth_reading(line, self.tests_devices_seen):
            return
        s, tag, self._linked = unwrap(line)
        proc, rest, at_start = self._process(s, joined)
        level, text, msg = message(rest, proc is not None)
        if level is None:
            self._other(proc, rest, lineno)
            return
        self.nccl_lines += 1
        if proc is None:
            proc = self._tag_proc(tag)
        if level is INFO:
            replay = info(self, proc, msg, lineno, line)
            if replay is not None and whole and at_start:
                # what the prefix and message were read from once launcher wrappers and timestamps were taken off: the
                # memo may replay repeats of this line like those of a bare prefixed line
                self.inner = (s, proc, replay)
        else:
            warn(self, proc, text, msg, lineno, self._as_printed(text))

    def _process(self, s, joined):
        """The process whose prefix ``s`` (a line without wrappers) starts with, and the rest of the line.

        Returns (process or None, rest, whether a whole prefix starts the line); sets ``tid``.
        """
        self.tid = None
        m = _PREFIX.search(s)
        if m and m.start() <= 64:
            host, pid, dev = m.group(1), m.group(2), m.group(4)
            self.tid = m.group(3)
            if m.start() and host[0].isdigit() and _CUT_PREFIX.search(s, 0, m.start()):
                cut = host.lstrip('0123456789')     # the cut tid may have run into a host name seen before
                if cut in self.hosts_seen:
                    host = cut
            if host not in self.hosts_seen:
                # (a clipped host sticks to the text before it, "[15]23:83:"; a host at the start of the text or after
                # a blank is taken as printed: containers often share pid 1)
                clipped = m.start() > 0 and not s[m.start() - 1].isspace()
                host = self._known_host(host, pid, joined, clipped)
            key = host + ':' + pid
            proc = self.procs.get(key)
            if proc is None:
                proc = self.procs[key] = Proc(key, host, int(pid))
                self.hosts_seen.add(host)
                for i in range(max(1, len(host) - 253), len(host)):      # (pid, proper suffix of a host) -> the first such host
                    self.pid_suffixes.setdefault((pid, host[i:]), host)
                glued = host + pid
                # two processes whose host and pid run together alike ("node1"+"23", "node12"+"3"): neither
                self.glued_keys[glued] = proc if glued not in self.glued_keys else None
            proc.devs.add(int(dev))
            return proc, s[m.end():], m.start() == 0
        mg = _PREFIX_GLUED.search(s)
        if mg and mg.start() <= 64:
            proc = self.glued_keys.get(mg.group(1))      # only a process already seen by its whole prefix
            if proc is not None:
                self.tid = mg.group(2)
                proc.devs.add(int(mg.group(3)))
                return proc, s[mg.end():], False
            return None, s, False
        mm = _MASKED_PREFIX.match(s)
        if mm:
            # a prefix the poster masked ("hostname:portnum [0] INFO ..."): no process, but the message is read
            rest = s[mm.end():]
            return None, 'NCCL ' + rest if rest.startswith('INFO ') else rest, False
        return None, s, False

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
            proc = self.procs[key] = Proc(key, None, None)
        return proc

    def _other(self, proc, rest, lineno):
        """Lines that are not NCCL INFO/WARN: version banner, nccl-tests output, framework errors."""
        if 'CCL version' in rest:
            mv = _VERSION.search(rest)
            if mv:
                version(self, proc, mv.group(1), lineno)
        s = rest.strip()
        if s.startswith('#'):
            tests_comment(self, s)
            return
        found = other_error(s)
        if found is not None:
            text, category, meaning = found
            self.add_error(text, category, lineno, proc, meaning=meaning)

    # ------------------------------------------------------------ what handlers record
    def add_error(self, text, category, lineno, proc, meaning=None):
        """Count an error line (one entry by text, at most MAX_ERRORS texts) and the host of ``proc``."""
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

    def note(self, kind, lineno, raw):
        """Quote line ``lineno`` as evidence of ``kind`` (the first five of each kind)."""
        lst = self.evidence.setdefault(kind, [])
        if len(lst) < 5:
            lst.append({'line': lineno, 'text': raw.strip()[:300]})

    # ------------------------------------------------------------ result
    def result(self):
        """Return the analysis as a JSON-serialisable dict (see the module RETURN for the keys)."""
        for proc in self.procs.values():
            flush_chains(self, proc)
        return Summariser(self).summary()


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
