# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""analyze_file's grep-accelerated path gives exactly the result of the pure-Python path.

Compared on every fixture, on the adversarial mixes of test_nccl_log_file_scan, on CRLF, unterminated, non-UTF-8
and NUL-byte files, in both grep modes (one grep; the file split between two greps, forced with a small
``_SPLIT_MIN``).  Also: grep selects exactly the lines the Python rule selects, failures fall back, errors stay.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import tool_runner
from ansible_collections.hpcnet.rdma.plugins.module_utils.nccl_log import analyze_file, analyze_text, grammar, scan
from fixtures_path import nccl_log_fixtures
from test_nccl_log_file_scan import adversarial_mix, many_comms

pytestmark = pytest.mark.skipif(scan._gnu_grep() is None, reason="GNU grep is not on PATH")

FIXTURES = nccl_log_fixtures()
MODES = ("one-grep", "split")
P = "gpu%02d:%d:%d [%d] NCCL INFO "


def canon(result):
    return json.dumps(result, sort_keys=True, default=str)


@pytest.fixture(name="grep_used")
def fixture_grep_used(monkeypatch):
    """Records whether each analyze_file call got its result from grep (True) or fell back (False)."""
    calls = []
    real = scan._grep_scan

    def spy(path, fh):
        an = real(path, fh)
        calls.append(an is not None)
        return an

    monkeypatch.setattr(scan, "_grep_scan", spy)
    return calls


def set_mode(monkeypatch, mode):
    if mode == "split":
        monkeypatch.setattr(scan, "_SPLIT_MIN", 1)
        monkeypatch.setattr(scan.os, "cpu_count", lambda: 2)
    else:
        monkeypatch.setattr(scan, "_SPLIT_MIN", 1 << 62)


