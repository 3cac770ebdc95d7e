# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm: drain the node whose fabric broke, resume it when this check drained it and it passes again.

Pure Python (no Ansible imports). The check runs as Slurm's ``HealthCheckProgram`` (slurmd runs it as root every
``HealthCheckInterval``) or from the systemd timer. ``node_state`` parses ``scontrol show node -o NAME``;
``action(node, ok, reason, prefix)`` decides what to do: a failing node is drained with ``<prefix> <reason>``
unless an admin drained it already (their reason stays); a passing node is resumed only when its reason starts with
``prefix`` (this check drained it), never a node an admin drained. ``argv`` gives the ``scontrol`` call.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

PREFIX = "hpcnet-rdma:"
_REASON = re.compile(r"\bReason=(.*?)(?: \[[^\]@]*@[^\]]*\])?(?=\s+\w+=|\s*$)")
_STATE = re.compile(r"\bState=(\S+)")


class SlurmError(Exception):
    """scontrol failed or printed what this code does not understand."""


def node_state(text):
    """``scontrol -o show node NAME`` -> {state: [flags], drain: bool, reason: str or None}."""
    line = (text or "").strip()
    state = _STATE.search(line)
    if not state:
        raise SlurmError("no State= in scontrol's output: %r" % line[:200])
    flags = state.group(1).upper().split("+")
    reason = _REASON.search(line)
    text = reason.group(1).strip() if reason else None
    return {"state": flags, "drain": any(f in ("DRAIN", "DRAINING", "DRAINED") for f in flags) or "DRAIN" in flags,
            "reason": text if text and text != "(null)" else None}


def action(node, ok, reason, prefix=PREFIX):
    """``("drain", reason)``, ``("resume", None)`` or ``(None, why)`` for a node in ``node`` (node_state) state."""
    ours = bool(node["reason"]) and node["reason"].startswith(prefix + " ")
    if node["reason"] and not ours:
        # an admin's (or another tool's) drain, down or fail, with its reason: never this check's to change
        return None, "%s by someone else (%s): left as it is" % ("+".join(node["state"]), node["reason"])
    if not ok:
        # "=" in a reason reads as the next field of `scontrol show node -o`: say it with ":" instead
        wanted = "%s %s" % (prefix, reason.replace("=", ":"))
        if node["drain"] and node["reason"] == wanted:
            return None, "drained already with this reason"
        return "drain", wanted
    if node["drain"] and ours:
        return "resume", None
    return None, "healthy"


def argv(scontrol, name, what, reason=None):
    if what == "drain":
        return [scontrol, "update", "NodeName=%s" % name, "State=DRAIN", "Reason=%s" % reason]
    return [scontrol, "update", "NodeName=%s" % name, "State=RESUME"]


def apply(runner, name, ok, reason, prefix=PREFIX):
    """Read the node, drain or resume it. Returns (what was done or None, message)."""
    scontrol = runner.which("scontrol")
    if not scontrol:
        raise SlurmError("scontrol is not installed: Slurm integration needs Slurm's client commands on the node")
    rc, out, err = runner.run([scontrol, "-o", "show", "node", name])
    if rc != 0:
        raise SlurmError("scontrol show node %s failed (exit %d): %s" % (name, rc, (err or out).strip()))
    what, detail = action(node_state(out), ok, reason, prefix)
    if what is None:
        return None, detail
    rc, out, err = runner.run(argv(scontrol, name, what, detail), changes=True)
    if rc != 0:
        raise SlurmError("scontrol update NodeName=%s State=%s failed (exit %d): %s" % (
            name, what.upper(), rc, (err or out).strip()))
    return what, detail or "resumed"
