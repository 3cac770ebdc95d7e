"""fabric_report: the report builder, its validation (against docs/fabric-report.schema.json too);
fabric_report_html: the HTML."""

from __future__ import annotations

import copy
import json
import random
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.filter import verify as verify_filters
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import fabric_report as fr, fabric_report_html as fh

SCHEMA_PATH = Path(__file__).resolve().parents[5] / "docs" / "fabric-report.schema.json"


def _finding(host, severity="error", check="port_state", **extra):
    return dict({"host": host, "severity": severity, "check": check, "expected": "ACTIVE", "found": "DOWN",
                 "cause": "the cable is out", "fix": "seat the cable"}, **extra)


def _row(client, server, bw, rail=0, line=400, **extra):
    return dict({"rail": rail, "client": client, "server": server, "bw_avg_gbps": bw, "line_rate_gbps": line},
                **extra)


def _nccl(**extra):
    return dict({"net_transport": "IB", "link_layer": "IB", "gdr": True, "fallback_to_socket": False,
                 "busbw_gbps": 180.4}, **extra)


HOSTS = {"node10": {"group": "ib", "checks": {"port_state": "pass", "mtu": "pass"}},
         "node2": {"group": "ib", "checks": {"port_state": "fail", "mtu": "pass"}},
         "node1": {"group": "ib", "checks": {"port_state": "pass", "mtu": "skip"}}}


def _report(findings=(), perftest=(), nccl=None, counters=None, meta=None, latency=None, hosts=None):
    return fr.build_report(copy.deepcopy(hosts or HOSTS), list(findings), list(perftest), nccl or {}, counters or {},
                           meta=meta, latency=latency)


def sample_report():
    return _report(
        findings=[_finding("node2", device="mlx5_0", port=1), _finding("node1", "warning", "firmware")],
        perftest=[_row("node1", "node2", 372.44), _row("node2", "node10", None, error="server not listening"),
                  _row("node10", "node1", 361.0, rail=1, test="ib_write_bw", device="mlx5_1", round=1)],
        nccl={"node1": _nccl(evidence=["node1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>"],
                             hcas=["mlx5_0:1"])},
        counters={"node1": {"mlx5_0/1": {"symbol_error": 0, "port_rcv_errors": 7}}},
        meta={"pattern": "ring", "generated_at": "2026-11-02T10:00:00Z", "thresholds": {"min_bw_pct": 90}},
        latency=[{"rail": 0, "client": "node1", "server": "node2", "t_typical_us": 1.71, "p99_us": 2.0}])


# --- verdict, sorting, pct -------------------------------------------------------------------------------------

def test_verdict_is_pass_without_error_findings_and_fail_with_one():
    assert _report()["verdict"] == "pass"
    assert _report([_finding("node1", "warning"), _finding("node2", "info")])["verdict"] == "pass"
    assert _report([_finding("node1", "warning"), _finding("node2", "error")])["verdict"] == "fail"


def test_findings_sort_by_severity_then_host_in_natural_order_keeping_input_order_within_a_host():
    findings = [_finding("node2", "info", "a"), _finding("node10", "error", "b"), _finding("node2", "error", "c"),
                _finding("node1", "warning", "d"), _finding("node2", "error", "e"), _finding("node1", "error", "f")]
    report = _report(findings)
    assert [(f["severity"], f["host"], f["check"]) for f in report["findings"]] == [
        ("error", "node1", "f"), ("error", "node2", "c"), ("error", "node2", "e"), ("error", "node10", "b"),
        ("warning", "node1", "d"), ("info", "node2", "a")]


def test_pct_is_computed_when_missing_and_kept_when_given():
    report = _report(perftest=[_row("node1", "node2", 372.44), _row("node2", "node1", 100.0, pct=25.0),
                               _row("node2", "node10", None), _row("node10", "node1", 50.0, line=None),
                               _row("node1", "node10", 199.96, pct=None)])
    pcts = dict(((r["client"], r["server"]), r["pct"]) for r in report["perftest"])
    assert pcts == {("node1", "node2"): 93.1, ("node2", "node1"): 25.0, ("node2", "node10"): None,
                    ("node10", "node1"): None, ("node1", "node10"): 50.0}


