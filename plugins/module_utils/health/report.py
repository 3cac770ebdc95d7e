# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a health check says: the one-line reason (a Slurm drain reason), one line per finding, and the JSON.

Pure Python (no Ansible imports). ``reason`` names the first error's port and what is wrong with it
(``mlx5_1:1 DOWN (expected ACTIVE 400 Gb/s)``), then how many more errors there are; ``lines`` is the text output;
``as_json`` the findings in the fabric report's finding format.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

REASON_MAX = 110  # with Slurm's "hpcnet-rdma: " prefix, under 125


def _port_text(finding):
    if finding["device"] is None:
        return finding["check"]
    return "%s:%s" % (finding["device"], finding["port"]) if finding["port"] is not None else finding["device"]


def _expected_port(doc, finding, ports):
    for port in list(ports or []) + list(doc.get("ports") or []):
        if port["device"] == finding["device"] and port["port"] == finding["port"]:
            return port
    return None


def short(doc, finding, ports=None):
    """One finding in a few words: where, what was found, what was expected."""
    found, expected = str(finding["found"]), str(finding["expected"])
    if finding["check"] == "port_state" and found != "absent":
        port = _expected_port(doc, finding, ports) or {}
        found = found.split("/", 1)[0]
        spec = doc.get("spec") or {}
        rate = spec.get("expected_storage_rate_gbps") if port.get("role") == "storage" else spec.get("expected_rate_gbps")
        expected = "ACTIVE" + (" %g Gb/s" % rate if rate else "")
    return "%s %s (expected %s)" % (_port_text(finding), found, expected)


def reason(doc, result):
    """The first line: ``healthy`` or the first error in a few words, and how many more errors."""
    errors = [f for f in result["findings"] if f["severity"] == "error"]
    if not errors:
        warnings = len(result["findings"])
        return "healthy: %d ports checked%s" % (len(doc.get("ports") or []),
                                                ", %d warning(s)" % warnings if warnings else "")
    text = short(doc, errors[0], result.get("ports"))
    more = " (+%d more)" % (len(errors) - 1) if len(errors) > 1 else ""
    if len(text) + len(more) > REASON_MAX:
        text = text[:REASON_MAX - len(more) - 3] + "..."
    return text + more


def lines(doc, result):
    """The text output: the reason, then one line per finding (severity, check, what, cause, fix)."""
    out = [reason(doc, result)]
    for f in result["findings"]:
        where = short(doc, f, result.get("ports"))
        out.append("%s %s %s: %s; fix: %s" % (f["severity"], f["check"], where, f["cause"], f["fix"]))
    return out


def as_json(doc, result):
    return json.dumps({"host": doc["host"], "ok": result["ok"], "reason": reason(doc, result),
                       "findings": result["findings"], "checks": result["checks"], "notes": result["notes"]},
                      indent=1, sort_keys=True)
