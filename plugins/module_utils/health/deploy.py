# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health role's one step on a host: its expected state built, the program and its timer installed, one check run.

Pure Python (no Ansible imports). ``deploy(params, runner, check_mode)`` checks what only the host can tell (the
textfile directory exists; slurmd is there when Slurm is asked for), reads the RDMA facts as ``rdma_facts`` does,
builds the expected state (``expected``: declared, else the fabric's), computes every file (``install``), writes those
that differ unless ``check_mode``, and runs one check in this process against the new expected state (the counter
snapshot is left alone: rates start with the program's first run); a host that fails it gets a warning. Raises
``DeployError`` with every problem, before anything is written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.hpcnet.rdma.plugins.module_utils.health import exposition, expected, install, report, thresholds
from ansible_collections.hpcnet.rdma.plugins.module_utils.health.cli import read_text
from ansible_collections.hpcnet.rdma.plugins.module_utils.health.health_check import HealthError, run
from ansible_collections.hpcnet.rdma.plugins.module_utils.host import host_paths
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import facts
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import PortRoleError
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.routes import default_route_netdevs


class DeployError(Exception):
    """The health role's inputs do not fit this host; the message names the variables."""


# the module's options the role sets from its variables, by the variable's name (the messages name what the user set)
ROLE_INPUTS = {"sysfs_root": "health_sysfs_root", "expected_path": "health_expected_path",
               "prefix": "health_install_prefix", "textfile_dir": "health_textfile_dir",
               "nccl_conf_path": "health_nccl_conf_path", "metrics": "health_metrics"}


def host_errors(params, runner):
    """The inputs' problems, one message per problem naming the role's variable: the thresholds' ranges, the paths'
    forms (host_paths), and what only the host can tell (the textfile directory exists, slurmd is installed)."""
    errors = thresholds.input_errors(params.get("thresholds") or {})
    paths = host_paths.errors(dict((role_name, params.get(name)) for name, role_name in ROLE_INPUTS.items()))
    errors.extend(paths)
    directory = params.get("textfile_dir")
    if (params.get("metrics") == "true" and directory and not any(p.startswith("health_textfile_dir") for p in paths)
            and not os.path.isdir(directory)):
        errors.append("health_textfile_dir: %s does not exist on this host. node_exporter's textfile collector reads "
                      "that directory (Debian's prometheus-node-exporter creates /var/lib/prometheus/node-exporter): "
                      "install node_exporter first, set health_textfile_dir to its --collector.textfile.directory, "
                      "or set health_metrics: false." % directory)
    errors.extend(_declared_errors(params))
    if params.get("slurm") and not runner.which("slurmd"):
        errors.append("health_slurm is true but slurmd is not installed on this host: Slurm runs the health check "
                      "through slurmd (HealthCheckProgram). Install Slurm's slurmd first, or set health_slurm: false "
                      "for the hosts that are no Slurm nodes.")
    return errors


def _declared_errors(params):
    """The module's own values that no check could use (the role's health_expected_*rate_gbps by their variables)."""
    errors = []
    for name, low, high in (("health_expected_rate_gbps", 0, 10000), ("health_expected_storage_rate_gbps", 0, 10000),
                            ("mtu", 68, 65520), ("storage_mtu", 68, 65520)):
        value = params.get(name.replace("health_", "", 1))
        if value is not None and not low < value <= high:
            errors.append("%s must be more than %s and at most %s Gb/s (or null: the most common rate of the ports of "
                          "the role in the fabric group); got %s." % (name, low, high, value) if name.startswith("health")
                          else "%s must be more than %s and at most %s (or left out: each netdev's own); got %s."
                          % (name, low, high, value))
    bad = dict((nd, mtu) for nd, mtu in (params.get("netdev_mtu") or {}).items()
               if not (str(mtu).isdigit() and 68 <= int(mtu) <= 65520))
    if bad:
        errors.append("netdev_mtu must map netdevs to MTUs of 68-65520 bytes; got %s." % bad)
    bad = dict((port, keys) for port, keys in (params.get("pkeys") or {}).items()
               if not isinstance(keys, list) or not all(_is_pkey(k) for k in keys))
    if bad:
        errors.append("pkeys must map port GUIDs (or device:port) to lists of P_Keys (0x0001-0xffff); got %s." % bad)
    memlock = params.get("memlock")
    if not (memlock in ("unlimited", "unchecked") or (isinstance(memlock, int) and not isinstance(memlock, bool)
                                                      and memlock > 0)
            or (isinstance(memlock, str) and memlock.isdigit() and int(memlock) > 0)):
        errors.append("memlock must be unlimited, unchecked or a number of bytes; got %r." % (memlock,))
    if any(not 0 <= p <= 7 for p in params.get("lossless_priorities") or []):
        errors.append("lossless_priorities must be priorities 0-7; got %s." % params["lossless_priorities"])
    return errors


def _is_pkey(text):
    try:
        return 0 < int(str(text), 16) <= 0xFFFF
    except ValueError:
        return False


def _slurm_conf(params, prefix):
    """The slurm.conf lines for the check (a file to Include, or to copy into slurm.conf)."""
    values = params.get("thresholds") or {}
    return ("# slurm.conf lines for the hpcnet.rdma health check: Include this file, or copy the lines.\n"
            "HealthCheckProgram=%s\nHealthCheckInterval=%s\nHealthCheckNodeState=%s\n" % (
                os.path.join(prefix, install.SLURM_PROGRAM), thresholds.interval(values, "slurm_interval"),
                str(values.get("health_slurm_node_state") or "ANY").upper()))


def textfile_dir(params):
    """Where the metrics go: ``textfile_dir`` with metrics ``true``, or with ``auto`` where the directory exists
    (node_exporter is installed); None otherwise."""
    metrics, directory = params.get("metrics"), params.get("textfile_dir")
    if not directory or metrics == "false" or (metrics == "auto" and not os.path.isdir(directory)):
        return None
    return directory


def _facts(params):
    try:
        return facts.read(params["sysfs_root"], params.get("port_roles"), params.get("fabrics") or [params["group"]],
                          params.get("management_netdevs"))
    except (SysfsError, PortRoleError) as exc:
        raise DeployError("reading the RDMA facts: %s" % exc)


def deploy(params, runner, check_mode):
    """{changed, diff, expected, files, removed, health, warnings}. ``params``: the rdma_health module's
    parameters."""
    errors = host_errors(params, runner)
    if errors:
        raise DeployError(" ".join(errors))
    if params.get("validate_only"):
        return {"changed": False, "diff": {"before": "", "after": ""}, "expected": None, "files": [], "removed": [],
                "health": None}
    rdma = _facts(params)
    nccl_path = params.get("nccl_conf_path")
    declared = dict(params)
    if declared.get("management_netdevs") is None:
        declared["management_netdevs"] = default_route_netdevs(params["sysfs_root"])
    declared["nccl_conf"] = {"path": nccl_path, "content": read_text(nccl_path)} if nccl_path else None
    declared["slurm"] = {"enabled": bool(params.get("slurm"))}
    declared["textfile_dir"] = textfile_dir(params)
    gdr = str(params.get("gdr")).lower()
    declared["gdr"] = gdr in ("true", "yes", "1") or (gdr == "auto" and os.path.isdir(
        os.path.join(params["sysfs_root"], "module", "nvidia")))
    doc = expected.build(declared, rdma)
    files = {params["expected_path"]: (expected.dumps(doc), 0o644)}
    files.update(install.program_files(params["prefix"], params["expected_path"]))
    slurm_conf = os.path.join(os.path.dirname(params["expected_path"]), install.SLURM_CONF)
    if params.get("slurm"):
        files[slurm_conf] = (_slurm_conf(params, params["prefix"]), 0o644)
    # the metrics' units are the role's (a template, as every boot-time unit of the collection); with the metrics
    # off, those an earlier run wrote go, with the timer stopped
    timer = bool(params.get("timer") and doc["textfile_dir"])
    units = [os.path.join(params["unit_dir"], name) for name in (install.SERVICE, install.TIMER)]
    # what an earlier run left that this one does not want: the metrics (off, or another directory), the units
    old = _old_doc(params["expected_path"])
    stale = [path for path in ([] if timer else units) + ([] if params.get("slurm") else [slurm_conf])
             if os.path.exists(path)]
    if old and old.get("textfile_dir") and old["textfile_dir"] != doc["textfile_dir"]:
        stale += [p for p in [os.path.join(old["textfile_dir"], exposition.TEXTFILE)] if os.path.exists(p)]
    changes, diff = install.plan(files, shown=(params["expected_path"],), removed=stale)
    if (changes or stale) and not check_mode:
        try:
            install.prepare(changes)
        except OSError as exc:
            raise DeployError("cannot write %s (%s): check health_expected_path and health_install_prefix"
                              % (exc.filename, exc.strerror))
        if any(path.endswith(install.TIMER) for path in stale):
            runner.run([runner.which("systemctl") or "systemctl", "disable", "--now", install.TIMER], changes=True)
        install.write(changes, stale)
    try:
        # memlock is the program's own (a service's, as jobs get it), not this Ansible session's: not checked here
        result = run(doc, runner, time.time(), None, read_text(nccl_path) if nccl_path else None, own_limits=False)
        health = {"ok": result["ok"], "reason": report.reason(doc, result), "findings": result["findings"]}
    except HealthError as exc:
        health = {"ok": False, "reason": "cannot check: %s" % exc, "findings": []}
    # a host that differs at install is told so, and its damage stays a finding: the expected state is the fabric's
    warnings = [] if health["ok"] else [
        "%s fails its health check at install: %s. The expected state keeps the declared and the fabric's values; "
        "fix the host (health_state.health.findings)" % (params["host"], health["reason"])]
    return {"changed": bool(changes or stale), "diff": diff, "expected": doc, "files": [c[0] for c in changes],
            "removed": stale, "health": health, "warnings": warnings}


def _old_doc(path):
    text = read_text(path)
    try:
        return expected.load(text, path) if text else None
    except expected.ExpectedStateError:
        return None
