"""Tests of the vendor stack logic (module_utils/stack/ofed_stack.py): parsers on real captures, version gate, kernel drift
guard, DKMS check, driver state and input checks; and the stand-ins' output read with the same parsers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import ofed_stack
from ansible_collections.hpcnet.rdma.plugins.module_utils.stack.rdma_stack import parse_ofed_info_s
from fixtures_path import REPO_ROOT, real_fixtures

IB = real_fixtures() / "ib-stack"
VENDOR = REPO_ROOT / "tests" / "simhost" / "vendor"
sys.path.insert(0, str(VENDOR))
import stacks  # noqa: E402  pylint: disable=wrong-import-position


# ---- dkms status ----------------------------------------------------------------------------------------------
def test_dkms_status_real_run():
    rows = ofed_stack.parse_dkms_status((IB / "dkms-status-sim-01.txt").read_text())
    assert rows == [{"module": "mlnx-ofed-kernel", "version": "25.10.OFED.25.10.1.7.1.1", "kernel": "6.18.44-fc-v1098",
                     "arch": "x86_64", "state": "installed", "warning": None}]


def test_dkms_status_forms():
    text = ("mlnx-ofed-kernel, 5.8, 5.15.0-48-generic, x86_64: installed\n"
            "knem/1.1.4.90mlnx3, 6.8.0-45-generic, x86_64: installed (WARNING! Diff between built and installed module!)\n"
            "iser/24.10.OFED.24.10.1.1.4.1: added\n"
            "Error! Could not locate dkms.conf file.\n")
    rows = ofed_stack.parse_dkms_status(text)
    assert [(r["module"], r["version"], r["kernel"], r["state"]) for r in rows] == [
        ("mlnx-ofed-kernel", "5.8", "5.15.0-48-generic", "installed"),
        ("knem", "1.1.4.90mlnx3", "6.8.0-45-generic", "installed"),
        ("iser", "24.10.OFED.24.10.1.1.4.1", None, "added")]
    assert rows[1]["warning"].startswith("WARNING! Diff")


def test_dkms_guard_names_the_kernels():
    rows = ofed_stack.parse_dkms_status("mlnx-ofed-kernel/25.10.OFED.25.10.1.7.1.1, 6.8.0-40-generic, x86_64: installed\n")
    assert ofed_stack.dkms_guard(rows, "6.8.0-40-generic") is None
    msg = ofed_stack.dkms_guard(rows, "6.8.0-45-generic")
    assert "running kernel 6.8.0-45-generic" in msg and "built for 6.8.0-40-generic (installed)" in msg
    assert "built for no kernel" in ofed_stack.dkms_guard([], "6.8.0-45-generic")


# ---- kernel drift guard ---------------------------------------------------------------------------------------
def test_kernel_order_is_natural():
    kernels = ["6.1.0-9-amd64", "6.1.0-18-amd64", "6.1.0-10-amd64"]
    assert sorted(kernels, key=ofed_stack.natural_key)[-1] == "6.1.0-18-amd64"


@pytest.mark.parametrize("running, installed, pinned, fragment", [
    ("6.1.0-18-amd64", ["6.1.0-9-amd64", "6.1.0-18-amd64"], None, None),
    ("6.1.0-9-amd64", ["6.1.0-9-amd64", "6.1.0-18-amd64"], None, "6.1.0-18-amd64 is installed and boots next"),
    ("6.1.0-9-amd64", ["6.1.0-9-amd64", "6.1.0-18-amd64"], "6.1.0-9-amd64", None),
    ("6.1.0-9-amd64", ["6.1.0-9-amd64"], "6.1.0-18-amd64", "ofed_kernel pins 6.1.0-18-amd64"),
])
def test_kernel_guard(running, installed, pinned, fragment):
    msg = ofed_stack.kernel_guard(running, installed, pinned)
    assert (msg is None) if fragment is None else (fragment in msg and running in msg)


# ---- version gate ---------------------------------------------------------------------------------------------
DOCA_321 = {"provider": "doca", "version": "25.10-1.7.1.0", "doca_version": "3.2.1-044000"}


@pytest.mark.parametrize("provider, version, installed, allow, action", [
    ("doca", "3.2.1", DOCA_321, False, "none"),
    ("doca", "3.2.0", DOCA_321, False, "refuse"),
    ("doca", "3.2.0", DOCA_321, True, "change"),
    ("mlnx_ofed", "24.10-1.1.4.0", {"provider": "mlnx_ofed", "version": "24.10-1.1.4.0"}, False, "none"),
    ("mlnx_ofed", "24.10-1.1.4.0", DOCA_321, False, "refuse"),
    ("doca", "3.2.1", {"provider": "inbox", "version": "44.0"}, False, "refuse"),
    ("doca", "3.2.1", {"provider": "inbox", "version": "44.0"}, True, "change"),
    ("doca", "3.2.1", {"provider": "none", "version": None}, False, "install"),
    ("inbox", None, {"provider": "inbox", "version": "44.0"}, False, "none"),
    ("inbox", None, DOCA_321, False, "refuse"),
])
def test_plan(provider, version, installed, allow, action):
    out = ofed_stack.plan(provider, version, installed, allow)
    assert out["action"] == action
    if action == "refuse":
        assert "ofed_allow_provider_change=true" in out["message"]
        assert installed["provider"] in out["message"] and provider in out["message"]


def test_driver_pending():
    probed = {"installed": DOCA_321, "driver": {"loaded": True, "loaded_version": None, "installed_version": "25.10-1.7.1"}}
    assert ofed_stack.driver_pending(probed) == {"from": "inbox", "to": "25.10-1.7.1"}
    probed["driver"]["loaded_version"] = "25.10-1.7.1"
    assert ofed_stack.driver_pending(probed) is None
    probed["installed"] = {"provider": "inbox"}
    probed["driver"]["loaded_version"] = None
    assert ofed_stack.driver_pending(probed) is None


# ---- installer output -----------------------------------------------------------------------------------------
def test_installer_dkms_deb_failure_capture():
    out = ofed_stack.parse_installer_output((IB / "mlnxofedinstall-dkms-deb-fail-01.txt").read_text())
    assert out["passed"] is False
    assert out["failed_package"] == "mlnx-ofed-kernel-dkms"
    assert out["log"] == "/tmp/MLNX_OFED_LINUX.3031997.logs/mlnx-ofed-kernel-dkms.debinstall.log"


def test_installer_add_kernel_support_failure_capture():
    out = ofed_stack.parse_installer_output((IB / "mlnxofedinstall-add-kernel-support-fail-01.txt").read_text())
    assert out["passed"] is False
    assert any(e.startswith("Failed to build MLNX_OFED_LINUX for 5.14.0-rc5") for e in out["errors"])


def test_installer_success_tail():
    text = "Installation passed successfully\nTo load the new driver, run:\n/etc/init.d/openibd restart\n"
    out = ofed_stack.parse_installer_output(text)
    assert out["passed"] and out["activation"] == "/etc/init.d/openibd restart"


# ---- apt-cache policy (the site's packages the removal of the old stack took) ---------------------------------
def test_apt_policy_real_capture():
    policy = ofed_stack.parse_apt_policy((IB / "apt-cache-policy-01.txt").read_text())
    # a virtual package has no candidate; a name apt does not know prints nothing, so it is absent
    assert policy == {"openmpi-bin": "4.1.4-3+b1", "mail-transport-agent": None, "dpkg": "1.21.23"}


def test_apt_candidates_filter_keeps_installable_names_only():
    from ansible_collections.hpcnet.rdma.plugins.filter.ofed import ofed_apt_candidates

    assert ofed_apt_candidates((IB / "apt-cache-policy-01.txt").read_text()) == ["dpkg", "openmpi-bin"]
    assert ofed_apt_candidates("") == []


# ---- inputs ---------------------------------------------------------------------------------------------------
GOOD = "sha256:" + "a" * 64


@pytest.mark.parametrize("provider, inputs, fragment", [
    ("doca", {"ofed_doca_version": "", "pkg_mgr": "apt"}, "ofed_doca_version is required"),
    ("doca", {"ofed_doca_version": "latest", "pkg_mgr": "apt"}, "ofed_doca_version is required"),
    ("doca", {"ofed_doca_version": "3.2.1", "ofed_doca_source": "local_repo", "pkg_mgr": "apt"},
     "ofed_doca_local_repo is required"),
    ("doca", {"ofed_doca_version": "3.2.1", "ofed_doca_source": "local_repo", "ofed_doca_local_repo": "/x.deb",
              "pkg_mgr": "apt"}, "ofed_doca_local_repo_checksum is required"),
    ("doca", {"ofed_doca_version": "3.2.1", "ofed_doca_gpg_key_checksum": "md5:abc", "pkg_mgr": "apt"},
     "ofed_doca_gpg_key_checksum must be sha256"),
    ("mlnx_ofed", {"ofed_mlnx_ofed_version": "24.10-1.1.4.0", "pkg_mgr": "apt"}, "ofed_mlnx_ofed_checksum is required"),
    ("mlnx_ofed", {"ofed_mlnx_ofed_version": "24.10", "ofed_mlnx_ofed_checksum": GOOD, "pkg_mgr": "apt"},
     "ofed_mlnx_ofed_version is required"),
    ("mlnx_ofed", {"ofed_mlnx_ofed_version": "24.10-1.1.4.0", "ofed_mlnx_ofed_checksum": GOOD,
                   "ofed_mlnx_ofed_flags": ["--without-fw-update --force"], "pkg_mgr": "apt"}, "not an installer option"),
    ("doca", {"ofed_doca_version": "3.2.1", "pkg_mgr": "dnf"}, "installs vendor stacks with apt"),
    ("doca", {"ofed_doca_version": "3.1.0", "pkg_mgr": "apt"}, "DOCA before 3.2 ships kernel packages prebuilt"),
    ("doca", {"ofed_doca_version": "2.9", "pkg_mgr": "apt"}, "use DOCA 3.2 or later"),
    ("inbox", {"ofed_openib_conf": {"ipoib_load": "yes"}}, "not an openib.conf variable"),
    ("inbox", {"platform": "Gentoo 2.17 (os_family Gentoo)", "platform_supported": False},
     "no package data for Gentoo 2.17 (os_family Gentoo); supported: Debian, Ubuntu, RedHat family"),
])
def test_input_errors(provider, inputs, fragment):
    errors = ofed_stack.input_errors(provider, inputs)
    assert any(fragment in e for e in errors), errors


def test_good_inputs_have_no_errors():
    assert ofed_stack.input_errors("doca", {"ofed_doca_version": "3.2.1", "ofed_doca_source": "online",
                                            "pkg_mgr": "apt"}) == []
    assert ofed_stack.input_errors("inbox", {"platform": "Debian 12.8 (os_family Debian)",
                                             "platform_supported": True}) == []
    assert ofed_stack.input_errors("mlnx_ofed", {"ofed_mlnx_ofed_version": "24.10-1.1.4.0", "pkg_mgr": "apt",
                                                 "ofed_mlnx_ofed_checksum": GOOD,
                                                 "ofed_mlnx_ofed_flags": ["--without-fw-update"]}) == []


# ---- URL templates: NVIDIA's distribution and architecture names (roles/ofed/vars/main.yml) -------------------
ROLE_VARS = yaml.safe_load((REPO_ROOT / "roles/ofed/vars/main.yml").read_text())
ROLE_DEFAULTS = yaml.safe_load((REPO_ROOT / "roles/ofed/defaults/main.yml").read_text())


def _render(name, facts, **overrides):
    """The role's variable as Ansible templates it (lazy, nested), with these facts and inputs."""
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.template import Templar, trust_as_template  # pylint: disable=import-outside-toplevel
    scope = dict(ROLE_DEFAULTS, **ROLE_VARS)
    scope.update(overrides)
    def trust(value):
        if isinstance(value, dict):
            return {k: trust(v) for k, v in value.items()}
        return trust_as_template(value) if isinstance(value, str) else value
    scope = trust(scope)
    scope["ansible_facts"] = facts
    return str(Templar(loader=DataLoader(), variables=scope).template(scope[name])).strip()


