"""perftest round scheduling: every pair exactly once, disjoint within a round, the documented number of rounds."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, strategies as st

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import perftest_rounds
from ansible_collections.hpcnet.rdma.plugins.filter.verify import perftest_rounds as rounds_filter
from ansible.errors import AnsibleFilterError


def _hosts(n):
    return ["node%02d" % i for i in range(1, n + 1)]


def _assert_disjoint(rounds):
    for pairs in rounds:
        used = [h for pair in pairs for h in pair]
        assert len(used) == len(set(used)), pairs


@pytest.mark.parametrize("n", range(2, 41))
def test_all_pairs_every_pair_once_disjoint_and_n_minus_1_rounds(n):
    hosts = _hosts(n)
    rounds = perftest_rounds.schedule(hosts, "all_pairs")
    _assert_disjoint(rounds)
    tested = [frozenset(p) for r in rounds for p in r]
    assert sorted(tested, key=sorted) == sorted({frozenset(p) for p in itertools.combinations(hosts, 2)}, key=sorted)
    assert len(tested) == len(set(tested))
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    # every round is as full as it can be
    assert all(len(r) == n // 2 for r in rounds)


@pytest.mark.parametrize("n", [4, 8, 16])
def test_all_pairs_balances_clients_and_servers(n):
    rounds = perftest_rounds.schedule(_hosts(n), "all_pairs")
    clients = [p[0] for r in rounds for p in r]
    counts = {h: clients.count(h) for h in _hosts(n)}
    assert max(counts.values()) - min(counts.values()) <= n // 2


@pytest.mark.parametrize("n", range(3, 41))
def test_ring_each_host_tests_its_successor(n):
    hosts = _hosts(n)
    rounds = perftest_rounds.schedule(hosts, "ring")
    _assert_disjoint(rounds)
    tested = sorted(tuple(p) for r in rounds for p in r)
    assert tested == sorted((hosts[i], hosts[(i + 1) % n]) for i in range(n))
    assert len(rounds) == (2 if n % 2 == 0 else 3)


def test_ring_of_four_exact_rounds():
    assert perftest_rounds.schedule(["a", "b", "c", "d"], "ring") == [[["a", "b"], ["c", "d"]], [["b", "c"], ["d", "a"]]]


def test_two_hosts_one_round_one_pair_and_one_host_none():
    assert perftest_rounds.schedule(["a", "b"], "ring") == [[["a", "b"]]]
    assert perftest_rounds.schedule(["a", "b"], "all_pairs") == [[["a", "b"]]]
    assert perftest_rounds.schedule(["a"], "ring") == []
    assert perftest_rounds.schedule(["a"], "all_pairs") == []


def test_pairs_packed_into_disjoint_rounds_in_given_order():
    pairs = [["a", "b"], ["c", "d"], ["a", "c"], ["b", "d"], ["e", "a"]]
    rounds = perftest_rounds.schedule(["a", "b", "c", "d", "e"], "pairs", pairs)
    _assert_disjoint(rounds)
    assert sorted(tuple(p) for r in rounds for p in r) == sorted(tuple(p) for p in pairs)
    assert len(rounds) == 3  # host a is in three pairs


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=30))
def test_pairs_packing_property(raw):
    hosts = _hosts(10)
    pairs, seen = [], set()
    for a, b in raw:
        if a != b and frozenset((a, b)) not in seen:
            seen.add(frozenset((a, b)))
            pairs.append([hosts[a], hosts[b]])
    if not pairs:
        return
    rounds = perftest_rounds.schedule(hosts, "pairs", pairs)
    _assert_disjoint(rounds)
    assert sorted(tuple(p) for r in rounds for p in r) == sorted(tuple(p) for p in pairs)
    degree = max(sum(h in p for p in pairs) for h in hosts)
    assert degree <= len(rounds) <= 2 * degree - 1


@pytest.mark.parametrize("pattern,pairs,message", [
    ("star", None, r"verify_perftest_pattern must be one of: ring, all_pairs, pairs; got 'star'"),
    ("pairs", None, r"verify_perftest_pairs must be a non-empty list"),
    ("pairs", [["a", "z"]], r"verify_perftest_pairs\[0\] names z, not a host of this run \(hosts: a, b, c\)"),
    ("pairs", [["a", "a"]], r"verify_perftest_pairs\[0\] tests a against itself"),
    ("pairs", [["a", "b"], ["b", "a"]], r"verify_perftest_pairs\[1\] repeats the pair b / a"),
    ("pairs", [["a"]], r"verify_perftest_pairs\[0\] must be \[client, server\]"),
])
def test_bad_input_names_the_field(pattern, pairs, message):
    with pytest.raises(ValueError, match=message):
        perftest_rounds.schedule(["a", "b", "c"], pattern, pairs)
    with pytest.raises(AnsibleFilterError, match=message):
        rounds_filter(["a", "b", "c"], pattern, pairs)


def test_filter_steps_rail_by_rail_on_the_rails_both_hosts_have():
    steps = rounds_filter(["a", "b", "c", "d"], "ring", rails={"a": 2, "b": 2, "c": 2, "d": 1})
    assert steps == [
        {"round": 0, "rail": 0, "pairs": [["a", "b"], ["c", "d"]]},
        {"round": 0, "rail": 1, "pairs": [["a", "b"]]},
        {"round": 1, "rail": 0, "pairs": [["b", "c"], ["d", "a"]]},
        {"round": 1, "rail": 1, "pairs": [["b", "c"]]},
    ]
    assert rounds_filter(["a", "b"], "ring") == [{"round": 0, "rail": 0, "pairs": [["a", "b"]]}]


def test_filter_schedules_each_fabric_on_its_own_and_runs_them_together():
    steps = rounds_filter({"infiniband": ["i1", "i2"], "roce": ["r1", "r2", "r3", "r4"]}, "ring",
                          rails={h: 1 for h in ["i1", "i2", "r1", "r2", "r3", "r4"]})
    assert steps == [
        {"round": 0, "rail": 0, "pairs": [["i1", "i2"], ["r1", "r2"], ["r3", "r4"]]},
        {"round": 1, "rail": 0, "pairs": [["r2", "r3"], ["r4", "r1"]]},
    ]


def test_filter_pairs_across_fabrics_refused():
    with pytest.raises(AnsibleFilterError, match=r"verify_perftest_pairs\[0\] spans two fabrics \(i1 in infiniband, r1 in roce\)"):
        rounds_filter({"infiniband": ["i1", "i2"], "roce": ["r1", "r2"]}, "pairs", [["i1", "r1"]])
    steps = rounds_filter({"infiniband": ["i1", "i2"], "roce": ["r1", "r2"]}, "pairs", [["r2", "r1"]])
    assert steps == [{"round": 0, "rail": 0, "pairs": [["r2", "r1"]]}]