def test_rows_hosts_ports_and_counters_are_sorted_by_name_in_natural_order():
    report = _report(perftest=[_row("node10", "node1", 300.0, rail=1), _row("node2", "node1", 300.0),
                               _row("node10", "node2", 300.0)],
                     counters={"node10": {"mlx5_10:1": {"b": 1, "a": 0}, "mlx5_2:1": {}}, "node2": {}})
    assert list(report["hosts"]) == ["node1", "node2", "node10"]
    assert list(report["hosts"]["node2"]["checks"]) == ["mtu", "port_state"]
    assert [(r["rail"], r["client"]) for r in report["perftest"]] == [(0, "node2"), (0, "node10"), (1, "node10")]
    assert list(report["counters"]) == ["node2", "node10"]
    assert list(report["counters"]["node10"]) == ["mlx5_2:1", "mlx5_10:1"]
    assert list(report["counters"]["node10"]["mlx5_10:1"]) == ["a", "b"]


def test_scalars_become_text_and_null_optional_keys_are_left_out():
    report = _report([_finding("node1", expected=4096, found=2048.5, device=None, port=None, evidence=["a", None]),
                      _finding("node2", expected=True, found=None), _finding("node10", expected=["mlx5_0", 1])],
                     perftest=[_row("node1", "node2", 372.0, device=None, test=None)],
                     nccl={"node1": _nccl(hcas=None, evidence=[None, "x"])},
                     meta={"pattern": "ring", "generated_at": None, "thresholds": {"min_busbw_gbps": None}})
    first, second, third = report["findings"]
    assert third["expected"] == "mlx5_0, 1"
    assert (first["expected"], first["found"], first["evidence"]) == ("4096", "2048.5", ["a"])
    assert "device" not in first and "port" not in first
    assert (second["expected"], second["found"]) == ("true", "")
    assert set(report["perftest"][0]) == {"rail", "client", "server", "bw_avg_gbps", "line_rate_gbps", "pct"}
    assert report["nccl"]["node1"]["evidence"] == ["x"] and "hcas" not in report["nccl"]["node1"]
    assert report["meta"] == {"pattern": "ring", "thresholds": {}, "schema_version": 1}


def test_the_inputs_are_not_changed():
    findings, rows = [_finding("node2", device=None)], [_row("node1", "node2", 372.0)]
    before = copy.deepcopy((HOSTS, findings, rows))
    fr.build_report(HOSTS, findings, rows, {}, {})
    assert (HOSTS, findings, rows) == before


@pytest.mark.parametrize("entry, findings, verdict", [
    (_nccl(), [], "pass"),
    (_nccl(), [_finding("node1", check="nccl_transport")], "fail"),
    (_nccl(), [_finding("node1", "warning", check="nccl_transport")], "pass"),
    (_nccl(), [_finding("node2", check="nccl_transport")], "pass"),
    (_nccl(net_transport="Socket", fallback_to_socket=True), [], "fail"),
    (_nccl(net_transport=None, link_layer=None, gdr=None, fallback_to_socket=None, busbw_gbps=None), [], "unknown"),
    (_nccl(verdict="fail"), [], "fail"),
])
def test_nccl_verdict_per_host_is_computed_when_not_given(entry, findings, verdict):
    assert _report(findings, nccl={"node1": entry})["nccl"]["node1"]["verdict"] == verdict


def test_the_report_survives_a_json_round_trip_and_is_valid():
    report = sample_report()
    assert json.loads(json.dumps(report)) == report
    assert fr.validate_report(report) == []
    assert set(report) == {"verdict", "hosts", "findings", "perftest", "nccl", "counters", "meta", "latency"}