@pytest.mark.parametrize("facts, doca, mlnx", [
    ({"distribution": "Ubuntu", "os_family": "Debian", "distribution_version": "24.04",
      "distribution_major_version": "24", "architecture": "x86_64"},
     "https://linux.mellanox.com/public/repo/doca/3.2.1/ubuntu24.04/x86_64/",
     "https://content.mellanox.com/ofed/MLNX_OFED-24.10-1.1.4.0/MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu24.04-x86_64.tgz"),
    ({"distribution": "Ubuntu", "os_family": "Debian", "distribution_version": "22.04",
      "distribution_major_version": "22", "architecture": "aarch64"},
     "https://linux.mellanox.com/public/repo/doca/3.2.1/ubuntu22.04/arm64-sbsa/",
     "https://content.mellanox.com/ofed/MLNX_OFED-24.10-1.1.4.0/MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-aarch64.tgz"),
    ({"distribution": "Debian", "os_family": "Debian", "distribution_version": "12.8",
      "distribution_major_version": "12", "architecture": "x86_64"},
     "https://linux.mellanox.com/public/repo/doca/3.2.1/debian12/x86_64/",
     "https://content.mellanox.com/ofed/MLNX_OFED-24.10-1.1.4.0/MLNX_OFED_LINUX-24.10-1.1.4.0-debian12-x86_64.tgz"),
    ({"distribution": "Rocky", "os_family": "RedHat", "distribution_version": "9.4",
      "distribution_major_version": "9", "architecture": "x86_64"},
     "https://linux.mellanox.com/public/repo/doca/3.2.1/rhel9/x86_64/",
     "https://content.mellanox.com/ofed/MLNX_OFED-24.10-1.1.4.0/MLNX_OFED_LINUX-24.10-1.1.4.0-rhel9-x86_64.tgz"),
])
def test_url_templates(facts, doca, mlnx):
    common = {"ofed_doca_version": "3.2.1", "ofed_mlnx_ofed_version": "24.10-1.1.4.0"}
    assert _render("__ofed_doca_repo_url", facts, **common) == doca
    assert _render("__ofed_mlnx_ofed_url", facts, **common) == mlnx


