# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Schedule perftest pairs in rounds of disjoint pairs: no host runs two tests at once, a round runs in parallel.

A test is ``[client, server]``. Patterns:

- ``ring``: host i tests host i+1 (the last tests the first). 2 rounds for an even number of hosts; an odd ring's
  pairs cannot be split into two sets of disjoint pairs, so it takes 3. Two hosts make one pair, one round.
- ``all_pairs``: every unordered pair once, by the round-robin (circle) method: n-1 rounds for n even, n rounds of
  (n-1)/2 pairs for n odd (one host rests in each). The client is the lower-ordered host in even rounds and the
  higher in odd ones, so that each host is client about as often as server.
- ``pairs``: the user's list, packed greedily into rounds (the most-used hosts first); the order within it is kept
  for pairs that can share a round.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

PATTERNS = ("ring", "all_pairs", "pairs")


def _ring(hosts):
    n = len(hosts)
    if n < 2:
        return []
    if n == 2:
        return [[[hosts[0], hosts[1]]]]
    edges = [[hosts[i], hosts[(i + 1) % n]] for i in range(n)]
    if n % 2 == 0:
        return [edges[0::2], edges[1::2]]
    # odd: the closing pair (last -> first) shares a host with both neighbours of the even/odd split
    return [edges[0:n - 1:2], edges[1:n - 1:2], [edges[n - 1]]]


def _all_pairs(hosts):
    slots = list(hosts) + ([None] if len(hosts) % 2 else [])
    n = len(slots)
    rounds = []
    for r in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = slots[i], slots[n - 1 - i]
            if a is None or b is None:
                continue
            first, second = sorted((a, b), key=hosts.index)
            pairs.append([first, second] if (r + i) % 2 == 0 else [second, first])
        rounds.append(pairs)
        slots = [slots[0]] + [slots[-1]] + slots[1:-1]
    return [r for r in rounds if r]


def _packed(pairs):
    load = {}
    for client, server in pairs:
        load[client] = load.get(client, 0) + 1
        load[server] = load.get(server, 0) + 1
    order = sorted(range(len(pairs)), key=lambda k: (-max(load[pairs[k][0]], load[pairs[k][1]]), k))
    rounds, busy = [], []
    for k in order:
        pair = pairs[k]
        for index, used in enumerate(busy):
            if pair[0] not in used and pair[1] not in used:
                rounds[index].append(k)
                used.update(pair)
                break
        else:
            rounds.append([k])
            busy.append(set(pair))
    return [[list(pairs[k]) for k in sorted(r)] for r in rounds]


def pair_errors(hosts, pairs):
    """Problems with a ``pairs`` list, each naming the entry: not a [client, server] of known hosts, or a repeat."""
    errors, seen = [], set()
    if not isinstance(pairs, (list, tuple)) or not pairs:
        return ["verify_perftest_pairs must be a non-empty list of [client, server] host pairs when "
                "verify_perftest_pattern is pairs"]
    for index, pair in enumerate(pairs):
        where = "verify_perftest_pairs[%d]" % index
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(isinstance(h, str) for h in pair):
            errors.append("%s must be [client, server] (two inventory host names); got %r" % (where, pair))
            continue
        unknown = [h for h in pair if h not in hosts]
        if unknown:
            errors.append("%s names %s, not a host of this run (hosts: %s)"
                          % (where, ", ".join(unknown), ", ".join(hosts)))
        elif pair[0] == pair[1]:
            errors.append("%s tests %s against itself; a pair needs two hosts" % (where, pair[0]))
        elif frozenset(pair) in seen:
            errors.append("%s repeats the pair %s / %s" % (where, pair[0], pair[1]))
        seen.add(frozenset(pair))
    return errors


def schedule(hosts, pattern, pairs=None):
    """``hosts`` (ordered, unique) -> a list of rounds, each a list of ``[client, server]`` with no host twice.

    Raises ValueError with a message naming the field on a bad pattern or pairs list.
    """
    hosts = list(hosts)
    if len(set(hosts)) != len(hosts):
        raise ValueError("the hosts to test must be unique; got %s" % ", ".join(hosts))
    if pattern not in PATTERNS:
        raise ValueError("verify_perftest_pattern must be one of: %s; got %r" % (", ".join(PATTERNS), pattern))
    if pattern == "ring":
        return _ring(hosts)
    if pattern == "all_pairs":
        return _all_pairs(hosts)
    errors = pair_errors(hosts, pairs)
    if errors:
        raise ValueError("; ".join(errors))
    return _packed([list(p) for p in pairs])
