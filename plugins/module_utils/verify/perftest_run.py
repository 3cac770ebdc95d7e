# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""perftest run by the ``perftest`` module: its options checked, its argv built, the tool run under a timeout
(its whole process group killed), the out-of-band TCP port tested, and the output judged into the module's
result (``evaluate``, with the message for a run that printed no result row).

Pure Python, no Ansible imports. What the tools print (the parser, the failure table, the summary) is read by
``perftest_output``; this module only imports it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import re
import socket

from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import tool_runner
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.perftest_output import (
    SERVER_PRINTS_NO_TABLE, classify_failure, parse_output, server_prints_no_table, summary,
)

TESTS = ("ib_write_bw", "ib_write_lat", "ib_read_bw", "ib_read_lat", "ib_send_bw", "ib_send_lat")


# ---------------------------------------------------------------------------------------------------------- running
def build_argv(test, device, ib_port=None, gid_index=None, server=None, port=None, size=None, iterations=None,
               duration=None, qps=None, tclass=None, report_gbits=True, extra_args=None):
    """perftest's argv: ``[test, -d dev, -i port, -x gid, -p tcp, -s size, -n iters | -D secs, -q qps,
    --tclass=N, --report_gbits, -F, extra..., server]``; the client is the side given ``server`` (last, positional).

    ``--report_gbits`` is added to the bandwidth tools only; ``-F`` always (do not fail on CPU frequency scaling).
    """
    argv = [test, "-d", device]
    for flag, value in (("-i", ib_port), ("-x", gid_index), ("-p", port), ("-s", size), ("-n", iterations),
                        ("-D", duration), ("-q", qps)):
        if value is not None:
            argv += [flag, str(value)]
    if tclass is not None:
        argv.append("--tclass=%d" % int(tclass))
    if report_gbits and str(test).endswith("_bw"):
        argv.append("--report_gbits")
    argv.append("-F")
    argv += [str(a) for a in (extra_args or [])]
    if server:
        argv.append(server)
    return argv


def run(argv, timeout, env=None):
    """Run ``argv`` (no shell), stdout and stderr merged, killed (its whole process group) after ``timeout`` s.

    Returns ``{rc, output, timed_out, error}``; ``error`` is set when the program could not start.
    """
    return tool_runner.run_process(argv, timeout=timeout, env=env)


def port_in_use(port, host=""):
    """Bind test for the out-of-band TCP port (perftest binds AF_INET with SO_REUSEADDR): an error text or None."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
    except (OSError, socket.error) as exc:
        if getattr(exc, "errno", None) == errno.EADDRINUSE:
            return "TCP port %s is already in use on this host" % port
        return "TCP port %s cannot be bound on this host: %s" % (port, exc)
    finally:
        sock.close()
    return None


# ---------------------------------------------------------------------------------------------------------- module
_MANAGED_OPTIONS = {"-d": "device", "--ib-dev": "device", "-i": "ib_port", "--ib-port": "ib_port", "-x": "gid_index",
                    "--gid-index": "gid_index", "-p": "port", "--port": "port", "-s": "size", "--size": "size",
                    "-n": "iterations", "--iters": "iterations", "-D": "duration", "--duration": "duration",
                    "-q": "qps", "--qp": "qps", "--tclass": "tclass"}
_RUN_ONLY = ("device", "server", "gid_index", "size", "iterations", "duration", "tclass", "extra_args")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$")


def _range(params, key, low, high, what):
    val = params.get(key)
    if val is None:
        return None
    if val < low or (high is not None and val > high):
        bound = "%d-%d" % (low, high) if high is not None else ">= %d" % low
        return "%s: must be %s (%s), got %s" % (key, bound, what, val)
    return None


def validate(params):
    """The module's options -> an error message naming the field and the allowed values, or None."""
    log_mode = params.get("log_path") is not None or params.get("log_text") is not None
    if log_mode:
        given = [k for k in _RUN_ONLY if params.get(k) not in (None, [], "")]
        if given:
            return ("%s: appl%s to running perftest; %s parses saved output (give one or the other)"
                    % (", ".join(given), "ies" if len(given) == 1 else "y",
                       "log_path" if params.get("log_path") is not None else "log_text"))
        return None
    if not params.get("device"):
        return ("device: give the HCA to test (for example mlx5_0), or log_path / log_text to parse saved "
                "perftest output")
    if not _NAME.match(params["device"]):
        return "device: an HCA name such as mlx5_0 (letters, digits, _ . : -), got %r" % params["device"]
    checks = (("ib_port", 1, 255, "the HCA port number, 1 for the first port"),
              ("gid_index", 0, 255, "the GID table index, see show_gids"),
              ("port", 1024, 65535, "perftest's out-of-band TCP port"),
              ("size", 1, None, "message size in bytes"),
              ("iterations", 5, 100000000, "perftest's -n limits"),
              ("duration", 1, None, "seconds"),
              ("qps", 1, 16384, "perftest's -q limits"),
              ("tclass", 0, 255, "the ToS byte: DSCP << 2 | ECN"),
              ("timeout", 1, None, "seconds before the process is killed"))
    for key, low, high, what in checks:
        problem = _range(params, key, low, high, what)
        if problem:
            return problem
    if params.get("iterations") is not None and params.get("duration") is not None:
        return "iterations, duration: give one (perftest runs -n iterations or -D seconds, not both)"
    server = params.get("server")
    if server is not None and (not server.strip() or server.startswith("-") or re.search(r"\s", server)):
        return "server: the server side's address (an IP or host name, no spaces), got %r" % server
    for item in params.get("extra_args") or []:
        if not isinstance(item, str):
            return "extra_args: every item must be a string, got %s" % type(item).__name__
        flag = item.split("=", 1)[0]
        if flag in _MANAGED_OPTIONS:
            return "extra_args: %s is set by the module's %s option" % (flag, _MANAGED_OPTIONS[flag])
    return None