def test_mirror_replaces_nvidia_host():
    facts = {"distribution": "Debian", "os_family": "Debian", "distribution_version": "12",
             "distribution_major_version": "12", "architecture": "x86_64"}
    url = _render("__ofed_doca_repo_url", facts, ofed_doca_version="3.2.0", ofed_doca_mirror="http://mirror.site")
    assert url == "http://mirror.site/public/repo/doca/3.2.0/debian12/x86_64/"


# ---- the stand-ins, read with the same parsers ----------------------------------------------------------------
def _ofed_info(tmp_path, version="25.10-1.7.1.0"):
    script = tmp_path / "ofed_info"
    script.write_text((VENDOR / "files/ofed_info").read_text().replace("@OFED_VERSION@", version))
    script.chmod(0o755)
    return script


def test_stand_in_ofed_info_parses_like_the_real_one(tmp_path):
    script = _ofed_info(tmp_path)
    out = subprocess.run([str(script), "-s"], capture_output=True, text=True, check=True).stdout
    assert parse_ofed_info_s(out) == {"provider": "doca", "version": "25.10-1.7.1.0"}
    # the real -s line has the same shape as the capture
    assert parse_ofed_info_s((IB / "ofed-info-s-01.txt").read_text())["provider"] == "mlnx_ofed"
    bad = subprocess.run([str(script), "-x"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stdout.startswith("Usage: ")


def test_stand_in_openibd_prints_the_capture_layout(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool, code in (("systemctl", 0), ("pgrep", 1)):
        (fake / tool).write_text("#!/bin/sh\nexit %d\n" % code)
        (fake / tool).chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (fake, os.environ["PATH"]))
    out = subprocess.run(["bash", str(VENDOR / "files/openibd"), "restart"], capture_output=True, text=True, env=env)
    assert out.returncode == 0
    assert out.stdout == (IB / "openibd-restart-ok-01.txt").read_text()
    (fake / "pgrep").write_text("#!/bin/sh\necho 1632\n")
    busy = subprocess.run(["bash", str(VENDOR / "files/openibd"), "restart"], capture_output=True, text=True, env=env)
    assert busy.returncode == 1
    assert busy.stdout == (IB / "openibd-restart-opensm-running-01.txt").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="mlnxofedinstall refuses to run as non-root, as the real one does")
def test_stand_in_installer_add_kernel_support_failure_parses(tmp_path):
    top = tmp_path / stacks.mlnx_ofed_name("24.10-1.1.4.0")
    top.mkdir()
    (top / "mlnxofedinstall").write_text((VENDOR / "files/mlnxofedinstall").read_text())
    for name, text in ((".mlnx", "24.10-1.1.4.0"), ("distro", "debian12"), (".supported_kernels", "6.1.0-18-amd64")):
        (top / name).write_text(text + "\n")
    run = subprocess.run([sys.executable, str(top / "mlnxofedinstall"), "--skip-distro-check", "--add-kernel-support",
                          "--kernel", "0.0.0-hpcnet-no-headers", "--tmpdir", str(tmp_path)],
                         capture_output=True, text=True)
    assert run.returncode == 172
    out = ofed_stack.parse_installer_output(run.stdout)
    assert out["errors"][-1] == "Failed to build MLNX_OFED_LINUX for 0.0.0-hpcnet-no-headers"
    refused = subprocess.run([sys.executable, str(top / "mlnxofedinstall"), "--skip-distro-check", "--kernel",
                              "0.0.0-hpcnet-no-headers"], capture_output=True, text=True)
    assert refused.returncode == 172 and "--add-kernel-support" in refused.stdout


def test_stack_names():
    assert stacks.dkms_version("25.10-1.7.1.0") == "25.10.OFED.25.10.1.7.1.1"
    # the DKMS version in the real build-failure capture has the same shape
    assert "/var/lib/dkms/mlnx-ofed-kernel/24.10.OFED.24.10.3.2.5.1/" in (IB / "dkms-build-fail-01.txt").read_text()
    assert stacks.dkms_version("24.10-3.2.5.0") == "24.10.OFED.24.10.3.2.5.1"
    assert stacks.local_repo_name("3.2.1") == "doca-host-3.2.1-044000-25.10-debian12"
    assert Path(stacks.local_repo_deb("3.2.1")).suffix == ".deb"


class _DpkgQuery:
    """dpkg-query -W -f='${db:Status-Status}\\t${Version}' NAME as dpkg answers: installed, removed (config files
    left) and unknown packages."""

    STATUS = {"rdma-core": "installed\t44.0-2", "perftest": "config-files\t4.5-1"}

    def which(self, name):
        return "/usr/bin/dpkg-query" if name == "dpkg-query" else None

    def run(self, argv, changes=False, timeout=None):
        name = argv[-1]
        if name in self.STATUS:
            return 0, self.STATUS[name], ""
        return 1, "", "dpkg-query: no packages found matching %s\n" % name


def test_package_versions_reports_the_installed_ones_and_null_for_removed_or_unknown():
    assert ofed_stack.package_versions(_DpkgQuery(), ["rdma-core", "perftest", "ibverbs-utils"]) == {
        "rdma-core": "44.0-2", "perftest": None, "ibverbs-utils": None}
