# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The counters between two health checks: the kept snapshot, its hour of history, and what the deltas say.

Pure Python (no Ansible imports). A snapshot is ``{time, counters: {"<hca>/<port>": {name: int}}, history: [{time,
counters}]}``; the history keeps one snapshot per ``HISTORY_STEP`` seconds of the last hour, so that link errors are
counted over the last hour whatever the interval between runs (more than ``link_errors_per_hour_max`` of one counter
in the last hour, or since the oldest snapshot when the check is younger), and everything else over the time since
the previous run. ``valid`` refuses a snapshot that is no such document (hand-edited, from another version, a clock
that went back): the run then starts over, as a first run does. The rules themselves are ``verify.rdma_counters``'.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import rdma_counters

HOUR = 3600
HISTORY_STEP = 300
LINK_ERRORS = ("symbol_error", "port_rcv_errors", "local_link_integrity_errors", "link_error_recovery",
               "rx_crc_errors_phy", "rx_symbol_err_phy")
FLAPS = ("link_downed", "link_down_events_phy")
DISCARDS = ("rx_discards_phy", "out_of_buffer")


def _counters_ok(counters):
    return isinstance(counters, dict) and all(
        isinstance(port, dict) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in port.values())
        for port in counters.values())


def _time_ok(value, now):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 < value < now


def valid(snapshot, now):
    """The snapshot (its history filtered to valid entries), or None when it cannot be a baseline."""
    if not isinstance(snapshot, dict) or not _time_ok(snapshot.get("time"), now) or not _counters_ok(
            snapshot.get("counters")):
        return None
    history = [h for h in snapshot.get("history") or [] if isinstance(h, dict) and _time_ok(h.get("time"), now)
               and h["time"] <= snapshot["time"] and _counters_ok(h.get("counters"))]
    return dict(snapshot, history=sorted(history, key=lambda h: h["time"]))


def next_snapshot(previous, counters, now):
    """The snapshot to keep: ``counters`` now, and the history with the previous snapshot in it every HISTORY_STEP."""
    history = []
    if previous:
        history = [h for h in previous["history"] if now - h["time"] <= HOUR + HISTORY_STEP]
        if not history or previous["time"] - history[-1]["time"] >= HISTORY_STEP:
            history.append({"time": previous["time"], "counters": previous["counters"]})
    return {"time": now, "counters": counters, "history": history}


def _hour_baseline(previous, now):
    """The oldest kept snapshot of the last hour (the previous one when the history is younger)."""
    within = [h for h in previous["history"] if now - h["time"] <= HOUR]
    return within[0] if within else previous


def lossless_of(doc, netdev):
    """The lossless (PFC) priorities declared for ``netdev``: its RoCE profile's, none for a port without one."""
    declared = (doc.get("roce_qos") or {}).get(netdev) if netdev else None
    return sorted(set(int(p) for p in (declared or {}).get("pfc") or []))


def limits(thresholds, seconds):
    """{counter: the delta allowed} and ``pause_percent``, from the thresholds, for deltas over ``seconds`` (link
    errors: over the last hour)."""
    out = {"pause_percent": thresholds["pfc_pause_percent_max"]}
    for name in LINK_ERRORS:
        out[name] = int(math.floor(thresholds["link_errors_per_hour_max"]))
    for name in FLAPS:
        out[name] = thresholds["link_flaps_max"]
    for name in DISCARDS:
        out[name] = int(math.floor(thresholds["discards_per_minute_max"] * seconds / 60.0))
    for prio in range(8):
        for direction in ("rx", "tx"):
            out["%s_prio%d_pause" % (direction, prio)] = thresholds["pause_frames_not_lossless_max"]
    for name in ("rx_global_pause", "tx_global_pause"):
        out[name] = thresholds["pause_frames_not_lossless_max"]
    return out


def findings(doc, snap, previous, now):
    """(findings, notes) of the counters in ``snap`` (rdma_counters.snapshot of the checked ports) since
    ``previous`` (a valid snapshot or None)."""
    notes = list(snap["notes"])
    if not previous:
        notes.append({"port": None, "kind": "first_run",
                      "message": "no previous snapshot (or one this run cannot use): counter rates start with the next run"})
        return [], notes
    seconds = max(1, int(round(now - previous["time"])))
    d = rdma_counters.deltas(previous["counters"], snap["counters"], notes)
    hour = rdma_counters.deltas(_hour_baseline(previous, now)["counters"], snap["counters"], [])
    for port, moved in d.items():
        for name in LINK_ERRORS:
            if name in (hour.get(port) or {}):
                moved[name] = hour[port][name]
    link_layers = dict((k, v["link_layer"]) for k, v in snap["ports"].items())
    netdevs = dict((k, v["netdev"]) for k, v in snap["ports"].items())
    # each port against its own declared profile: a storage port left lossy (roce_storage_qos none) has no PFC
    groups = {}
    for port in d:
        groups.setdefault(tuple(lossless_of(doc, netdevs.get(port))), {})[port] = d[port]
    found = []
    for lossless, group in sorted(groups.items()):
        found.extend(rdma_counters.findings(doc["host"], group, list(lossless), link_layers, notes, netdevs,
                                            limits=limits(doc["thresholds"], seconds), seconds=seconds))
    # a counter reset (driver reload) is no finding of its own here: the port checks say what changed
    return [f for f in found if f["check"] != "counter_reset"], notes
