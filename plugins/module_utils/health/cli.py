# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``hpcnet-rdma-health``: the host's RDMA fabric against its expected state, without Ansible.

Pure Python (no Ansible imports): the health role installs this package's files (and the collection's module_utils
they import) under ``/usr/local/lib/hpcnet-rdma`` and a launcher in ``/usr/local/sbin`` that calls ``main``.

Exit status: 0 healthy (warnings allowed), 1 an error finding (the first line is the reason), 2 the check could
not run (no expected state, sysfs unreadable, Slurm unreachable).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import fcntl
import json
import os
import socket
import sys
import time

from ansible_collections.hpcnet.rdma.plugins.module_utils.health import exposition, report, slurm
from ansible_collections.hpcnet.rdma.plugins.module_utils.health.expected import PATH, ExpectedStateError, load
from ansible_collections.hpcnet.rdma.plugins.module_utils.health.health_check import HealthError, run
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import SubprocessRunner

TEXTFILE = "hpcnet_rdma.prom"
SNAPSHOT = "counters.json"


def _say(text, stream=None):
    (stream or sys.stdout).write(text + "\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="hpcnet-rdma-health",
                                     description="Check this host's RDMA fabric against its expected state "
                                                 "(written by the hpcnet.rdma.health role).")
    parser.add_argument("--expected", default=PATH, help="the expected-state file (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--textfile", action="store_true",
                        help="write the metrics to the expected state's textfile directory (node_exporter)")
    parser.add_argument("--slurm", action="store_true",
                        help="drain this Slurm node on an error, resume it when this check drained it and it passes")
    parser.add_argument("--node", default=os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0],
                        help="the Slurm node name (default: $SLURMD_NODENAME, else the short host name)")
    parser.add_argument("--quiet", action="store_true", help="print only the first line")
    parser.add_argument("--sysfs-only", action="store_true",
                        help="read sysfs and `ethtool -S` only (one process per RoCE netdev): the QoS tool's trust, "
                             "PFC and DSCP map wait for a full check (PFC is still checked by its counters)")
    return parser.parse_args(argv)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _previous(path):
    text = _read(path)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def check(args, runner, now):
    """(doc, result) of one check, the counter snapshot kept under the expected state's state_dir."""
    text = _read(args.expected)
    if text is None:
        raise ExpectedStateError("%s cannot be read: run the hpcnet.rdma.health role on this host" % args.expected)
    doc = load(text, args.expected)
    state_dir = doc["state_dir"]
    os.makedirs(state_dir, mode=0o755, exist_ok=True)
    with open(os.path.join(state_dir, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        snapshot = os.path.join(state_dir, SNAPSHOT)
        conf = doc.get("nccl_conf") or {}
        result = run(doc, runner, now, _previous(snapshot), _read(conf["path"]) if conf.get("path") else None,
                     tools=not args.sysfs_only)
        exposition.write(snapshot, json.dumps(result["snapshot"], sort_keys=True) + "\n")
    return doc, result


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    runner = SubprocessRunner()
    now = time.time()
    try:
        doc, result = check(args, runner, now)
    except (ExpectedStateError, HealthError, OSError) as exc:
        _say("cannot check: %s" % exc)
        return 2
    status = 0 if result["ok"] else 1
    if args.textfile and doc.get("textfile_dir"):
        exposition.write(os.path.join(doc["textfile_dir"], TEXTFILE), exposition.render(doc, result, now))
    out = report.as_json(doc, result) if args.json else "\n".join(
        report.lines(doc, result)[:1 if args.quiet else None])
    _say(out)
    if args.slurm:
        try:
            what, detail = slurm.apply(runner, args.node, result["ok"], report.reason(doc, result))
        except slurm.SlurmError as exc:
            _say("slurm: %s" % exc, sys.stderr)
            return 2
        if what:
            _say("slurm: %s %s: %s" % (what, args.node, detail), sys.stderr)
    return status
