"""The roles' host path inputs (plugins/module_utils/host/host_paths.py): absolute, empty only where it means
something; each message names the variable the user set, what it takes and the value."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.hpcnet.rdma.plugins.module_utils.host import host_paths

REPO = Path(__file__).resolve().parents[5]


def test_nothing_given_and_the_defaults_are_fine():
    assert host_paths.errors({}) == []
    assert host_paths.errors(dict((name, None) for name in host_paths.HOST_PATHS)) == []
    assert host_paths.errors({"health_expected_path": "/etc/hpcnet/health.json", "ofed_work_dir": "/var/cache/x",
                              "verify_nccl_tests_dir": "", "health_textfile_dir": "", "health_metrics": "auto"}) == []


@pytest.mark.parametrize("name, value, message", [
    ("health_expected_path", "hpcnet/health.json",
     "health_expected_path must be an absolute path (the file the health check's expected state is written to, "
     "/etc/hpcnet/health.json by default); got 'hpcnet/health.json'."),
    ("health_install_prefix", "", "health_install_prefix must be an absolute path (the health check goes to "
                                  "<prefix>/sbin and <prefix>/lib/hpcnet-rdma, /usr/local by default); got ''."),
    ("health_textfile_dir", "node-exporter",
     "health_textfile_dir must be an absolute path or empty (node_exporter's --collector.textfile.directory, "
     "/var/lib/prometheus/node-exporter on Debian; empty: no metrics, where health_metrics is auto or false); got "
     "'node-exporter'."),
    ("verify_nccl_tests_dir", "build", "verify_nccl_tests_dir must be an absolute path or empty (the nccl-tests "
                                       "binaries on every host, /opt/nccl-tests/build by default; empty: they are "
                                       "found on PATH); got 'build'."),
    ("ofed_work_dir", "cache", "ofed_work_dir must be an absolute path (where the vendor stack's artifacts are "
                               "downloaded on the host, /var/cache/hpcnet-rdma by default); got 'cache'."),
    ("nccl_conf_path", "nccl.conf", "nccl_conf_path must be an absolute path (NCCL reads /etc/nccl.conf, or the file "
                                    "NCCL_CONF_FILE names); got 'nccl.conf'."),
    ("roce_sysfs_root", 5, "roce_sysfs_root must be an absolute path (root of sysfs, /sys on a real host); got 5."),
])
def test_each_bad_path_names_its_variable_and_what_it_takes(name, value, message):
    assert host_paths.errors({name: value}) == [message]


@pytest.mark.parametrize("metrics", ["true", "True", True])
def test_an_empty_textfile_dir_is_refused_only_where_metrics_are_forced_on(metrics):
    assert host_paths.errors({"health_textfile_dir": "", "health_metrics": metrics}) == [
        "health_textfile_dir is empty, but health_metrics is %s: health_metrics true writes the metrics there; set "
        "health_textfile_dir to node_exporter's --collector.textfile.directory, or set health_metrics: auto or false."
        % metrics]
    assert host_paths.errors({"health_textfile_dir": "", "health_metrics": "false"}) == []


def _role_options():
    for spec_file in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        for entry in yaml.safe_load(spec_file.read_text())["argument_specs"].values():
            yield from (entry.get("options") or {}).items()


def test_every_role_path_input_on_the_host_is_in_the_table():
    # a spec's `type: path` is a path on the managed host (the controller's stay `str`: verify_report_dir,
    # ofed_mlnx_ofed_file), so each is in the table; the table has more (health's and verify's are `str`)
    paths = set(name for name, option in _role_options() if option.get("type") == "path")
    assert paths <= set(host_paths.HOST_PATHS), sorted(paths - set(host_paths.HOST_PATHS))
    # and each entry of the table is a role's input
    assert set(host_paths.HOST_PATHS) <= set(name for name, _option in _role_options())
