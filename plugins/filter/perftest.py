# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the verify playbook: perftest pairs scheduled in rounds of disjoint pairs, rail by rail."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils import perftest_rounds as rounds_mod


def _group_steps(hosts, pattern, pairs, rails):
    steps = []
    for index, round_pairs in enumerate(rounds_mod.schedule(hosts, pattern, pairs)):
        most = max([min(int(rails.get(c, 1)), int(rails.get(s, 1))) for c, s in round_pairs] or [0])
        for rail in range(most):
            on_rail = [[c, s] for c, s in round_pairs if rail < min(int(rails.get(c, 1)), int(rails.get(s, 1)))]
            steps.append({"round": index, "rail": rail, "pairs": on_rail})
    return steps


def perftest_rounds(hosts, pattern, pairs=None, rails=None):
    """Hosts -> steps ``{round, rail, pairs}``: each round of disjoint ``[client, server]`` pairs once per rail.

    ``hosts`` is a list, or a dict of groups (fabrics) -> hosts: each group is scheduled on its own (a pair never
    spans two groups) and the steps with the same round and rail run together. ``rails`` maps a host to its number
    of rails (HCA i of one host tests HCA i of the other); a pair runs on the rails both hosts have. Without it every
    pair runs on rail 0 only.
    """
    groups = hosts if isinstance(hosts, dict) else {"": hosts}
    rails = rails or {}
    everyone = [h for members in groups.values() for h in members]
    merged = {}
    try:
        if pattern == "pairs":
            errors = rounds_mod.pair_errors(everyone, pairs)
            group_of = dict((h, g) for g, members in groups.items() for h in members)
            errors += ["verify_perftest_pairs[%d] spans two fabrics (%s in %s, %s in %s)"
                       % (i, p[0], group_of[p[0]], p[1], group_of[p[1]])
                       for i, p in enumerate(pairs or []) if not errors and group_of[p[0]] != group_of[p[1]]]
            if errors:
                raise ValueError("; ".join(errors))
        for name, members in groups.items():
            members = list(members)
            own = [p for p in pairs or [] if p[0] in members] if pattern == "pairs" else None
            if pattern == "pairs" and not own:
                continue
            for step in _group_steps(members, pattern, own, rails):
                merged.setdefault((step["round"], step["rail"]), []).extend(step["pairs"])
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))
    return [{"round": r, "rail": rail, "pairs": merged[(r, rail)]} for r, rail in sorted(merged)]


def perftest_pair_errors(hosts, pairs):
    """The problems of a ``verify_perftest_pairs`` list against the hosts of the run, each naming its entry."""
    return rounds_mod.pair_errors(list(hosts), pairs)


class FilterModule:
    """hpcnet.rdma perftest filters."""

    def filters(self):
        return {"perftest_rounds": perftest_rounds, "perftest_pair_errors": perftest_pair_errors}
