"""Tests of RDMA stack detection (module_utils/stack/rdma_stack.py)."""

from __future__ import annotations

import resource

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import rdma_stack
from ansible_collections.hpcnet.rdma.plugins.module_utils.stack.rdma_stack import (
    StackParseError,
    memlock_limits,
    parse_ofed_info_s,
    probe_stack,
    upstream_version,
)
from fixtures_path import real_fixtures

CAPTURES = sorted((real_fixtures() / "rdma-outputs").glob("ofed_info-s-*.txt"))
EXPECTED = {
    "ofed_info-s-01.txt": {"provider": "mlnx_ofed", "version": "5.0-2.1.8.0"},
    "ofed_info-s-02.txt": {"provider": "doca", "version": "24.07-0.3.5.0.110"},
}


def test_every_ofed_info_capture_has_an_expectation():
    assert sorted(p.name for p in CAPTURES) == sorted(EXPECTED)


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_parse_real_ofed_info_captures(capture):
    assert parse_ofed_info_s(capture.read_text(encoding="utf-8")) == EXPECTED[capture.name]


@pytest.mark.parametrize("text, provider, version", [
    ("MLNX_OFED_LINUX-24.10-2.1.8.0:\n", "mlnx_ofed", "24.10-2.1.8.0"),  # last standalone MLNX_OFED LTS
    ("MLNX_OFED_LINUX-23.10-0.5.5.0:", "mlnx_ofed", "23.10-0.5.5.0"),
    ("MLNX_OFED_LINUX-4.9-7.1.0.0", "mlnx_ofed", "4.9-7.1.0.0"),  # no trailing colon
    ("OFED-internal-25.10-1.7.1:\n", "doca", "25.10-1.7.1"),
    ("OFED-internal-24.10-1.1.4.0.200:", "doca", "24.10-1.1.4.0.200"),
    ("\n  OFED-internal-23.10-1.1.9:  \n", "doca", "23.10-1.1.9"),
])
def test_provider_is_decided_by_the_prefix_not_the_version(text, provider, version):
    assert parse_ofed_info_s(text) == {"provider": provider, "version": version}


@pytest.mark.parametrize("text", ["", "\n", "ofed_info: command not found", "OFED-5.4:", "MLNX_OFED_LINUX-:", "rdma-core-44.0"])
def test_unrecognised_ofed_info_output_raises(text):
    with pytest.raises(StackParseError, match="ofed_info -s"):
        parse_ofed_info_s(text)


@pytest.mark.parametrize("raw, version", [("44.0-2", "44.0"), ("1:50.0-1ubuntu1", "50.0"), ("48.0", "48.0"), ("2307mlnx47-1.2310036", "2307mlnx47")])
def test_upstream_version_strips_epoch_and_revision(raw, version):
    assert upstream_version(raw) == version


class FakeRunner:
    """Records argv lists; ``tools`` maps a tool name to (rc, stdout) or None when not on PATH."""

    def __init__(self, tools):
        self.tools = tools
        self.calls = []

    def which(self, name):
        return "/usr/bin/" + name if self.tools.get(name) is not None else None

    def run(self, argv, changes=False, timeout=None):
        assert isinstance(argv, list), "commands must be argv lists"
        self.calls.append(argv)
        rc, out = self.tools[argv[0].rsplit("/", 1)[1]]
        return rc, out, ""


def _no_lib():
    return False


def test_probe_uses_ofed_info_first():
    runner = FakeRunner({"ofed_info": (0, "OFED-internal-24.07-0.3.5.0.110:\n"), "dpkg-query": (0, "installed\t44.0-2")})
    assert probe_stack(runner, _no_lib) == {"provider": "doca", "version": "24.07-0.3.5.0.110",
                                            "ofed_info": "OFED-internal-24.07-0.3.5.0.110:"}
    assert runner.calls == [["/usr/bin/ofed_info", "-s"]]


def test_probe_finds_inbox_rdma_core_with_dpkg():
    runner = FakeRunner({"dpkg-query": (0, "installed\t44.0-2")})
    assert probe_stack(runner, _no_lib) == {"provider": "inbox", "version": "44.0", "ofed_info": None}
    assert runner.calls == [["/usr/bin/dpkg-query", "-W", "-f=${db:Status-Status}\t${Version}", "rdma-core"]]


def test_probe_ignores_a_removed_dpkg_package():
    runner = FakeRunner({"dpkg-query": (0, "config-files\t44.0-2")})
    assert probe_stack(runner, _no_lib)["provider"] == "none"


def test_probe_finds_inbox_rdma_core_with_rpm():
    runner = FakeRunner({"dpkg-query": None, "rpm": (0, "48.0")})
    assert probe_stack(runner, _no_lib) == {"provider": "inbox", "version": "48.0", "ofed_info": None}
    assert runner.calls == [["/usr/bin/rpm", "-q", "--qf", "%{VERSION}", "rdma-core"]]


def test_probe_rpm_not_installed_message_is_not_a_version():
    runner = FakeRunner({"rpm": (1, "package rdma-core is not installed")})
    assert probe_stack(runner, _no_lib)["provider"] == "none"


def test_probe_falls_back_to_libibverbs():
    runner = FakeRunner({"dpkg-query": (1, "")})
    assert probe_stack(runner, lambda: True) == {"provider": "inbox", "version": None, "ofed_info": None}


def test_probe_reports_none_without_any_stack():
    assert probe_stack(FakeRunner({}), _no_lib) == {"provider": "none", "version": None, "ofed_info": None}


def test_probe_falls_through_when_ofed_info_fails_or_is_unrecognised():
    failing = FakeRunner({"ofed_info": (1, ""), "dpkg-query": (0, "installed\t50.0-2")})
    assert probe_stack(failing, _no_lib)["provider"] == "inbox"
    odd = FakeRunner({"ofed_info": (0, "something-else-1.0\n"), "dpkg-query": (0, "installed\t50.0-2")})
    assert probe_stack(odd, _no_lib) == {"provider": "inbox", "version": "50.0", "ofed_info": "something-else-1.0"}


def test_libibverbs_glob_lookup(tmp_path):
    lib = tmp_path / "x86_64-linux-gnu" / "libibverbs.so.1"
    lib.parent.mkdir()
    assert not rdma_stack._libibverbs_present((str(tmp_path / "*" / "libibverbs.so.1"),))
    lib.write_text("")
    assert rdma_stack._libibverbs_present((str(tmp_path / "*" / "libibverbs.so.1"),))


@pytest.mark.parametrize("limits, expected", [
    ((resource.RLIM_INFINITY, resource.RLIM_INFINITY), {"soft": "unlimited", "hard": "unlimited"}),
    ((65536, 8388608), {"soft": 65536, "hard": 8388608}),
])
def test_memlock_limits_in_bytes_or_unlimited(monkeypatch, limits, expected):
    monkeypatch.setattr(rdma_stack.resource, "getrlimit", lambda which: limits if which == resource.RLIMIT_MEMLOCK else (0, 0))
    assert memlock_limits() == expected


def test_memlock_limits_of_this_process_have_the_right_shape():
    limits = memlock_limits()
    assert set(limits) == {"soft", "hard"}
    assert all(v == "unlimited" or isinstance(v, int) for v in limits.values())
