# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health check's thresholds and intervals: the one table of their names, units, defaults and ranges.

Pure Python (no Ansible imports). ``THRESHOLDS`` names each role input (``health_<name>``), its unit, its default and
its range; ``input_errors`` checks the role's inputs against it (one message per problem, naming the variable and what
it accepts: a plain number in the unit of its name, so ``"5%"`` or ``"10/min"`` is refused); ``values`` gives the
checked numbers under their short names, as the expected-state file keeps them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

# short name -> (unit, default, low, high, integer, what it bounds)
THRESHOLDS = {
    "link_errors_per_hour_max": (
        "errors per hour", 10, 0, 1000000, False,
        "symbol errors, receive errors, link integrity errors and link error recoveries of one port (and the "
        "Ethernet PHY's CRC and symbol errors), each counter on its own; more is a failing cable or transceiver"),
    "link_flaps_max": (
        "link-down events per check interval", 0, 0, 255, True,
        "increments of link_downed (and link_down_events_phy on Ethernet) between two runs; more is a flapping link"),
    "pfc_pause_percent_max": (
        "percent of the interval", 10, 0, 100, False,
        "the share of time a lossless priority was paused (rx or tx_prio<N>_pause_duration, where the driver has it); "
        "more is a PFC storm"),
    "pause_frames_not_lossless_max": (
        "pause frames per check interval", 0, 0, 1000000000, True,
        "PFC pause frames on a priority that is not declared lossless, and link-level (global) pause frames"),
    "discards_per_minute_max": (
        "packets per minute", 0, 0, 1000000000, False,
        "packets dropped on a lossless port (rx_discards_phy, out_of_buffer)"),
}
# the timer's and Slurm's intervals, in seconds
INTERVALS = {
    "interval": ("seconds", 60, 10, 86400,
                 "how often the systemd timer runs the check and writes the metrics (OnUnitActiveSec)"),
    "slurm_interval": ("seconds", 300, 10, 86400, "Slurm's HealthCheckInterval"),
}
SLURM_NODE_STATES = ("ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE")


def _number(value, integer):
    """``value`` as a finite number (an int where ``integer``), else None. A string is taken only when it is a plain
    number ("5"), as YAML and -e give them; "5%" or "10/min" is no number here."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip()) if not integer else int(value.strip())
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if integer and value != int(value):
        return None
    return int(value) if integer else value


def _range_text(low, high):
    return "%s to %s" % (low, high)


def input_errors(inputs):
    """Problems with the health role's threshold and interval inputs (``inputs``: {health_<name>: value} as the user
    set them), one message each naming the variable, its unit and its range."""
    errors = []
    for name, (unit, _default, low, high, integer, _what) in sorted(THRESHOLDS.items()):
        var = "health_" + name
        if var not in inputs:
            continue
        number = _number(inputs[var], integer)
        if number is None or not low <= number <= high:
            errors.append("%s must be a plain %s in %s, %s (no unit in the value); got %r." % (
                var, "whole number" if integer else "number", unit, _range_text(low, high), inputs[var]))
    for name, (unit, _default, low, high, _what) in sorted(INTERVALS.items()):
        var = "health_" + name
        if var not in inputs:
            continue
        number = _number(inputs[var], True)
        if number is None or not low <= number <= high:
            errors.append("%s must be a whole number of %s, %s (0 would never run the check); got %r." % (
                var, unit, _range_text(low, high), inputs[var]))
    state = inputs.get("health_slurm_node_state")
    if state is not None:
        parts = [p.strip().upper() for p in str(state).split(",")] if isinstance(state, str) else None
        if not parts or not all(p in SLURM_NODE_STATES for p in parts):
            errors.append("health_slurm_node_state must be Slurm's HealthCheckNodeState: one or more of %s, comma "
                          "separated (CYCLE may be added to one of the others); got %r." % (
                              ", ".join(SLURM_NODE_STATES), state))
    return errors


def values(inputs):
    """{short name: number} of every threshold, the default where ``inputs`` has none (inputs already checked)."""
    out = {}
    for name, (_unit, default, _low, _high, integer, _what) in THRESHOLDS.items():
        raw = inputs.get("health_" + name)
        out[name] = default if raw is None else _number(raw, integer)
    return out


def interval(inputs, name="interval"):
    raw = inputs.get("health_" + name)
    return INTERVALS[name][1] if raw is None else _number(raw, True)
