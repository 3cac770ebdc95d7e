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

``steps`` runs each round once per rail: rail r of the client tests rail r of the server (the hosts' compute ports
in rail order, whatever the devices are called), on the rails both hosts have; with the storage ports, a second
matrix pairs storage port i with storage port i (steps with ``role: storage``). ``unpaired`` is the findings for the
rails (and storage ports) a scheduled pair leaves untested: rail counts that differ, or link layers that do not
match.
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


# ------------------------------------------------------------------------------------------------ rail by rail
ROLE_CHECK = {"compute": "perftest_rails", "storage": "perftest_storage"}


def _ports(value):
    """A host's rails (or storage ports) as given: a number, or a list of entries (``{hca, port, link_layer}`` as in
    ``verify_plan.host_plan``, or names)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    return [None] * int(value or 0)


def _link_layer(entry):
    return entry.get("link_layer") if isinstance(entry, dict) else None


def _name(entry, index, role):
    if isinstance(entry, dict) and entry.get("hca"):
        return "%s:%s" % (entry["hca"], entry.get("port") or 1)
    return "%s %d" % ("rail" if role == "compute" else "storage port", index)


def _common(first, second):
    """The indexes both hosts have, whose link layers agree where they are known."""
    return [i for i in range(min(len(first), len(second)))
            if None in (_link_layer(first[i]), _link_layer(second[i])) or _link_layer(first[i]) == _link_layer(second[i])]


def _check_groups(groups, pattern, pairs):
    everyone = [h for members in groups.values() for h in members]
    if pattern == "pairs":
        errors = pair_errors(everyone, pairs)
        group_of = dict((h, g) for g, members in groups.items() for h in members)
        errors += ["verify_perftest_pairs[%d] spans two fabrics (%s in %s, %s in %s)"
                   % (i, p[0], group_of[p[0]], p[1], group_of[p[1]])
                   for i, p in enumerate(pairs or []) if not errors and group_of[p[0]] != group_of[p[1]]]
        if errors:
            raise ValueError("; ".join(errors))


def _group_rounds(groups, pattern, pairs):
    """[(group, members, rounds)] of the groups with something to test."""
    out = []
    for name, members in groups.items():
        members = list(members)
        own = [p for p in pairs or [] if p[0] in members] if pattern == "pairs" else None
        if pattern == "pairs" and not own:
            continue
        out.append((name, members, schedule(members, pattern, own)))
    return out


def steps(hosts, pattern, pairs=None, rails=None, storage=None):
    """Hosts -> steps ``{round, rail, pairs}``: each round of disjoint ``[client, server]`` pairs once per rail.

    ``hosts`` is a list, or a dict of groups (fabrics) -> hosts: each group is scheduled on its own (a pair never spans
    two groups) and the steps with the same round and rail run together. ``rails`` maps a host to its rails (a number,
    or the list ``verify_plan.rails``): rail r of the client tests rail r of the server, on the rails both hosts have
    (and whose link layers match, when given); without it every pair runs on rail 0 only. ``storage`` (same forms,
    a host missing has none) adds the storage matrix after: steps ``{round, rail, pairs, role: storage}``, storage
    port i with storage port i. Raises ValueError naming the field on a bad pattern or pairs list.
    """
    groups = hosts if isinstance(hosts, dict) else {"": hosts}
    rails = rails or {}
    _check_groups(groups, pattern, pairs)
    out = []
    for role, ports in (("compute", lambda h: _ports(rails.get(h, 1))),
                        ("storage", lambda h: _ports((storage or {}).get(h, 0)))):
        if role == "storage" and storage is None:
            continue
        merged = {}
        for _name_, _members, rounds in _group_rounds(groups, pattern, pairs):
            for index, round_pairs in enumerate(rounds):
                common = [_common(ports(c), ports(s)) for c, s in round_pairs]
                for rail in sorted(set(i for indexes in common for i in indexes)):
                    on_rail = [[c, s] for (c, s), indexes in zip(round_pairs, common) if rail in indexes]
                    merged.setdefault((index, rail), []).extend(on_rail)
        for index, rail in sorted(merged):
            step = {"round": index, "rail": rail, "pairs": merged[(index, rail)]}
            if role != "compute":
                step["role"] = role
            out.append(step)
    return out


def _usual(counts):
    tally = {}
    for value in counts:
        tally[value] = tally.get(value, 0) + 1
    return sorted(tally.items(), key=lambda item: (-item[1], -item[0]))[0][0] if tally else None


def unpaired(hosts, pattern, pairs=None, rails=None, storage=None, allow_uneven=False):
    """The findings of the rails a scheduled pair cannot test: one per pair whose numbers of rails (or, with
    ``storage``, of storage ports) differ, pinned on the host whose number is not the group's most common (else the
    one with fewer), and one per rail whose link layers differ. Compute findings are errors (warnings with
    ``allow_uneven``: rdma_allow_uneven_rails), storage ones warnings. Same arguments as :func:`steps`."""
    groups = hosts if isinstance(hosts, dict) else {"": hosts}
    _check_groups(groups, pattern, pairs)
    findings = []
    for role, given in (("compute", rails), ("storage", storage)):
        if given is None:
            continue
        severity = "warning" if role != "compute" or allow_uneven else "error"
        what = "compute rails" if role == "compute" else "storage ports"
        for _group, members, rounds in _group_rounds(groups, pattern, pairs):
            usual = _usual(len(_ports(given.get(h, 0))) for h in members)
            for client, server in [p for r in rounds for p in r]:
                mine, theirs = _ports(given.get(client, 0)), _ports(given.get(server, 0))
                if len(mine) != len(theirs):
                    few, many = (client, server) if len(mine) < len(theirs) else (server, client)
                    odd = [h for h in (client, server) if len(_ports(given.get(h, 0))) != usual]
                    host = odd[0] if len(odd) == 1 else few
                    findings.append(_uneven(host, few, many, _ports(given.get(few, 0)), _ports(given.get(many, 0)),
                                            role, what, severity))
                for index in range(min(len(mine), len(theirs))):
                    if index not in _common(mine, theirs):
                        findings.append(_mismatch(client, server, index, mine[index], theirs[index], role, severity))
    return findings


def _uneven(host, few, many, few_ports, many_ports, role, what, severity):
    left = list(range(len(few_ports), len(many_ports)))
    label = "rail" if role == "compute" else "storage port"
    finding = {
        "host": host, "severity": severity, "check": ROLE_CHECK[role], "peer": many if host == few else few,
        "expected": "%d %s, as %s has" % (len(many_ports), what, many) if host == few
        else "%d %s, as %s has" % (len(few_ports), what, few),
        "found": "%s has %d %s, %s has %d: %s %s of %s (%s) %s no peer and %s not tested" % (
            few, len(few_ports), what, many, len(many_ports), label + ("s" if len(left) > 1 else ""),
            ", ".join(str(i) for i in left), many, ", ".join(_name(many_ports[i], i, role) for i in left),
            "have" if len(left) > 1 else "has", "were" if len(left) > 1 else "was"),
        "cause": "the matrix (and NCCL, for the compute rails) pairs %s i of one host with %s i of the other, and the "
                 "two hosts have different numbers: a card or port missing, down or given another role "
                 "(rdma_port_roles) on one of them, or hosts built differently" % (label, label),
        "fix": "compare the two hosts' ports (`rdma link`, ansible_facts.rdma.ports_by_role): cable or enable the "
               "missing port, or correct rdma_port_roles%s" % (
                   "; set rdma_allow_uneven_rails=true if the fabric is built that way" if role == "compute" else ""),
    }
    if role == "compute":
        finding["rail"] = left[0] if left else len(few_ports)
    return finding


def _mismatch(client, server, index, mine, theirs, role, severity):
    label = "rail" if role == "compute" else "storage port"
    finding = {
        "host": client, "severity": severity, "check": ROLE_CHECK[role], "peer": server,
        "expected": "%s %d of one link layer on both hosts" % (label, index),
        "found": "%s %d is %s on %s (%s) and %s on %s (%s): not tested" % (
            label, index, _link_layer(mine), client, _name(mine, index, role), _link_layer(theirs), server,
            _name(theirs, index, role)),
        "cause": "an InfiniBand port cannot reach an Ethernet one: one of the ports runs the other link layer "
                 "(LINK_TYPE), or the ports' roles do not match between the hosts",
        "fix": "check the card's link type (hpcnet.rdma.firmware) and rdma_port_roles on both hosts",
    }
    if role == "compute":
        finding["rail"] = index
    return finding
