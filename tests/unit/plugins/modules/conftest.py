"""What the module tests that run a module's main() against a simulated host share.

* ``run_module(main, args, check=False)`` -> ``(result, failed)``: runs ``main()`` with ``args``, exit_json and
  fail_json caught (the ``run_module`` fixture).
* ``sim_host(profile_name, tools)`` -> ``boot()``: a simulated host (tests/simhost) in the test's temp dir, its
  firmware NV state on a temp "disk" (SIMHOST_PERSIST_DIR), the named simulated tools first on PATH; ``boot()``
  builds (or rebuilds: a reboot) the tree and returns its root, ``boot.root`` (the ``sim_host`` fixture).
* ``vpi_host`` -> ``boot()``: that host with profile cx7_vpi_2p (one dual-port VPI card, port 2 Ethernet) and
  mstconfig, the firmware modules' test bed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

SIM_BIN = Path(__file__).resolve().parents[3] / "simhost" / "bin"


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture(name="run_module")
def _run_module(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", lambda self, **kw: (_ for _ in ()).throw(ExitJson(kw)))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json",
                        lambda self, msg, **kw: (_ for _ in ()).throw(FailJson(dict(kw, msg=msg))))

    def run(main, args, check=False):
        if check:
            args = dict(args, _ansible_check_mode=True)
        with patch_module_args(args):
            with pytest.raises((ExitJson, FailJson)) as info:
                main()
        return info.value.args[0], isinstance(info.value, FailJson)
    return run


@pytest.fixture(name="sim_host")
def _sim_host(monkeypatch, tmp_path):
    def make(profile_name, tools=("mstconfig",)):
        root = tmp_path / "sys"
        monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "disk"))
        monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(root))
        bindir = tmp_path / "bin"
        bindir.mkdir(exist_ok=True)
        for tool in tools:
            if not (bindir / tool).exists():
                (bindir / tool).symlink_to(SIM_BIN / tool)
        monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "")))

        def boot():
            tree.build_tree(profile.load(profile_name), root, host_index=1)
            return root
        boot()
        boot.root = root
        return boot
    return make


@pytest.fixture(name="vpi_host")
def _vpi_host(sim_host):
    return sim_host("cx7_vpi_2p")