# --- validation --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"findings": [_finding("node1", "fatal")]},
     'findings[0].severity must be one of error, warning, info; got "fatal"'),
    ({"findings": [dict(_finding("node1"), cause="")]}, 'findings[0].cause must be a non-empty string; got ""'),
    ({"findings": [{k: v for k, v in _finding("node1").items() if k != "fix"}]},
     "findings[0].fix is missing (it is required)"),
    ({"findings": [_finding("node1", colour="red")]}, "findings[0].colour is not a known key; allowed: cause, check,"),
    ({"findings": [_finding("node1", port=0)]}, "findings[0].port must be an integer >= 1; got 0"),
    ({"perftest": [_row("node1", "node2", -3.0)]}, "perftest[0].bw_avg_gbps must be a number >= 0 or null; got -3.0"),
    ({"perftest": [_row("node1", "node2", 3.0, line=0)]},
     "perftest[0].line_rate_gbps must be a number > 0 or null; got 0"),
    ({"perftest": [_row("node1", "node2", 3.0, rail="0")]}, 'perftest[0].rail must be an integer >= 0; got "0"'),
    ({"perftest": [_row("node1", "node2", True)]}, "perftest[0].bw_avg_gbps must be a number >= 0 or null; got true"),
    ({"perftest": [_row("node1", "", 3.0)]}, 'perftest[0].server must be a non-empty string; got ""'),
    ({"nccl": {"node1": _nccl(gdr="yes")}}, 'nccl["node1"].gdr must be true, false or null; got "yes"'),
    ({"nccl": {"node1": {"net_transport": "IB"}}}, 'nccl["node1"].link_layer is missing (it is required)'),
    ({"counters": {"node1": {"mlx5_0/1": {"symbol_error": "3"}}}},
     'counters["node1"]["mlx5_0/1"]["symbol_error"] must be an integer or null; got "3"'),
    ({"counters": {"node1": ["mlx5_0/1"]}}, 'counters["node1"] must be an object of ports; got ["mlx5_0/1"]'),
    ({"hosts": {"node1": {"group": "ib", "checks": {"mtu": "ok"}}}},
     'hosts["node1"].checks["mtu"] must be one of pass, fail, skip; got "ok"'),
    ({"hosts": {"node1": {"group": "ib"}}}, 'hosts["node1"].checks is missing (it is required)'),
    ({"meta": {"pattern": "mesh"}}, 'meta.pattern must be one of ring, all_pairs, pairs; got "mesh"'),
    ({"meta": {"min_bw_pct": 90}}, "meta.min_bw_pct is not a known key; allowed: collection_version, failed_hosts,"),
    ({"meta": {"thresholds": {"min_bw_pct": 120}}},
     "meta.thresholds.min_bw_pct must be a number from 0 to 100; got 120"),
    ({"latency": [{"rail": 0, "client": "a", "server": "b"}]}, "latency[0].t_typical_us is missing (it is required)"),
    ({"findings": "none"}, 'findings must be a list; got "none"'),
    ({"nccl": []}, "nccl must be an object; got []"),
    ({"perftest": [_row("node1", "node2", float("nan"))]},
     "perftest[0].bw_avg_gbps must be a number >= 0 or null; got NaN"),
])
def test_bad_input_is_refused_with_a_message_naming_the_field(kwargs, message):
    args = dict({"hosts": copy.deepcopy(HOSTS), "findings": [], "perftest": [], "nccl": {}, "counters": {}}, **kwargs)
    with pytest.raises(fr.ReportError) as err:
        fr.build_report(**args)
    assert message in str(err.value)
    assert any(p.startswith(message) for p in err.value.problems)


def test_meta_hints_where_a_misplaced_key_belongs():
    problems = fr.validate_report(dict(sample_report(), meta={"min_bw_pct": 90, "latency": []}))
    assert any(p.endswith("(thresholds go in meta.thresholds)") for p in problems)
    assert any(p.endswith("(latency is a top-level key: build_report's latency argument)") for p in problems)


def test_every_problem_is_reported_at_once():
    with pytest.raises(fr.ReportError) as err:
        _report([_finding("node1", "fatal"), _finding("", "error")], perftest=[_row("a", "b", -1.0)])
    assert len(err.value.problems) == 3
    assert str(err.value).startswith("fabric report: findings[0].severity")


