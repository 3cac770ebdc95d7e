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

SNAPSHOT = "counters.json"
# slurmd's runs keep their own snapshot: a counter event (a flap, an error burst) counts once per snapshot, and the
# metrics timer, which runs more often, would otherwise take it before slurmd's check could drain the node for it
SLURM_SNAPSHOT = "counters-slurm.json"
# when the last full check ran (the QoS tool, sminfo): a --sysfs-only run runs the full one every FULL_EVERY seconds
FULL_MARK = "full-check.json"
FULL_EVERY = 300
LOCK_WAIT = 30
TOOL_TIMEOUT = 20


def _say(text, stream=None):
    (stream or sys.stdout).write(text + "\n")


def parse_args(argv, expected=PATH):
    parser = argparse.ArgumentParser(prog="hpcnet-rdma-health",
                                     description="Check this host's RDMA fabric against its expected state "
                                                 "(written by the hpcnet.rdma.health role).")
    parser.add_argument("--expected", default=expected, help="the expected-state file (default %(default)s)")
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
                             "PFC and DSCP map and sminfo wait for a full check, which such a run makes every %d s "
                             "(PFC is still checked by its counters)" % FULL_EVERY)
    return parser.parse_args(argv)


def read_text(path):
    """The text of ``path``, or None when it cannot be read (the program's and the health role's files)."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def _json(path):
    text = read_text(path)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


class _Runner(SubprocessRunner):
    """The tools with a short timeout: slurmd kills its health check at 60 s, and one hung tool must not stall it."""

    def run(self, argv, changes=False, timeout=TOOL_TIMEOUT):
        return super(_Runner, self).run(argv, changes, timeout)


def _lock(state_dir):
    """The state directory's lock (one check at a time: the timer and slurmd), or ExpectedStateError after
    LOCK_WAIT seconds."""
    handle = open(os.path.join(state_dir, "lock"), "w")
    deadline = time.time() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except (IOError, OSError):
            if time.time() > deadline:
                handle.close()
                raise HealthError("another check has held %s for %d s" % (os.path.join(state_dir, "lock"), LOCK_WAIT))
            time.sleep(0.2)


def check(args, runner, now):
    """(doc, result) of one check, the counter snapshot kept under the expected state's state_dir. A --sysfs-only run
    runs the full check (the QoS tool, sminfo) when the last full one is FULL_EVERY seconds old."""
    text = read_text(args.expected)
    if text is None:
        raise ExpectedStateError("%s cannot be read: run the hpcnet.rdma.health role on this host" % args.expected)
    doc = load(text, args.expected)
    state_dir = doc["state_dir"]
    os.makedirs(state_dir, mode=0o755, exist_ok=True)
    lock = _lock(state_dir)
    try:
        snapshot = os.path.join(state_dir, SLURM_SNAPSHOT if args.slurm else SNAPSHOT)
        full_mark = os.path.join(state_dir, FULL_MARK)
        mark = _json(full_mark)
        last_full = mark.get("time") if isinstance(mark, dict) else None
        tools = not args.sysfs_only or not isinstance(last_full, (int, float)) or not 0 <= now - last_full < FULL_EVERY
        conf = doc.get("nccl_conf") or {}
        result = run(doc, runner, now, _json(snapshot), read_text(conf["path"]) if conf.get("path") else None,
                     tools=tools)
        exposition.write(snapshot, json.dumps(result["snapshot"], sort_keys=True) + "\n")
        if tools:
            exposition.write(full_mark, json.dumps({"time": now}) + "\n")
    finally:
        lock.close()
    return doc, result


def _cannot(args, doc, exc, now):
    """Exit 2: say why (as JSON with --json), and in the metrics that this host could not be checked."""
    reason = "cannot check: %s" % exc
    _say(json.dumps({"ok": False, "reason": reason, "findings": [], "checks": [], "notes": []}) if args.json
         else reason)
    if args.textfile and isinstance(doc, dict) and doc.get("textfile_dir"):
        try:
            exposition.write(os.path.join(doc["textfile_dir"], exposition.TEXTFILE), exposition.render_failure(now))
        except (IOError, OSError):
            pass
    return 2


def main(argv=None, expected=PATH):
    """The program; ``expected``: the expected-state file when --expected is not given (the launcher's)."""
    args = parse_args(sys.argv[1:] if argv is None else argv, expected)
    runner = _Runner()
    now = time.time()
    doc = None
    try:
        doc = load(read_text(args.expected) or "", args.expected)
    except ExpectedStateError:
        pass  # check() says why
    try:
        doc, result = check(args, runner, now)
        if args.textfile and doc.get("textfile_dir"):
            exposition.write(os.path.join(doc["textfile_dir"], exposition.TEXTFILE), exposition.render(doc, result, now))
    except (ExpectedStateError, HealthError, OSError) as exc:
        return _cannot(args, doc, exc, now)
    except Exception as exc:  # pylint: disable=broad-except  # a hand-edited file of the right keys, wrong types
        return _cannot(args, doc, "%s does not hold what this program expects (%s: %s): re-run the hpcnet.rdma.health "
                                  "role" % (args.expected, type(exc).__name__, exc), now)
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
    return 0 if result["ok"] else 1
