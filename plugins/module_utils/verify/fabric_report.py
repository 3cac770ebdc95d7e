# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric report of the verify playbook as data: ``fabric-report.json``, built and validated.

* :func:`build_report` joins what the verify phases found into one dict whose top-level keys are public API
  (``docs/fabric-report.md``, ``docs/fabric-report.schema.json``): it checks every shape, names the field of each
  problem, computes ``pct`` and the verdict, and sorts.
* :func:`validate_report` checks a report against the same rules as the JSON Schema (hand-written: no jsonschema
  needed at run time), plus finite numbers (JSON has no NaN).
* ``*_FIELDS`` are those rules, field by field; :class:`ReportError` lists every problem of a report.

The HTML page of a report is rendered by ``fabric_report_html``. Pure Python, no Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import math

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key

SCHEMA_VERSION = 1
VERDICTS = ("pass", "fail")
SEVERITIES = ("error", "warning", "info")
CHECK_STATES = ("pass", "fail", "skip")
NCCL_VERDICTS = ("pass", "fail", "unknown")
PATTERNS = ("ring", "all_pairs", "pairs")
LAUNCHERS = ("mpirun", "srun")
PORT_ROLES = ("compute", "storage", "management", "unused")
PERFTEST_ROLES = ("compute", "storage")
TOP_LEVEL = ("verdict", "hosts", "findings", "perftest", "nccl", "counters", "meta", "latency", "rail_map", "pcie")
TOP_REQUIRED = ("verdict", "hosts", "findings", "perftest", "nccl", "counters")


class ReportError(ValueError):
    """A report (or a part given to build_report) that breaks the rules; ``problems`` lists each one."""

    def __init__(self, problems):
        self.problems = list(problems)
        shown = self.problems[:20]
        more = len(self.problems) - len(shown)
        super(ReportError, self).__init__("fabric report: " + "; ".join(shown) + (
            "; and %d more problem(s)" % more if more else ""))


# ---------------------------------------------------------------------------------------------------------------
# Field rules: each is (description for messages, check(value) -> bool). The JSON Schema mirrors them one to one.
# ---------------------------------------------------------------------------------------------------------------