def test_validate_report_checks_the_verdict_against_the_findings():
    report = sample_report()
    assert report["verdict"] == "fail"
    assert fr.validate_report(dict(report, verdict="pass")) == ["verdict must be fail: findings[0] has severity error"]
    clean = dict(report, findings=[f for f in report["findings"] if f["severity"] != "error"])
    assert fr.validate_report(dict(clean, verdict="fail")) == ["verdict must be pass: no finding has severity error"]
    assert fr.validate_report(dict(clean, verdict="PASS")) == ['verdict must be one of pass, fail; got "PASS"']


def test_validate_report_names_missing_and_unknown_top_level_keys():
    report = sample_report()
    del report["counters"]
    report["extra"] = 1
    assert fr.validate_report(report) == [
        "extra is not a known top-level key; allowed: verdict, hosts, findings, perftest, nccl, counters, meta, latency, "
        "rail_map, pcie",
        "counters is missing (it is required)"]
    assert fr.validate_report([]) == ["the report must be an object; got []"]


# --- the schema file agrees with validate_report -------------------------------------------------------------------

def _schema():
    return json.loads(SCHEMA_PATH.read_text())


def _mutations():
    """(name, report) samples, valid and invalid, for the schema/validator agreement test."""
    base = sample_report()
    samples = [("sample", base), ("minimal", {"verdict": "pass", "hosts": {}, "findings": [], "perftest": [],
                                              "nccl": {}, "counters": {}})]

    def mutated(name, change):
        report = copy.deepcopy(base)
        change(report)
        samples.append((name, report))

    mutated("verdict pass with an error", lambda r: r.update(verdict="pass"))
    mutated("verdict missing", lambda r: r.pop("verdict"))
    mutated("unknown top key", lambda r: r.update(extra=[]))
    mutated("latency absent", lambda r: r.pop("latency"))
    mutated("meta absent", lambda r: r.pop("meta"))
    mutated("meta schema_version 2", lambda r: r["meta"].update(schema_version=2))
    mutated("meta failed_hosts", lambda r: r["meta"].update(failed_hosts=["node2"]))
    mutated("meta failed_hosts empty name", lambda r: r["meta"].update(failed_hosts=[""]))
    mutated("threshold 0", lambda r: r["meta"]["thresholds"].update(min_bw_pct=0))
    mutated("threshold 100.5", lambda r: r["meta"]["thresholds"].update(min_bw_pct=100.5))
    mutated("threshold busbw null", lambda r: r["meta"]["thresholds"].update(min_busbw_gbps=None))
    mutated("host group null", lambda r: r["hosts"]["node1"].update(group=None))
    mutated("host group empty", lambda r: r["hosts"]["node1"].update(group=""))
    mutated("host extra key", lambda r: r["hosts"]["node1"].update(rack="r1"))
    mutated("empty host name", lambda r: r["hosts"].update({"": {"group": None, "checks": {}}}))
    mutated("check state bool", lambda r: r["hosts"]["node1"]["checks"].update(mtu=True))
    mutated("finding expected number", lambda r: r["findings"][0].update(expected=4096))
    mutated("finding expected empty", lambda r: r["findings"][0].update(expected=""))
    mutated("finding port 1.0", lambda r: r["findings"][0].update(port=1.0))
    mutated("finding port 1.5", lambda r: r["findings"][0].update(port=1.5))
    mutated("finding evidence with null", lambda r: r["findings"][0].update(evidence=["x", None]))
    mutated("finding device null", lambda r: r["findings"][0].update(device=None))
    mutated("finding not an object", lambda r: r["findings"].append("node1 is down"))
    mutated("perftest pct null with bw", lambda r: r["perftest"][0].update(pct=None))
    mutated("perftest rail bool", lambda r: r["perftest"][0].update(rail=True))
    mutated("perftest line 0", lambda r: r["perftest"][0].update(line_rate_gbps=0))
    mutated("perftest error empty", lambda r: r["perftest"][1].update(error=""))
    mutated("perftest round -1", lambda r: r["perftest"][0].update(round=-1))
    mutated("perftest not a list", lambda r: r.update(perftest={}))
    mutated("latency bytes 0", lambda r: r["latency"][0].update(bytes=0))
    mutated("latency p99 string", lambda r: r["latency"][0].update(p99_us="2.0"))
    mutated("nccl link layer list", lambda r: r["nccl"]["node1"].update(link_layer=["IB", "RoCE"]))
    mutated("nccl link layer empty in list", lambda r: r["nccl"]["node1"].update(link_layer=["IB", ""]))
    mutated("nccl link layer number", lambda r: r["nccl"]["node1"].update(link_layer=1))
    mutated("nccl verdict maybe", lambda r: r["nccl"]["node1"].update(verdict="maybe"))
    mutated("nccl summary null", lambda r: r["nccl"]["node1"].update(summary=None))
    mutated("nccl busbw null", lambda r: r["nccl"]["node1"].update(busbw_gbps=None))
    mutated("nccl missing gdr", lambda r: r["nccl"]["node1"].pop("gdr"))
    mutated("counter null", lambda r: r["counters"]["node1"]["mlx5_0/1"].update(symbol_error=None))
    mutated("counter negative", lambda r: r["counters"]["node1"]["mlx5_0/1"].update(symbol_error=-2))
    mutated("counter float", lambda r: r["counters"]["node1"]["mlx5_0/1"].update(symbol_error=2.5))
    mutated("counter port not object", lambda r: r["counters"]["node1"].update(eth0=5))
    mutated("counter empty port name", lambda r: r["counters"]["node1"].update({"": {}}))
    port = {"id": "ibp24s0:1", "role": "compute", "rail": 0, "link_layer": "InfiniBand", "state": "ACTIVE",
            "rate_gbps": 400.0, "netdev": "ibp24s0"}
    mutated("host ports", lambda r: r["hosts"]["node1"].update(ports=[port, {"id": "roce0:1", "role": "storage"}]))
    mutated("host ports not a list", lambda r: r["hosts"]["node1"].update(ports={"ibp24s0:1": "compute"}))
    mutated("port role gpu", lambda r: r["hosts"]["node1"].update(ports=[dict(port, role="gpu")]))
    mutated("port rail -1", lambda r: r["hosts"]["node1"].update(ports=[dict(port, rail=-1)]))
    mutated("port rate null", lambda r: r["hosts"]["node1"].update(ports=[dict(port, rate_gbps=None)]))
    mutated("port without id", lambda r: r["hosts"]["node1"].update(ports=[{"role": "unused"}]))
    mutated("port extra key", lambda r: r["hosts"]["node1"].update(ports=[dict(port, slot=3)]))
    mutated("perftest role storage", lambda r: r["perftest"][0].update(role="storage"))
    mutated("perftest role unused", lambda r: r["perftest"][0].update(role="unused"))
    mutated("latency role storage", lambda r: r["latency"][0].update(role="storage"))
    return samples


