"""Make the repository importable as ``ansible_collections.hpcnet.rdma`` without installing it; under pytest-xdist,
send tests that share work to one worker."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "tools"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "simhost"))


def _collection_root() -> Path:
    """Return a folder holding ansible_collections/hpcnet/rdma -> REPO_ROOT."""
    # ansible-test units runs from inside a real ansible_collections tree: nothing to do there.
    if REPO_ROOT.parent.parent.name == "ansible_collections":
        return REPO_ROOT.parent.parent.parent
    base = Path(tempfile.gettempdir()) / ("hpcnet-rdma-collections-" + hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:12])
    link = base / "ansible_collections" / "hpcnet" / "rdma"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(REPO_ROOT, target_is_directory=True)
        except FileExistsError:
            pass
    return base


sys.path.insert(0, str(_collection_root()))


# test files whose tests pytest-xdist may split finer than the file, each with its function of {test name: scope}
XDIST_SPLIT = {"playbooks/test_bad_inputs.py": "xdist_scopes"}
_XDIST_SCOPES = {}


def xdist_scope(nodeid):
    """The scope a pytest-xdist worker takes whole: the test's file (its module-scoped fixtures, a collection build, a
    browser, simulated trees, are made once), or in a file of XDIST_SPLIT the scope its function gives the test (the
    bad-input catalogue: one shared ansible-playbook run)."""
    path, _, name = nodeid.partition("::")
    for suffix, function in XDIST_SPLIT.items():
        if path.endswith(suffix):
            if suffix not in _XDIST_SCOPES:
                spec = importlib.util.spec_from_file_location("_xdist_scopes_" + Path(suffix).stem,
                                                              Path(__file__).parent / suffix)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                _XDIST_SCOPES[suffix] = getattr(module, function)()
            if name in _XDIST_SCOPES[suffix]:
                return "%s::%s" % (path, _XDIST_SCOPES[suffix][name])
    return path


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make unit` runs the tests on two pytest-xdist workers, each taking whole scopes (xdist_scope). xdist's own
    `--dist loadgroup` cannot group them: it renames each test to nodeid@group, and pytest 9 no longer takes a node's
    new name, so both workers made a shared run."""
    from xdist.scheduler import LoadScopeScheduling  # pylint: disable=import-outside-toplevel

    class SharedWorkScheduling(LoadScopeScheduling):
        """loadfile, with the files of XDIST_SPLIT split into their scopes."""

        def _split_scope(self, nodeid):
            return xdist_scope(nodeid)

    return SharedWorkScheduling(config, log)