def _is_int(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _is_num(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value)


def _rule(desc, check, nullable=False):
    if nullable:
        return (desc + " or null", lambda v: v is None or check(v))
    return (desc, check)


NAME = _rule("a non-empty string", lambda v: isinstance(v, str) and v != "")
TEXT = _rule("a string", lambda v: isinstance(v, str))
NAME_OR_NULL = _rule("a non-empty string", NAME[1], nullable=True)
TEXT_OR_NULL = _rule("a string", TEXT[1], nullable=True)
INT_GE0 = _rule("an integer >= 0", lambda v: _is_int(v) and v >= 0)
INT_GE1 = _rule("an integer >= 1", lambda v: _is_int(v) and v >= 1)
INT_OR_NULL = _rule("an integer", _is_int, nullable=True)
NUM_GE0_OR_NULL = _rule("a number >= 0", lambda v: _is_num(v) and v >= 0, nullable=True)
NUM_GT0_OR_NULL = _rule("a number > 0", lambda v: _is_num(v) and v > 0, nullable=True)
BOOL_OR_NULL = _rule("true, false", lambda v: isinstance(v, bool), nullable=True)
TEXT_LIST = _rule("a list of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))
NAME_LIST = _rule("a list of non-empty strings",
                  lambda v: isinstance(v, list) and all(isinstance(x, str) and x for x in v))


def _enum(values, nullable=False):
    return _rule("one of %s" % ", ".join(values), lambda v: isinstance(v, str) and v in values, nullable)


LINK_LAYER = ("a non-empty string, a list of non-empty strings or null",
              lambda v: v is None or NAME[1](v) or NAME_LIST[1](v))

# field -> (required, rule)
HOST_FIELDS = {"group": (True, NAME_OR_NULL), "checks": (True, None), "ports": (False, None)}
PORT_FIELDS = {
    "id": (True, NAME), "role": (True, _enum(PORT_ROLES)), "rail": (False, INT_GE0), "link_layer": (False, NAME),
    "state": (False, NAME), "rate_gbps": (False, NUM_GE0_OR_NULL), "netdev": (False, NAME),
}
FINDING_FIELDS = {
    "host": (True, NAME), "severity": (True, _enum(SEVERITIES)), "check": (True, NAME),
    "expected": (True, TEXT), "found": (True, TEXT), "cause": (True, NAME), "fix": (True, NAME),
    "device": (False, NAME), "port": (False, INT_GE1), "netdev": (False, NAME), "rail": (False, INT_GE0),
    "peer": (False, NAME), "evidence": (False, TEXT_LIST),
}
PERFTEST_FIELDS = {
    "rail": (True, INT_GE0), "client": (True, NAME), "server": (True, NAME),
    "bw_avg_gbps": (True, NUM_GE0_OR_NULL), "line_rate_gbps": (True, NUM_GT0_OR_NULL), "pct": (True, NUM_GE0_OR_NULL),
    "test": (False, NAME), "device": (False, NAME), "server_device": (False, NAME), "round": (False, INT_GE0),
    "bw_peak_gbps": (False, NUM_GE0_OR_NULL), "msg_rate_mpps": (False, NUM_GE0_OR_NULL), "error": (False, NAME),
    "role": (False, _enum(PERFTEST_ROLES)),
}
LATENCY_FIELDS = {
    "rail": (True, INT_GE0), "client": (True, NAME), "server": (True, NAME), "t_typical_us": (True, NUM_GE0_OR_NULL),
    "test": (False, NAME), "device": (False, NAME), "server_device": (False, NAME), "round": (False, INT_GE0),
    "bytes": (False, INT_GE1), "t_min_us": (False, NUM_GE0_OR_NULL), "t_max_us": (False, NUM_GE0_OR_NULL),
    "t_avg_us": (False, NUM_GE0_OR_NULL), "t_stdev_us": (False, NUM_GE0_OR_NULL), "p99_us": (False, NUM_GE0_OR_NULL),
    "p99_9_us": (False, NUM_GE0_OR_NULL), "error": (False, NAME), "role": (False, _enum(PERFTEST_ROLES)),
}
RAIL_MAP_FIELDS = {"device": (True, NAME), "port": (True, INT_GE1), "switch": (True, NAME_OR_NULL),
                   "switch_port": (True, NAME_OR_NULL)}
RAIL_MAP_BASES = ("declared", "inferred", "none")
DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")
PCIE_RAIL_FIELDS = {"device": (True, NAME), "gpu": (True, NAME_OR_NULL), "distance": (True, _enum(DISTANCES, True)),
                    "path": (True, None), "gpu_path": (False, None)}
PCIE_HOP_FIELDS = {
    "pci": (True, NAME), "type": (False, NAME_OR_NULL), "speed": (False, NUM_GE0_OR_NULL),
    "width": (False, _rule("an integer >= 0", lambda v: _is_int(v) and v >= 0, nullable=True)),
    "max_speed": (False, NUM_GE0_OR_NULL), "max_width": (False, INT_OR_NULL), "acs_redirect": (False, BOOL_OR_NULL),
    "flags": (False, NAME_LIST),
}
NCCL_FIELDS = {
    "net_transport": (True, NAME_OR_NULL), "link_layer": (True, LINK_LAYER), "gdr": (True, BOOL_OR_NULL),
    "fallback_to_socket": (True, BOOL_OR_NULL), "busbw_gbps": (True, NUM_GE0_OR_NULL),
    "verdict": (False, _enum(NCCL_VERDICTS)), "hcas": (False, NAME_LIST), "evidence": (False, TEXT_LIST),
    "test": (False, NAME), "fabric": (False, NAME_OR_NULL), "summary": (False, TEXT_OR_NULL),
}
META_FIELDS = {
    "schema_version": (False, _rule("the integer %d" % SCHEMA_VERSION, lambda v: _is_int(v) and v == SCHEMA_VERSION)),
    "generated_at": (False, NAME), "collection_version": (False, NAME), "pattern": (False, _enum(PATTERNS)),
    "launcher": (False, _enum(LAUNCHERS)), "rounds": (False, INT_GE0), "failed_hosts": (False, NAME_LIST),
    "thresholds": (False, None), "rail_map_basis": (False, _enum(RAIL_MAP_BASES)), "rail_map_note": (False, TEXT),
}
THRESHOLD_FIELDS = {
    "min_bw_pct": (False, _rule("a number from 0 to 100", lambda v: _is_num(v) and 0 <= v <= 100)),
    "min_busbw_gbps": (False, NUM_GE0_OR_NULL),
}
COUNTER_DELTA = INT_OR_NULL
# Keys that build_report drops when their value is null (absent and null mean the same: not known).
_OPTIONAL_DROPPED_WHEN_NULL = {
    "findings": [k for k, (req, _r) in FINDING_FIELDS.items() if not req],
    "perftest": ["test", "device", "server_device", "round", "error", "role"],
    "latency": ["test", "device", "server_device", "round", "bytes", "error", "role"],
    "nccl": ["verdict", "hcas", "evidence", "test"],
}


# ---------------------------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------------------------

def _show(value):
    try:
        text = json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(name):
    return "[%s]" % json.dumps(name)


_HINTS = {
    ("meta", "min_bw_pct"): " (thresholds go in meta.thresholds)",
    ("meta", "min_busbw_gbps"): " (thresholds go in meta.thresholds)",
    ("meta", "latency"): " (latency is a top-level key: build_report's latency argument)",
}


def _check_object(path, value, fields, problems):
    """Check an object against ``fields``; return True when it is an object (its sub-objects are checked apart)."""
    if not isinstance(value, dict):
        problems.append("%s must be an object; got %s" % (path, _show(value)))
        return False
    for name in value:
        if name not in fields:
            problems.append("%s.%s is not a known key; allowed: %s%s" % (
                path, name, ", ".join(sorted(fields)), _HINTS.get((path, name), "")))
    for name, (required, rule) in fields.items():
        if name not in value:
            if required:
                problems.append("%s.%s is missing (it is required)" % (path, name))
            continue
        if rule is not None and not rule[1](value[name]):
            problems.append("%s.%s must be %s; got %s" % (path, name, rule[0], _show(value[name])))
    return True


def _check_named_map(path, value, what, problems):
    """An object keyed by non-empty names (host, port, counter, check). Return its items, or [] when not an object."""
    if not isinstance(value, dict):
        problems.append("%s must be an object of %s; got %s" % (path, what, _show(value)))
        return []
    if "" in value:
        problems.append("%s has an empty %s name" % (path, what.split(" ")[0]))
    return [(k, v) for k, v in value.items() if k != ""]


def _check_list(path, value, fields, problems):
    if not isinstance(value, list):
        problems.append("%s must be a list; got %s" % (path, _show(value)))
        return
    for index, item in enumerate(value):
        _check_object("%s[%d]" % (path, index), item, fields, problems)


def validate_report(report):
    """Return the list of problems of a fabric report (empty when it is valid), each naming its field."""
    problems = []
    if not isinstance(report, dict):
        return ["the report must be an object; got %s" % _show(report)]
    for name in report:
        if name not in TOP_LEVEL:
            problems.append("%s is not a known top-level key; allowed: %s" % (name, ", ".join(TOP_LEVEL)))
    for name in TOP_REQUIRED:
        if name not in report:
            problems.append("%s is missing (it is required)" % name)
    if "verdict" in report and report["verdict"] not in VERDICTS:
        problems.append("verdict must be one of pass, fail; got %s" % _show(report["verdict"]))
    for host, entry in _check_named_map("hosts", report.get("hosts", {}), "hosts", problems):
        path = "hosts%s" % _key(host)
        if _check_object(path, entry, HOST_FIELDS, problems) and "checks" in entry:
            for check, state in _check_named_map(path + ".checks", entry["checks"], "check states", problems):
                if state not in CHECK_STATES:
                    problems.append("%s.checks%s must be one of %s; got %s"
                                    % (path, _key(check), ", ".join(CHECK_STATES), _show(state)))
        if isinstance(entry, dict) and "ports" in entry:
            _check_list(path + ".ports", entry["ports"], PORT_FIELDS, problems)
    _check_list("findings", report.get("findings", []), FINDING_FIELDS, problems)
    _check_list("perftest", report.get("perftest", []), PERFTEST_FIELDS, problems)
    if "latency" in report:
        _check_list("latency", report["latency"], LATENCY_FIELDS, problems)
    for host, rails in _check_named_map("rail_map", report.get("rail_map", {}), "hosts", problems):
        for rail, entry in _check_named_map("rail_map%s" % _key(host), rails, "rails", problems):
            if not rail.isdigit():
                where = "rail_map%s%s" % (_key(host), _key(rail))
                problems.append("%s: a rail is a number (0, 1, ...); got %s" % (where, _show(rail)))
            _check_object("rail_map%s%s" % (_key(host), _key(rail)), entry, RAIL_MAP_FIELDS, problems)
    for host, rails in _check_named_map("pcie", report.get("pcie", {}), "hosts", problems):
        for rail, entry in _check_named_map("pcie%s" % _key(host), rails, "rails", problems):
            where = "pcie%s%s" % (_key(host), _key(rail))
            if not rail.isdigit():
                problems.append("%s: a rail is a number (0, 1, ...); got %s" % (where, _show(rail)))
            if _check_object(where, entry, PCIE_RAIL_FIELDS, problems):
                for key in ("path", "gpu_path"):
                    if key in entry:
                        _check_list("%s.%s" % (where, key), entry[key], PCIE_HOP_FIELDS, problems)
    for host, entry in _check_named_map("nccl", report.get("nccl", {}), "hosts", problems):
        _check_object("nccl%s" % _key(host), entry, NCCL_FIELDS, problems)
    for host, ports in _check_named_map("counters", report.get("counters", {}), "hosts", problems):
        path = "counters%s" % _key(host)
        for port, deltas in _check_named_map(path, ports, "ports", problems):
            ppath = path + _key(port)
            for counter, delta in _check_named_map(ppath, deltas, "counters", problems):
                if not COUNTER_DELTA[1](delta):
                    problems.append("%s%s must be %s; got %s" % (ppath, _key(counter), COUNTER_DELTA[0], _show(delta)))
    if "meta" in report and _check_object("meta", report["meta"], META_FIELDS, problems) \
            and "thresholds" in report["meta"]:
        _check_object("meta.thresholds", report["meta"]["thresholds"], THRESHOLD_FIELDS, problems)
    if report.get("verdict") in VERDICTS and isinstance(report.get("findings"), list):
        errors = [i for i, f in enumerate(report["findings"]) if isinstance(f, dict) and f.get("severity") == "error"]
        if errors and report["verdict"] != "fail":
            problems.append("verdict must be fail: findings[%d] has severity error" % errors[0])
        if not errors and report["verdict"] != "pass":
            problems.append("verdict must be pass: no finding has severity error")
    return problems


# ---------------------------------------------------------------------------------------------------------------
# Builder
# ---------------------------------------------------------------------------------------------------------------

def _text(value):
    """expected/found given as a scalar or a list of scalars -> its text (the report holds text)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "%g" % value if isinstance(value, float) else str(value)
    if isinstance(value, list) and all(v is None or isinstance(v, (str, int, float)) for v in value):
        return ", ".join(_text(v) for v in value)
    return value


def _drop_nulls(item, keys):
    return dict((k, v) for k, v in item.items() if not (k in keys and v is None))


def _lines(value):
    return [line for line in value if line is not None] if isinstance(value, list) else value


def _pct(row):
    if row.get("pct") is not None:
        return row["pct"]
    bw, line = row.get("bw_avg_gbps"), row.get("line_rate_gbps")
    if _is_num(bw) and bw >= 0 and _is_num(line) and line > 0:
        return round(100.0 * bw / line, 1)
    return None


def _nccl_verdict(host, entry, findings):
    for finding in findings:
        if isinstance(finding, dict) and finding.get("host") == host and finding.get("severity") == "error" \
                and str(finding.get("check", "")).startswith("nccl"):
            return "fail"
    if entry.get("fallback_to_socket") is True:
        return "fail"
    if entry.get("net_transport") is None:
        return "unknown"
    return "pass"


def _argument(name, value, kind, problems):
    if value is None:
        return kind()
    if not isinstance(value, kind):
        problems.append("%s must be %s; got %s" % (name, "a list" if kind is list else "an object", _show(value)))
        return kind()
    return value


def _pair_key(row):
    return (PERFTEST_ROLES.index(row.get("role", "compute")), row.get("test", ""), row["rail"],
            natural_key(row["client"]), natural_key(row["server"]), row.get("round", -1))


def _sorted_map(mapping):
    return dict((k, mapping[k]) for k in sorted(mapping, key=natural_key))


def build_report(hosts, findings, perftest, nccl, counters, meta=None, latency=None, rail_map=None, pcie=None):
    """Join the verify phases' results into the fabric report.

    :arg hosts: host -> ``{group, checks: {check: pass|fail|skip}}`` (+ ports: ``[{id, role, rail, link_layer,
        state, rate_gbps, netdev}]``, each port's role and rail).
    :arg findings: ``[{host, severity, check, expected, found, cause, fix}]`` (+ device, port, netdev, rail, peer,
        evidence); ``expected``/``found`` given as numbers, booleans or lists of them become text, null "".
    :arg perftest: ``[{rail, client, server, bw_avg_gbps, line_rate_gbps, pct}]`` (+ test, device, server_device,
        round, bw_peak_gbps, msg_rate_mpps, error, role: compute or storage; ``rail`` is the storage port's index
        on a storage row); a missing or null ``pct`` is computed as
        ``round(100 * bw_avg_gbps / line_rate_gbps, 1)`` when both are known.
    :arg nccl: host -> ``{net_transport, link_layer, gdr, fallback_to_socket, busbw_gbps}`` (+ verdict, hcas, evidence,
        test, fabric, summary); a missing ``verdict`` is computed.
    :arg counters: host -> port -> counter -> delta.
    :arg meta: ``{generated_at, collection_version, pattern, launcher, rounds, failed_hosts, thresholds}``, all
        optional; ``schema_version`` is set.
    :arg latency: ``[{rail, client, server, t_typical_us}]`` (+ the other latency columns); omitted when None.
    :arg rail_map: ``{host: {rail: {device, port, switch, switch_port}}}`` (rails as strings; switch and switch_port
        null for a port with no peer); omitted when None.
    :arg pcie: ``{host: {rail: {device, gpu, distance, path, gpu_path}}}`` (rails as strings; each path a list of
        hops ``{pci, type, speed, width, max_speed, max_width, acs_redirect, flags}``); omitted when None.
    :returns: the report dict: findings sorted by severity (error, warning, info) then host, the rest by name.
    :raises ReportError: listing every problem, each naming its field (``findings[2].severity must be ...``).
    """
    problems = []
    hosts = _argument("hosts", hosts, dict, problems)
    findings = _argument("findings", findings, list, problems)
    perftest = _argument("perftest", perftest, list, problems)
    nccl = _argument("nccl", nccl, dict, problems)
    counters = _argument("counters", counters, dict, problems)
    meta = _argument("meta", meta, dict, problems)
    if latency is not None:
        latency = _argument("latency", latency, list, problems)
    if rail_map is not None:
        rail_map = _argument("rail_map", rail_map, dict, problems)
    if pcie is not None:
        pcie = _argument("pcie", pcie, dict, problems)
    if problems:
        raise ReportError(problems)

    def items(rows, kind):
        out = []
        for row in rows:
            out.append(_drop_nulls(row, _OPTIONAL_DROPPED_WHEN_NULL[kind]) if isinstance(row, dict) else row)
        return out

    report = {"verdict": None}
    report["hosts"] = dict((h, dict(e, checks=dict(e["checks"])) if isinstance(e, dict) and isinstance(
        e.get("checks"), dict) else e) for h, e in hosts.items())
    for entry in report["hosts"].values():
        if isinstance(entry, dict) and isinstance(entry.get("ports"), list):
            entry["ports"] = [dict(p) if isinstance(p, dict) else p for p in entry["ports"]]
    report["findings"] = []
    for finding in items(findings, "findings"):
        if isinstance(finding, dict):
            finding = dict(finding)
            for name in ("expected", "found"):
                if name in finding:
                    finding[name] = _text(finding[name])
            if "evidence" in finding:
                finding["evidence"] = _lines(finding["evidence"])
        report["findings"].append(finding)
    report["perftest"] = [dict(r, pct=_pct(r)) if isinstance(r, dict) else r for r in items(perftest, "perftest")]
    if latency is not None:
        report["latency"] = items(latency, "latency")
    for key, by_host in (("rail_map", rail_map), ("pcie", pcie)):
        if by_host is not None:
            report[key] = {}
            for host, rails in by_host.items():
                report[key][host] = dict((r, dict(e) if isinstance(e, dict) else e) for r, e in rails.items()) \
                    if isinstance(rails, dict) else rails
    report["nccl"] = {}
    for host, entry in nccl.items():
        if isinstance(entry, dict):
            entry = _drop_nulls(entry, _OPTIONAL_DROPPED_WHEN_NULL["nccl"])
            if "evidence" in entry:
                entry["evidence"] = _lines(entry["evidence"])
            if "verdict" not in entry:
                entry["verdict"] = _nccl_verdict(host, entry, findings)
        report["nccl"][host] = entry
    report["counters"] = {}
    for host, ports in counters.items():
        if isinstance(ports, dict):
            ports = dict((p, dict(d) if isinstance(d, dict) else d) for p, d in ports.items())
        report["counters"][host] = ports
    report["meta"] = dict(_drop_nulls(meta, META_FIELDS), schema_version=SCHEMA_VERSION)
    if isinstance(report["meta"].get("thresholds"), dict):
        report["meta"]["thresholds"] = _drop_nulls(report["meta"]["thresholds"], THRESHOLD_FIELDS)
    errors = any(isinstance(f, dict) and f.get("severity") == "error" for f in report["findings"])
    report["verdict"] = "fail" if errors else "pass"

    problems = validate_report(report)
    if problems:
        raise ReportError(problems)

    rank = dict((s, i) for i, s in enumerate(SEVERITIES))
    report["findings"].sort(key=lambda f: (rank[f["severity"]], natural_key(f["host"])))
    report["perftest"].sort(key=_pair_key)
    if "latency" in report:
        report["latency"].sort(key=_pair_key)
    report["hosts"] = _sorted_map(report["hosts"])
    for entry in report["hosts"].values():
        entry["checks"] = dict(sorted(entry["checks"].items()))
    report["nccl"] = _sorted_map(report["nccl"])
    for key in ("rail_map", "pcie"):
        if key in report:
            report[key] = _sorted_map(dict((h, dict(sorted(rails.items(), key=lambda item: int(item[0]))))
                                           for h, rails in report[key].items()))
    report["counters"] = _sorted_map(dict(
        (h, _sorted_map(dict((p, dict(sorted(d.items()))) for p, d in ports.items())))
        for h, ports in report["counters"].items()))
    return report