@pytest.mark.parametrize("name, report", _mutations(), ids=[name for name, _r in _mutations()])
def test_schema_file_and_validate_report_agree(name, report):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(_schema())
    schema_ok = not list(validator.iter_errors(report))
    assert (fr.validate_report(report) == []) == schema_ok, (name, fr.validate_report(report))


def test_schema_file_is_a_valid_draft_2020_12_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = _schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("definition, fields", [
    ("host", fr.HOST_FIELDS), ("port", fr.PORT_FIELDS), ("finding", fr.FINDING_FIELDS), ("perftest", fr.PERFTEST_FIELDS),
    ("latency", fr.LATENCY_FIELDS), ("nccl", fr.NCCL_FIELDS), ("meta", fr.META_FIELDS),
])
def test_schema_objects_have_the_same_keys_and_required_keys_as_the_validator(definition, fields):
    schema = _schema()["$defs"][definition]
    assert sorted(schema["properties"]) == sorted(fields)
    assert sorted(schema["required"]) == sorted(k for k, (required, _r) in fields.items() if required)
    assert schema["additionalProperties"] is False
    assert sorted(_schema()["required"]) == sorted(fr.TOP_REQUIRED)
    assert sorted(_schema()["properties"]) == sorted(fr.TOP_LEVEL)


