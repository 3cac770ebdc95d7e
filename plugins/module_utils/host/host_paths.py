# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' inputs that are paths on the managed host, and their one rule (pure Python, no Ansible imports).

A path on a host is absolute: a module runs in a temporary working directory and Ansible's ``path`` type does not
make a relative path absolute, so a relative one lands where nobody looks (or half a run later fails). An empty
value is refused too, unless the table says what empty means. The shipped playbooks check every one given before
anything changes (``play_inputs.role_errors``, from tasks/check_role_inputs.yml); the modules that take one (the
health role's ``rdma_health``, the nccl role's settings) apply the same rule.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

SYSFS = "root of sysfs, /sys on a real host"

# variable -> (what it is, for the message; what an empty value means, or None where empty is refused)
HOST_PATHS = {
    "firmware_sysfs_root": (SYSFS, None),
    "health_sysfs_root": (SYSFS, None),
    "health_expected_path": ("the file the health check's expected state is written to, /etc/hpcnet/health.json by "
                             "default", None),
    "health_install_prefix": ("the health check goes to <prefix>/sbin and <prefix>/lib/hpcnet-rdma, /usr/local by "
                              "default", None),
    "health_textfile_dir": ("node_exporter's --collector.textfile.directory, /var/lib/prometheus/node-exporter on "
                            "Debian", "no metrics, where health_metrics is auto or false"),
    "health_nccl_conf_path": ("NCCL's configuration, whose content the health check expects, /etc/nccl.conf by "
                              "default", "nccl.conf is not checked"),
    "infiniband_sysfs_root": (SYSFS, None),
    "nccl_conf_path": ("NCCL reads /etc/nccl.conf, or the file NCCL_CONF_FILE names", None),
    "nccl_sysfs_root": (SYSFS, None),
    "ofed_sysfs_root": (SYSFS, None),
    "ofed_work_dir": ("where the vendor stack's artifacts are downloaded on the host, /var/cache/hpcnet-rdma by "
                      "default", None),
    "rdma_host_sysfs_root": (SYSFS, None),
    "roce_sysfs_root": (SYSFS, None),
    "verify_nccl_tests_dir": ("the nccl-tests binaries on every host, /opt/nccl-tests/build by default",
                              "they are found on PATH"),
    "verify_sysfs_root": (SYSFS, None),
}

# an empty value that another input makes a refusal: variable -> (that input, its values that need the path, why)
EMPTY_NEEDED_WHEN = {
    "health_textfile_dir": ("health_metrics", ("true",), "health_metrics true writes the metrics there; set "
                            "health_textfile_dir to node_exporter's --collector.textfile.directory, or set "
                            "health_metrics: auto or false"),
}


def errors(values):
    """One message per host path input among ``values`` ({variable: value}; None or missing: not given, not
    checked) that a host cannot use, naming the variable, what it takes and the value given."""
    values = values or {}
    problems = []
    for name, (what, empty) in HOST_PATHS.items():
        value = values.get(name)
        if value is None:
            continue
        if isinstance(value, str) and value == "":
            needed = EMPTY_NEEDED_WHEN.get(name)
            if needed and str(values.get(needed[0])).strip().lower() in needed[1]:
                problems.append("%s is empty, but %s is %s: %s." % (name, needed[0], values[needed[0]], needed[2]))
            elif empty is None:
                problems.append("%s must be an absolute path (%s); got ''." % (name, what))
            continue
        if not (isinstance(value, str) and value.startswith("/")):
            problems.append("%s must be an absolute path%s (%s%s); got %r." % (
                name, " or empty" if empty else "", what, "; empty: %s" % empty if empty else "", value))
    return problems