# ---------------------------------------------------------------------------------------------------------- verdict
def last_lines(text, count=5):
    return [ln.strip() for ln in (text or "").splitlines() if ln.strip()][-count:]


def result_error(text, rc, parsed, timed_out=False):
    """The message for an output without a result row: the tool's last lines (up to 5) and the classified cause."""
    failure = classify_failure(text, rc, timed_out=timed_out) or {}
    if not failure and rc in (None, 0):
        failure = {"cause": "the output ends before the result table (cut short, or the test stopped on the other "
                            "side first)", "fix": "read the other side's output and run the test again"}
    tail = last_lines(text)
    what = "perftest printed no result row"
    if parsed and parsed.get("test"):
        what = "perftest (%s) printed no result row" % parsed["test"]
    if rc is not None:
        what += " and exited with code %s" % rc
    if timed_out:
        what += " (killed by the timeout)"
    msg = what
    if failure.get("cause"):
        msg += "; cause: %s; fix: %s" % (failure["cause"], failure["fix"])
    msg += "; last lines: %s" % (" | ".join("'%s'" % ln for ln in tail) if tail else "(no output)")
    return msg


def evaluate(text, rc, timed_out=False, tool=None, is_server=None, timeout=None):
    """Output (+ exit code when the module ran it) -> (failed, msg, result dict for the module's return).

    Success: exit code 0 (or a saved log) and at least one result row. Rule for a server whose tool prints no table
    (ib_read_lat): success with ``rows: []`` when it exchanged addresses with a client (a ``remote address``
    line), exited 0 and printed no failure line.
    """
    parsed = parse_output(text)
    failure = classify_failure(text, rc, timed_out=timed_out)
    role = parsed["role"] if is_server is None else ("server" if is_server else "client")
    if is_server is None:       # saved output: perftest's own banner tells the side and the test
        no_table = server_prints_no_table(parsed=parsed)
    else:
        no_table = bool(is_server) and tool in SERVER_PRINTS_NO_TABLE
    quiet_ok = no_table and bool(parsed["remote"]) and not parsed["errors"] and failure is None
    failed = bool(timed_out or (rc not in (0, None)) or (not parsed["results"] and not quiet_ok))
    msg = None
    if failed:
        name = tool or "perftest"
        if not parsed["results"] or timed_out:
            msg = result_error(text, rc, parsed, timed_out=timed_out)
            if timed_out and timeout:
                msg = msg.replace("(killed by the timeout)", "(killed after the %s s timeout)" % timeout)
        else:
            fail = failure or {}
            msg = "%s exited with code %s after printing results; cause: %s; last lines: %s" % (
                name, rc, fail.get("cause", "unknown"), " | ".join("'%s'" % ln for ln in last_lines(text)))
        if failure is None:
            failure = {"kind": "no_result", "evidence": last_lines(text),
                       "cause": "the output has no result row (cut short, or the test stopped on the other side "
                                "first)", "fix": "read the other side's output and run the test again"}
    result = {
        "rc": rc, "timed_out": bool(timed_out), "test": parsed["test"], "kind": parsed["kind"],
        "bidirectional": parsed["bidirectional"], "role": role, "header": parsed["header"],
        "local": parsed["local"], "remote": parsed["remote"], "unit": parsed["unit"],
        "values_unit": parsed["values_unit"], "columns": parsed["columns"],
        # "results" is the key Ansible reserves for a loop's results: the module's rows have a key of their own
        "rows": parsed["results"],
        # "warnings" is Ansible's own return key (AnsibleModule turns it into task warnings): perftest's go here.
        "perftest_warnings": parsed["warnings"], "errors": parsed["errors"], "summary": summary(parsed),
        "failure": failure if failed else None,
        "stdout_lines": [ln.rstrip() for ln in (text or "").splitlines()][-40:],
    }
    if rc is None:      # saved output: no exit code, and Ansible takes any rc but 0 for a failure
        del result["rc"]
    return failed, msg, result