# --- HTML --------------------------------------------------------------------------------------------------------

class _Cells(HTMLParser):
    """td.cell attributes and text, and every tag/attribute name, of a page."""

    def __init__(self):
        super().__init__()
        self.cells, self.tags, self.attrs, self._cell, self.verdict, self._in_verdict = [], [], [], None, None, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        self.attrs.append((tag, attrs))
        if tag == "td" and "cell" in (attrs.get("class") or "").split():
            self._cell = dict(attrs, text="")
            self.cells.append(self._cell)
        if attrs.get("id") == "verdict":
            self._in_verdict, self.verdict = True, ""

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None
        if tag == "p":
            self._in_verdict = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data
        if self._in_verdict:
            self.verdict += data


def _parse(page):
    parser = _Cells()
    parser.feed(page)
    return parser


def test_html_is_self_contained_with_the_verdict_and_one_cell_per_tested_pair():
    report = sample_report()
    page = fh.render_html(report)
    parsed = _parse(page)
    assert parsed.verdict == "FAIL"
    assert page.startswith("<!DOCTYPE html>")
    assert "script" not in parsed.tags and "link" not in parsed.tags and "img" not in parsed.tags
    assert not re.search(r"(src|href)=\"(?!#)", page), "a reference outside the page"
    assert "@import" not in page and "url(" not in page
    cells = dict(((c["data-rail"], c["data-client"], c["data-server"]), c) for c in parsed.cells)
    assert len(parsed.cells) == 3
    assert (cells[("0", "node1", "node2")]["text"], cells[("0", "node1", "node2")]["data-pct"]) == ("372.493.1%", "93.1")
    assert cells[("0", "node1", "node2")]["class"] == "cell good"
    assert (cells[("0", "node2", "node10")]["text"], cells[("0", "node2", "node10")]["data-pct"]) == ("no result", "")
    assert cells[("0", "node2", "node10")]["data-error"] == "server not listening"
    assert cells[("1", "node10", "node1")]["data-test"] == "ib_write_bw"
    assert _parse(fh.render_html(_report()))._cell is None
    assert _parse(fh.render_html(_report())).verdict == "PASS"


@pytest.mark.parametrize("min_pct, pct, css", [(90, 93.1, "good"), (95, 93.1, "warn"), (90, 75.0, "warn"),
                                               (90, 69.9, "bad"), (60, 65.0, "good"), (60, 55.0, "bad")])
def test_heat_map_colour_follows_the_bandwidth_threshold(min_pct, pct, css):
    report = _report(perftest=[_row("node1", "node2", 4 * pct)], meta={"thresholds": {"min_bw_pct": min_pct}})
    assert _parse(fh.render_html(report)).cells[0]["class"] == "cell " + css


def test_a_pair_tested_twice_shows_its_worst_run_once():
    report = _report(perftest=[_row("node1", "node2", 390.0, round=0), _row("node1", "node2", 120.0, round=3),
                               _row("node1", "node2", 385.0, round=5)])
    cells = _parse(fh.render_html(report)).cells
    assert [(c["data-pct"], c["text"]) for c in cells] == [("30.0", "120.030.0%")]
    assert "worst of 3 runs" in cells[0]["title"]


def test_more_hosts_than_the_grid_limit_list_the_pairs_worst_first(monkeypatch):
    monkeypatch.setattr(fh, "HEATMAP_MAX_HOSTS", 2)
    report = _report(perftest=[_row("node1", "node2", 390.0), _row("node2", "node10", 100.0),
                               _row("node10", "node1", None, error="timeout")])
    parsed = _parse(fh.render_html(report))
    assert [(c["data-client"], c["data-server"]) for c in parsed.cells] == [
        ("node10", "node1"), ("node2", "node10"), ("node1", "node2")]
    assert not any(t == "table" and "heatmap" in (a.get("class") or "") for t, a in parsed.attrs)