def same(path, grep_used, expect_grep=True):
    want = canon(analyze_file(str(path), use_grep=False))
    got = canon(analyze_file(str(path), use_grep=True))
    assert got == want
    assert grep_used[-1] is expect_grep
    return json.loads(got)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("log", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_grep_path_equals_python_path_on_fixture(log, mode, monkeypatch, grep_used):
    set_mode(monkeypatch, mode)
    same(log, grep_used)


SYNTHETIC = {
    "adversarial-mix": adversarial_mix,
    "repeated-communicators": lambda: "".join(line + "\n" for line in many_comms(12)).encode(),
    "all-fixtures-concatenated-crlf": lambda: b"".join(f.read_bytes().rstrip(b"\n") + b"\n" for f in FIXTURES).replace(b"\n", b"\r\n"),
    "crlf-no-final-newline": lambda: "\r\n".join(many_comms(2, nranks=4, hosts=2)).encode(),
    "last-line-relevant-unterminated": lambda: ("\n".join(many_comms(1, nranks=2, hosts=1) + [P % (0, 1, 2, 0) + "Using network Socket"])
                                                ).encode(),
    "last-line-irrelevant-unterminated": lambda: ("\n".join(many_comms(1, nranks=2, hosts=1) + [P % (0, 1, 2, 0) + "Setting affinity"])
                                                  ).encode(),
    "last-line-digits-unterminated": lambda: b"12 34 x\n" + ("\n".join(many_comms(1, nranks=2, hosts=1))).encode() + b"\n  7",
    "non-utf8-and-nul": lambda: b"\n".join([
        (P % (0, 1, 2, 0)).encode() + b"NET/IB : Using [0]mlx5_\xff:1/IB ; OOB ib0:10.0.0.1<0>",
        b"\xff\xfe\x00 garbage \x00 via \x80",
        (P % (0, 1, 2, 0)).encode() + b"Channel 00/0 : 0[0] -> 1[1] via NET/IB/0/GDRDMA\x00",
        b"\x00\x00\x00",
        (P % (0, 1, 2, 0)).encode() + b"NCCL_IB_HCA set by environment to \xe9mlx5",
        "h\u00f4te:1:2 [0] NCCL INFO Using network IB".encode("latin-1"),
        "h\u00f4te:1:2 [0] NCCL INFO Using network IB".encode("utf-8"),
        b"\x1b[31m" + (P % (0, 1, 2, 0)).encode() + b"WARN NET/IB : Got completion with error 12\x1b[0m",
    ]) + b"\n",
    "leading-rule-edges": lambda: b"\n".join([
        b"1 2 x", b" \t1\x0b2\x0cx", b"\r1 2 _", b"1 2 -", b"12 x", b"1  2", b"{", b" \x0b{\"log\": \"x\"}", b"x{",
        b"0: node:1:2 [0] NCCL INFO Init START", b"\x0c 3 4 z", b"1\r2\ry", b"a 1 2 x", b"1 2 \xe9",
    ]) + b"\n",
    "comm-init-variants": lambda: "\n".join([
        P % (0, 1, 2, 0) + "ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START",
        P % (0, 1, 2, 0) + "ncclCommInitRank comm 0x2 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START",
        P % (0, 1, 2, 0) + "ncclCommInitRank comm 0x3 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START ",
        P % (0, 1, 2, 0) + "ncclCommInitRank comm 0x4 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START\t",
        P % (0, 1, 2, 0) + "ncclCommInitRank comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START \u00e9",
        P % (0, 1, 2, 0) + "ncclCommInitRank comm 0x6 rank 0 nranks 2 cudaDev 0 busId 1000 NCCL version 2.18.1",
        P % (0, 1, 2, 0) + "ncclCommInitRank comm 0x7 rank 0 nranks 2 cudaDev 0 busId 1000 4 coll channels",
        P % (0, 1, 2, 0) + "ncclCommInitRankConfig comm 0x8 rank 0 nranks 2 cudaDev 0 - Init COMPLETE",
        "gpu00:1:2 [0] NCCL INFO  ncclCommInitRank comm 0x9 rank 0 nranks 2 cudaDev 0 - Init START",
        "gpu 00:1:2 [0] NCCL INFO ncclCommInitRank comm 0xa rank 0 nranks 2 cudaDev 0 - Init START",
        "x gpu00:1:2 [0] NCCL INFO ncclCommInitRank comm 0xb rank 0 nranks 2 cudaDev 0 - Init START",
        "-gpu00:1:2 [0] NCCL INFO ncclCommInitRank comm 0xc rank 0 nranks 2 cudaDev 0 - Init START",
        "gpu00:1:2 [-1] NCCL INFO ncclCommInitRank comm 0xd rank 1 nranks 2 cudaDev 0 - Init START",
        P % (0, 1, 2, 0) + "init.cc:903 -> 5",
        P % (0, 1, 2, 0) + "ncclCommInitRank comm 0xe rank 0 nranks 2 cudaDev 0 busId 1000 - Init START",
    ] * 3).encode("utf-8") + b"\n",
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_grep_path_equals_python_path_on_synthetic_log(name, mode, tmp_path, monkeypatch, grep_used):
    set_mode(monkeypatch, mode)
    path = tmp_path / "log"
    path.write_bytes(SYNTHETIC[name]())
    same(path, grep_used)


@pytest.mark.parametrize("data, lines", [(b"", 0), (b"\n", 1), (b"\n\n", 2), (b"x", 1), (b"x\n", 1), (b"x\ny", 2),
                                         (b"\r\n\r", 2), (b"Using network IB", 1)])
@pytest.mark.parametrize("mode", MODES)
def test_line_count_matches_python_including_an_unterminated_last_line(data, lines, mode, tmp_path, monkeypatch, grep_used):
    set_mode(monkeypatch, mode)
    path = tmp_path / "log"
    path.write_bytes(data)
    assert same(path, grep_used)["lines"] == lines


def test_grep_selects_exactly_the_lines_the_python_rule_selects(tmp_path):
    # No re-check in Python here: grep's own selection (_GREP_ERE) must equal _wanted, line for line.
    pieces = [t.decode() for t in grammar._TOKENS]
    pieces += ["", " ", "\t", "\x0b", "\x0c", "\r", "{", "1", "23", "x", "_", "-", "\xe9", "via", "Ring", "NET", "#"]
    lines = set()
    for a in pieces:
        for b in pieces:
            for c in ("", " ", "1", "x", "{"):
                lines.add((a + b + c).encode("latin-1"))
                lines.add((c + a + b).encode("latin-1"))
    lines = sorted(line for line in lines if b"\n" not in line)
    path = tmp_path / "log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    out = subprocess.run([scan._gnu_grep(), "-a", "-n", "-E", "-e", scan._GREP_ERE, "--", str(path)],
                         stdout=subprocess.PIPE, env=dict(os.environ, LC_ALL="C"), check=False).stdout
    chosen = {int(item.split(b":", 1)[0]) for item in out.split(b"\n") if item}
    want = {i + 1 for i, line in enumerate(lines) if grammar._wanted(line)}
    assert chosen == want
    assert len(want) > 100 and len(lines) - len(want) > 100


def test_token_literals_are_escaped_for_grep(tmp_path):
    tokens = (b"a.c", b"[x]", b"(y)", b"p*q+r?", b"{2}", b"a|b", b"^s$", b"back\\slash", b"]", b"[")
    lines = [b"zz" + t + b"zz" for t in tokens] + [b"abc", b"x", b"y", b"pqr", b"22", b"a", b"s", b"backslash", b"zz"]
    path = tmp_path / "log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    for tok in tokens:
        out = subprocess.run([scan._gnu_grep(), "-a", "-n", "-E", "-e", scan._ere_literal(tok), "--", str(path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, LC_ALL="C"), check=False)
        assert out.stderr == b"", tok
        want = [n + 1 for n, line in enumerate(lines) if tok in line]
        assert [int(x.split(b":", 1)[0]) for x in out.stdout.splitlines()] == want, tok


def test_grep_pattern_and_python_filter_derive_from_one_token_list():
    alternatives = scan._GREP_ERE.split("|")
    assert alternatives[:len(grammar._TOKENS)] == [scan._ere_literal(t) for t in grammar._TOKENS]
    assert "|".join(alternatives[len(grammar._TOKENS):]) == scan._LEADING_ERE
    for tok in grammar._TOKENS:
        assert grammar._relevant(b"x " + tok + b" y")
        assert any(rx.search(b"h:1:2 [0] NCCL INFO x " + tok + b" y") for _a, _l, rx in scan._TOKEN_SCANS), tok
    assert not grammar._relevant(b"gpu0:1:2 [0] NCCL INFO AllReduce: opCount 1 comm 0x1 [nranks=2] stream 0x9")


def test_communicator_lines_are_parsed_every_time(tmp_path):
    """A communicator line makes its communicator the thread's current one: the memo never replays it, so a file
    (memo) and a text (no memo) read the connection lines after it in the same communicator."""
    a = b"n1:7:7 [0] NCCL INFO "
    init = [a + b"ncclCommInitRank comm 0x1%d rank 0 nranks %d cudaDev 0 busId 1000 - Init START" % (n, n) for n in (2, 4)]
    hop = a + b"Channel 00/0 : 1[1] -> 0[0] [receive] via NET/IB/0"
    data = b"\n".join([init[0], hop, init[1], hop, init[0], hop, init[1]] * 3) + b"\n"
    path = tmp_path / "log"
    path.write_bytes(data)
    got, text = analyze_file(str(path)), analyze_text(data)
    assert got["communicators"] == text["communicators"] and got["intra_node"] == text["intra_node"]
    assert [c["nranks"] for c in got["communicators"]] == [2, 4]


def test_missing_grep_falls_back_to_python(tmp_path, monkeypatch, grep_used):
    path = tmp_path / "log"
    path.write_bytes(adversarial_mix())
    monkeypatch.setattr(scan.shutil, "which", lambda name: None)
    same(path, grep_used, expect_grep=False)


@pytest.mark.parametrize("mode", MODES)
def test_grep_error_falls_back_to_python(tmp_path, monkeypatch, grep_used, mode):
    set_mode(monkeypatch, mode)
    path = tmp_path / "log"
    path.write_bytes(adversarial_mix())
    monkeypatch.setattr(scan, "_GREP_ERE", "(")     # grep exits 2: invalid regular expression
    same(path, grep_used, expect_grep=False)


def test_no_match_is_not_an_error(tmp_path, grep_used):
    path = tmp_path / "log"
    path.write_bytes(b"nothing here\nnor here\n")
    assert same(path, grep_used)["lines"] == 2


def test_environment_variable_disables_grep(tmp_path, monkeypatch, grep_used):
    path = tmp_path / "log"
    path.write_bytes(adversarial_mix())
    monkeypatch.setenv("HPCNET_NCCL_NO_GREP", "1")
    analyze_file(str(path))
    assert grep_used == []


def test_non_regular_file_uses_python(grep_used):
    assert analyze_file(os.devnull)["lines"] == 0
    assert grep_used == [False]


@pytest.mark.parametrize("use_grep", [True, False])
def test_missing_file_and_directory_raise_as_before(tmp_path, use_grep):
    with pytest.raises(FileNotFoundError):
        analyze_file(str(tmp_path / "missing.log"), use_grep=use_grep)
    with pytest.raises(IsADirectoryError):
        analyze_file(str(tmp_path), use_grep=use_grep)


@pytest.mark.parametrize("use_grep", [True, False])
def test_unreadable_file_raises_as_before(tmp_path, monkeypatch, use_grep):
    path = tmp_path / "log"
    path.write_bytes(b"x\n")

    def denied(*_args, **_kw):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(scan, "open", denied, raising=False)    # (root could read a chmod 0 file)
    with pytest.raises(PermissionError):
        analyze_file(str(path), use_grep=use_grep)


def test_subprocesses_are_argv_lists_in_the_c_locale(tmp_path, monkeypatch):
    seen = []
    real = subprocess.Popen

    def spy(args, **kw):
        seen.append((args, kw))
        return real(args, **kw)

    monkeypatch.setattr(tool_runner.subprocess, "Popen", spy)    # the one runner starts every program
    set_mode(monkeypatch, "split")
    path = tmp_path / "-log with space"
    path.write_bytes(adversarial_mix())
    analyze_file(str(path))
    assert len(seen) == 5
    for args, kw in seen:
        assert isinstance(args, list) and not kw.get("shell")
        assert kw["env"]["LC_ALL"] == "C" and "GREP_OPTIONS" not in kw["env"]
    assert re.search(r"/grep$", seen[0][0][0])


LINE_PARTS = st.sampled_from(many_comms(2, nranks=4, hosts=2)[:60] + [
    "", "  ", "\r", "12 34 x", "{}", "# x", P % (1, 1, 1, 0) + "a.cc:1 -> 2", "[0,1]<stderr>:x NCCL WARN boom",
    "x" * 300, "gpu01:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via NET/Socket/0", "\x00", "\xff via",
])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(LINE_PARTS, max_size=80), st.booleans(), st.sampled_from(MODES))
def test_grep_path_equals_python_path_on_random_mixes(tmp_path, monkeypatch, lines, final_newline, mode):
    set_mode(monkeypatch, mode)
    path = tmp_path / "log"
    path.write_bytes("\n".join(lines).encode("latin-1") + (b"\n" if final_newline and lines else b""))
    assert canon(analyze_file(str(path), use_grep=True)) == canon(analyze_file(str(path), use_grep=False))


def test_shutil_is_used_to_find_grep():
    assert scan._gnu_grep() == shutil.which("grep")
