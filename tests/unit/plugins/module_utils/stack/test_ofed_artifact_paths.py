"""The vendor stack's artifacts on the controller (ofed_stack.input_errors): an absolute path of a file that is there,
refused in the ofed role's preflight, before the work directory is created or anything else changes."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.filter.ofed import ofed_input_errors
from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import ofed_stack

SUM = "sha256:" + "a" * 64
DOCA = {"ofed_doca_version": "3.2.1", "ofed_doca_source": "local_repo", "ofed_doca_local_repo_checksum": SUM,
        "pkg_mgr": "apt"}
MLNX = {"ofed_mlnx_ofed_version": "24.10-1.1.4.0", "ofed_mlnx_ofed_checksum": SUM, "pkg_mgr": "apt"}


@pytest.mark.parametrize("provider, inputs, message", [
    ("doca", dict(DOCA, ofed_doca_local_repo="doca-host.deb"),
     "ofed_doca_local_repo must be an http(s) URL or an absolute path of a file on the controller (got 'doca-host.deb')"),
    ("mlnx_ofed", dict(MLNX, ofed_mlnx_ofed_file="MLNX_OFED.tgz"),
     "ofed_mlnx_ofed_file must be an absolute path of a file on the controller (got 'MLNX_OFED.tgz')"),
])
def test_a_relative_artifact_path_is_refused_naming_its_variable(provider, inputs, message):
    assert ofed_stack.input_errors(provider, inputs) == [message]


def test_an_artifact_missing_on_the_controller_is_refused_by_the_filter(tmp_path):
    artifact = tmp_path / "doca-host.deb"
    assert ofed_input_errors("doca", dict(DOCA, ofed_doca_local_repo=str(artifact))) == [
        "ofed_doca_local_repo: %s is no file on the controller" % artifact]
    artifact.write_bytes(b"deb")
    assert ofed_input_errors("doca", dict(DOCA, ofed_doca_local_repo=str(artifact))) == []
    # a URL is fetched by the host; an artifact the provider does not use is not looked at
    assert ofed_input_errors("doca", dict(DOCA, ofed_doca_local_repo="https://mirror/doca-host.deb")) == []
    assert ofed_input_errors("inbox", {"ofed_mlnx_ofed_file": "MLNX_OFED.tgz"}) == []