def test_every_string_is_escaped():
    evil = "<script>alert(1)</script>"
    quote = 'n"ode'
    hosts = {evil: {"group": "<b>ib</b>", "checks": {"<i>mtu</i>": "fail"}}, quote: {"group": None, "checks": {}}}
    report = _report([_finding(evil, cause="PFC <off>", fix="run 'x' & \"y\"", evidence=["a<0>"], device="<d>")],
                     perftest=[_row(evil, quote, 390.0, error=None, test="<t>", device="<hca>")],
                     nccl={evil: _nccl(evidence=["OOB eth0:10.0.0.1<0>"], hcas=["<h>"], summary="<s>")},
                     counters={evil: {"<port>": {"<ctr>": 3}}},
                     latency=[{"rail": 0, "client": evil, "server": quote, "t_typical_us": 1.0, "error": "<e>"}],
                     meta={"generated_at": "<now>", "failed_hosts": [evil]}, hosts=hosts)
    page = fh.render_html(report)
    assert "<script" not in page
    for raw in ("<b>", "<i>", "<off>", "<0>", "<d>", "<t>", "<hca>", "<h>", "<s>", "<port>", "<ctr>", "<e>", "<now>"):
        assert raw not in page, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "run &#x27;x&#x27; &amp; &quot;y&quot;" in page
    parsed = _parse(page)
    assert (parsed.cells[0]["data-client"], parsed.cells[0]["data-server"]) == (evil, quote)


def test_same_report_same_bytes_and_input_order_does_not_matter():
    first = sample_report()
    rows = [_row("node1", "node2", 372.44), _row("node2", "node10", None, error="server not listening"),
            _row("node10", "node1", 361.0, rail=1, test="ib_write_bw", device="mlx5_1", round=1)]
    random.Random(7).shuffle(rows)
    hosts = dict(reversed(list(copy.deepcopy(HOSTS).items())))
    findings = [_finding("node1", "warning", "firmware"), _finding("node2", device="mlx5_0", port=1)]
    second = fr.build_report(hosts, findings, rows, first["nccl"], first["counters"], meta=first["meta"], latency=first["latency"])
    assert json.dumps(second) == json.dumps(first)
    assert fh.render_html(second) == fh.render_html(first) == fh.render_html(copy.deepcopy(first))


def test_render_html_refuses_an_invalid_report():
    report = sample_report()
    report["findings"][0]["severity"] = "fatal"
    with pytest.raises(fr.ReportError, match=r'findings\[0\]\.severity must be one of error, warning, info'):
        fh.render_html(report)


def test_html_sections_show_nccl_evidence_latency_counters_and_findings():
    page = fh.render_html(sample_report())
    for anchor in ('id="findings"', 'id="hosts"', 'id="bandwidth"', 'id="latency"', 'id="nccl"', 'id="counters"'):
        assert anchor in page
    assert "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1&lt;0&gt;" in page
    assert '<span class="chip nz err">port_rcv_errors +7</span>' in page
    assert '<span class="chip zero">symbol_error 0</span>' in page
    assert page.count('<tr class="finding ') == 2
    assert "seat the cable" in page and "the cable is out" in page


# --- the filters -------------------------------------------------------------------------------------------------

def test_the_html_filter_renders_and_turns_problems_into_filter_errors():
    filters = verify_filters.FilterModule().filters()
    report = fr.build_report(copy.deepcopy(HOSTS), [_finding("node2")], [], {}, {},
                                     meta={"pattern": "all_pairs"})
    assert report["verdict"] == "fail"
    assert _parse(filters["fabric_report_html"](report)).verdict == "FAIL"
    with pytest.raises(AnsibleFilterError, match="verdict is missing"):
        filters["fabric_report_html"]({"hosts": {}, "findings": [], "perftest": [], "nccl": {}, "counters": {}})