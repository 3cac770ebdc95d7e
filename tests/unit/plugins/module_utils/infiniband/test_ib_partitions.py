"""opensm partitions.conf parser / renderer, role input checks, IPoIB MTU and P_Key index (tests/fixtures/real)."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import ib_partitions as ib
from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import ib_partitions_render as ibr
from fixtures_path import real_fixtures

IB = real_fixtures() / "ib-stack"
G = "0x%016x"


def _text(name):
    return (IB / name).read_text()


def _examples(name):
    """The example lines of a doc excerpt (indented, as the doc prints them); prose lines become blank lines."""
    return "\n".join(line if line[:1] in (" ", "\t") else "" for line in _text(name).splitlines())


def _members(part):
    return [(m["selector"], m["membership"]) for m in part["members"]]


# ------------------------------------------------------------------------------------------------ real captures

def test_shipped_minimal_config_with_blanks_around_delimiters():
    (part,) = ib.parse_partitions(_text("partitions-conf-01.txt"))
    assert (part["name"], part["pkey"], part["ipoib"], part["line"]) == ("Default", 0x7FFF, True, 1)
    assert _members(part) == [("ALL", "full")]
    assert (part["mtu"], part["rate"], part["sl"], part["scope"], part["defmember"]) == (None, None, None, [], "limited")


def test_site_config_full_bit_pkeys_keep_low_15_bits():
    parts = ib.parse_partitions(_text("partitions-conf-02.txt"))
    assert [(p["name"], p["pkey"], p["ipoib"]) for p in parts] == [
        ("Default", 0x7FFF, True), ("DMZ", 0x0001, True), ("private0", 0x0002, True), ("private1", 0x0003, True),
        ("ipoib", 0x1000, True)]  # a partition literally named ipoib, 0x9000 -> 0x1000
    assert all(_members(p) == [("ALL", "full"), ("SELF", "full")] for p in parts)


def test_doc_examples():
    parts = ib.parse_partitions(_examples("partitions-conf-doc-01.txt"))
    assert [(p["line"], p["name"], p["pkey"], p["defmember"]) for p in parts] == [
        (4, "Default", 0x7FFF, "limited"), (5, "Default", 0x7FFF, "limited"), (7, "NewPartition", None, "limited"),
        (9, "YetAnotherOne", 0x300, "limited"), (10, "YetAnotherOne", 0x300, "limited"), (12, "ShareIO", 0x80, "full"),
        (14, "ShareIO", 0x80, "limited"), (16, "ShareIO", 0x80, "limited"), (17, "ShareIO", 0x80, "full"),
        (18, "ShareIO", 0x80, "full"), (21, "Default", 0x7FFF, "limited")]
    assert _members(parts[0]) == [("ALL", "limited"), ("SELF", "full")]
    assert _members(parts[1]) == [("ALL", "limited"), ("ALL_SWITCHES", "full"), ("SELF", "full")]
    assert parts[2]["ipoib"] is True
    assert _members(parts[2]) == [(G % 0x123456, "full"), (G % 0x3456789034, "limited"), (G % 0x2134AF2306, "limited")]
    assert parts[2]["members"][1]["guid"] == 0x3456789034  # "=limi" abbreviates limited
    assert _members(parts[4]) == [("ALL", "limited")]
    assert _members(parts[5]) == [(G % 0x123451, "full"), (G % 0x123452, "full")]
    assert _members(parts[6]) == [(G % 0x123453, "limited"), (G % 0x123454, "limited"), (G % 0x123455, "full")]
    assert _members(parts[7]) == [(G % 0x123456, "limited"), (G % 0x123457, "limited"), (G % 0x123458, "full")]
    assert _members(parts[9]) == [(G % 0x12345B, "full"), (G % 0x12345C, "limited"), (G % 0x12345D, "full")]


def test_doc_mgid_lines_continue_until_semicolon():
    last = ib.parse_partitions(_examples("partitions-conf-doc-01.txt"))[-1]
    assert last["ipoib"] is True and _members(last) == [("ALL", "full")]
    assert [g["mgid"] for g in last["mgroups"]] == [
        "ff12:401b::707", "ff12:601b::16", "ff12:401b::16", "ff12:601b::2", "ff12::1"]
    assert last["mgroups"][0]["sl"] == 1 and last["mgroups"][1]["sl"] is None
    assert {k: last["mgroups"][4][k] for k in ("sl", "q_key", "rate", "mtu")} == {
        "sl": 1, "q_key": 0xDEADBEEF, "rate": 3, "mtu": 2}


def test_doc_note_rule_is_prior_behaviour():
    text = _text("partitions-conf-doc-01.txt")
    rule = [line for line in text.splitlines() if line.startswith("Default=0x7fff,ipoib:ALL=full;")]
    (part,) = ib.parse_partitions(rule[0])
    assert (part["pkey"], part["ipoib"], _members(part)) == (0x7FFF, True, [("ALL", "full")])


def test_man_page_extra_colon_is_a_bad_portguid():
    """The man page's ``ShareIO = 0x80 : defmember=limited : ...`` (doc bug): opensm stops with bad PortGUID."""
    with pytest.raises(ib.PartitionConfigError, match="bad PortGUID 'defmember'") as err:
        ib.parse_partitions(_examples("partitions-conf-doc-02.txt"))
    assert err.value.line == 15
    fixed = _examples("partitions-conf-doc-02.txt").replace("0x80 : defmember=limited :", "0x80 , defmember=limited :")
    strip = [(p["name"], p["pkey"], p["defmember"], _members(p), p["mgroups"]) for p in ib.parse_partitions(fixed)]
    assert strip[:-1] == [(p["name"], p["pkey"], p["defmember"], _members(p), p["mgroups"])
                          for p in ib.parse_partitions(_examples("partitions-conf-doc-01.txt"))]
    assert strip[-1] == ("Default", 0x7FFF, "limited", [("ALL", "full")], [])  # the Note rule, indented here


def test_no_partition_definition_found_line_2():
    """opensm-stderr-partition-parse-error-sim-01: ``PARSE ERROR: line 2: no partition definition found``."""
    assert "PARSE ERROR: line 2: no partition definition found" in _text(
        "opensm-stderr-partition-parse-error-sim-01.txt")
    with pytest.raises(ib.PartitionConfigError, match=r"^line 2: no partition definition found") as err:
        ib.parse_partitions("Default=0x7fff,ipoib : ALL=full ;\nstorage=0x0002 ALL_CAS=full ;\n")
    assert err.value.line == 2


def test_bad_portguid_like_opensm():
    with pytest.raises(ib.PartitionConfigError, match="line 2: bad PortGUID '0xZZZZ'"):
        ib.parse_partitions("Default=0x7fff : ALL=full ;\nstorage=0x2 : ALL_CAS=full, 0xZZZZ=full ;\n")


def test_comment_only_file_is_an_error():
    """opensm-log-partition-comment-only-sim-01: such a file makes opensm retry with the default config."""
    assert "Partition configuration in error; retrying with default config" in _text(
        "opensm-log-partition-comment-only-sim-01.txt")
    with pytest.raises(ib.PartitionConfigError, match="no partition is defined"):
        ib.parse_partitions("# partitions managed elsewhere\n")
    with pytest.raises(ib.PartitionConfigError):
        ib.parse_partitions("")


# ------------------------------------------------------------------------------------------------ grammar details

def test_continuation_comments_and_abbreviations():
    parts = ib.parse_partitions(
        "# head\nstore = 0x8002 , ipoib , mtu=5 , rate=7 , sl=3 , scope=2 , scope=5 , defm=both :  # cont\n"
        "   ALL_C=f, 0x2c903000e0b72 = f,\n\tALL_S=lim , S ; x=0x5:NONE,,;0x300:ALL_C=b;\n")
    store, x, anon = parts
    assert (store["name"], store["pkey"], store["mtu"], store["rate"], store["sl"], store["scope"]) == (
        "store", 2, 5, 7, 3, [2, 5])
    assert store["defmember"] == "both"
    assert _members(store) == [("ALL_CAS", "full"), (G % 0x2C903000E0B72, "full"), ("ALL_SWITCHES", "limited"),
                               ("SELF", "both")]
    assert _members(x) == [] and x["pkey"] == 5 and x["line"] == 4
    assert (anon["name"], anon["pkey"], _members(anon)) == ("", 0x300, [("ALL_CAS", "both")])


def test_abbreviated_keywords():
    (part,) = ib.parse_partitions("p=0x10,ip,in : A=full, ALL_S, ALL_R=l, SE=f ;")
    assert part["ipoib"] and part["indx0"]
    assert _members(part) == [("ALL", "full"), ("ALL_SWITCHES", "limited"), ("ALL_ROUTERS", "limited"),
                              ("SELF", "full")]


def test_decimal_and_octal_guids():
    (part,) = ib.parse_partitions("p=0x10 : 1193046=full, 0777 ;")
    assert [m["guid"] for m in part["members"]] == [0x123456, 0o777]


@pytest.mark.parametrize("text,message", [
    ("p=0x12345 : ALL ;", "not a 16-bit number"),
    ("p=0x8000 : ALL ;", "no partition bits"),
    ("p=12ab : ALL ;", "bad partition definition"),
    ("p=0x10,foo=1 : ALL ;", "unrecognized partition flag 'foo'"),
    ("p=0x10,, : ALL ;", "empty flag"),
    ("p=0x10,mtu=4096 : ALL ;", r"that is bytes; the code is 5"),
    ("p=0x10,mtu=0 : ALL ;", "flag 'mtu' needs an IB MTU code"),
    ("p=0x10,rate=40 : ALL ;", "flag 'rate' needs an IB rate code"),
    ("p=0x10,sl=16 : ALL ;", "flag 'sl' needs a service level 0-15"),
    ("p=0x10,sl : ALL ;", "flag 'sl'"),
    ("p=0x10,scope=0 : ALL ;", "flag 'scope'"),
    ("p=0x10,defmember=x : ALL ;", "flag 'defmember' requires full, limited or both"),
    ("p=0x10,FlowLabel=0x100000 : ALL ;", "FlowLabel"),
    ("p=0x10 : ALL=fool ;", "unrecognized port flag 'fool'"),
    ("p=0x10 : all=full ;", "bad PortGUID 'all'"),
    ("p=0x10 : 0 ;", "bad PortGUID '0'"),
    ("p=0x10 : 0x10000000000000000 ;", "bad PortGUID"),
    ("p=0x10 :\nmgid=10.0.0.1 ;", "line 2: .*gid is not multicast"),
    ("p=0x10 :\nmgid=fe80::1 ;", "gid is not multicast"),
    ("p=0x10 :\nmgid=ff12::1,color=red ;", "unrecognized mgroup flag 'color'"),
    ("p=0x10,ipoib,rate=7 :\nmgid=ff12:401b::1,rate=3\n;", r"invalid rate \(3\)"),
    ("p=0x10,ipoib :\nmgid=ff12:401b::1,mtu=5\n;", r"invalid mtu \(5\)"),
    ("p=0x10,ipoib :\nmgid=ff12:401b:0011::1\n;", "invalid pkey 0x0011"),
])
def test_parse_errors(text, message):
    with pytest.raises(ib.PartitionConfigError, match=message):
        ib.parse_partitions(text)


def test_ip_mgroup_with_matching_pkey_and_other_groups():
    (part,) = ib.parse_partitions("p=0x10,ipoib,mtu=5 :\nmgid=ff12:401b:0010::1\nmgid=ff12::2,mtu=2,rate=6\nALL;")
    assert [g["mgid"] for g in part["mgroups"]] == ["ff12:401b:10::1", "ff12::2"]
    assert _members(part) == [("ALL", "limited")]


def test_mgid_consumes_the_rest_of_its_line():
    """Members after an mgid entry on the same line are its flags (opensm), here an unrecognized flag."""
    with pytest.raises(ib.PartitionConfigError, match="unrecognized mgroup flag 'ALL'"):
        ib.parse_partitions("p=0x10 : mgid=ff12::1, ALL=full ;")


# ------------------------------------------------------------------------------------------------ tables

def test_mtu_codes():
    assert ib.MTU_CODES == {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
    assert [ib.mtu_code(size) for size in (256, 512, 1024, 2048, 4096)] == [1, 2, 3, 4, 5]
    assert ib.mtu_code("4096") == 5
    for bad in (0, 1500, 9000, "big", True, None):
        with pytest.raises(ib.PartitionConfigError, match="allowed \\(bytes\\): 256, 512, 1024, 2048, 4096"):
            ib.mtu_code(bad)


def test_rate_codes_as_ib_types_h():
    """IB_PATH_RECORD_RATE_<n>_GBS of opensm include/iba/ib_types.h (and rdma-core libibmad/iba_types.h)."""
    expected = {2: 2.5, 3: 10, 4: 30, 5: 5, 6: 20, 7: 40, 8: 60, 9: 80, 10: 120, 11: 14, 12: 56, 13: 112, 14: 168,
                15: 25, 16: 100, 17: 200, 18: 300, 19: 28, 20: 50, 21: 400, 22: 600}
    assert ib.RATE_GBPS == expected
    assert all(ib.rate_code(rate) == code for code, rate in expected.items())
    assert ib.rate_code("2.5") == 2 and ib.rate_code(40.0) == 7 and ib.rate_code("100") == 16
    for bad in (1, 3, 800, "fast", True, None):
        with pytest.raises(ib.PartitionConfigError, match="allowed \\(Gb/s\\): 2.5, 5, 10, 14"):
            ib.rate_code(bad)


# ------------------------------------------------------------------------------------------------ render

ROLE = [
    {"name": "storage", "pkey": "0x8002", "ipoib": True, "mtu": 4096, "rate": 200, "sl": 1,
     "members": [{"selector": "ALL_CAS", "membership": "full"},
                 {"selector": "0002:c903:000e:0b72", "membership": "limited"}]},
    {"name": "mgmt", "pkey": 3, "members": [{"selector": "SELF", "membership": "both"},
                                            {"selector": 0x0002C903000E0B73, "membership": "full"}]},
    {"name": "compute", "pkey": 0x0001, "ipoib": True, "mtu": 2048, "rate": 2.5,
     "members": [{"selector": "ALL_SWITCHES", "membership": "full"}, {"selector": "ALL", "membership": "limited"}]},
]


def test_render_text():
    assert ibr.check_partitions(ROLE) == []
    text = ibr.render_partitions(ROLE)
    assert text.splitlines()[2:] == [
        "Default=0x7fff,ipoib : ALL=full ;",
        "compute=0x0001,ipoib,mtu=4,rate=2 : ALL_SWITCHES=full, ALL=limited ;",
        "storage=0x0002,ipoib,mtu=5,rate=17,sl=1 : ALL_CAS=full, 0x0002c903000e0b72=limited ;",
        "mgmt=0x0003 : SELF=both, 0x0002c903000e0b73=full ;",
    ]
    assert all(line.startswith("# ") for line in text.splitlines()[:2]) and text.endswith(";\n")
    assert ibr.render_partitions(list(reversed(ROLE))) == text  # deterministic


def test_render_own_default_first_or_none():
    own = {"name": "Default", "pkey": 0x7FFF, "ipoib": True, "mtu": 4096,
           "members": [{"selector": "ALL", "membership": "full"}, {"selector": "SELF", "membership": "full"}]}
    lines = ibr.render_partitions(ROLE[:1] + [own]).splitlines()[2:]
    assert lines == ["Default=0x7fff,ipoib,mtu=5 : ALL=full, SELF=full ;",
                     "storage=0x0002,ipoib,mtu=5,rate=17,sl=1 : ALL_CAS=full, 0x0002c903000e0b72=limited ;"]
    assert ibr.render_partitions(ROLE[1:2], default=None).splitlines()[2:] == [
        "mgmt=0x0003 : SELF=both, 0x0002c903000e0b73=full ;"]
    assert ibr.render_partitions([{"name": "empty", "pkey": 9}], default=None).splitlines()[2:] == ["empty=0x0009 : ;"]


def test_render_round_trips_through_parse():
    text = ibr.render_partitions(ROLE)
    parsed = ib.parse_partitions(text)
    back = [ibr.to_role_partition(p) for p in parsed]
    assert back[0] == {"name": "Default", "pkey": 0x7FFF, "ipoib": True, "mtu": None, "rate": None, "sl": None,
                       "members": [{"selector": "ALL", "membership": "full"}]}
    assert back[2] == {"name": "storage", "pkey": 2, "ipoib": True, "mtu": 4096, "rate": 200, "sl": 1,
                       "members": [{"selector": "ALL_CAS", "membership": "full"},
                                   {"selector": "0x0002c903000e0b72", "membership": "limited"}]}
    assert ibr.render_partitions(back) == text


@pytest.mark.parametrize("name", ["partitions-conf-01.txt", "partitions-conf-02.txt"])
def test_real_files_round_trip(name):
    parsed = ib.parse_partitions(_text(name))
    text = ibr.render_partitions([ibr.to_role_partition(p) for p in parsed])
    assert [ibr.to_role_partition(p) for p in ib.parse_partitions(text)] == sorted(
        [ibr.to_role_partition(p) for p in parsed], key=lambda p: (p["pkey"] != 0x7FFF, p["pkey"]))


def test_every_rate_and_mtu_round_trips():
    for rate, code in ib.RATE_CODES.items():
        for size, mcode in ib.MTU_CODES.items():
            part = {"name": "p", "pkey": 5, "ipoib": True, "mtu": size, "rate": rate, "sl": 15,
                    "members": [{"selector": "ALL", "membership": "full"}]}
            parsed = ib.parse_partitions(ibr.render_partitions([part], default=None))[0]
            assert (parsed["rate"], parsed["mtu"], parsed["sl"]) == (code, mcode, 15)
            assert ibr.to_role_partition(parsed) == part


def test_render_refuses_bad_input():
    with pytest.raises(ib.PartitionConfigError, match="mtu 9000 is not an IB MTU"):
        ibr.render_partitions([{"name": "p", "pkey": 5, "mtu": 9000, "members": []}])
    with pytest.raises(ib.PartitionConfigError, match="pkey 0x8005 is the partition of 'p'"):
        ibr.render_partitions([{"name": "p", "pkey": 5}, {"name": "q", "pkey": 0x8005}])
    with pytest.raises(ib.PartitionConfigError, match="name is used twice"):
        ibr.render_partitions([{"name": "Default", "pkey": 5}])


# ------------------------------------------------------------------------------------------------ check

def _one(part):
    return ibr.check_partitions([dict({"name": "p", "pkey": 5}, **part)])


@pytest.mark.parametrize("part,message", [
    ({"pkey": 0x7FFF}, r"partitions\[0\] \(p\): pkey 0x7fff is the default partition .*allowed: 0x0001-0x7ffe"),
    ({"pkey": 0xFFFF}, "pkey 0xffff is the default partition"),
    ({"pkey": 0}, "pkey 0x0000 is outside 0x0001-0x7ffe"),
    ({"pkey": 0x8000}, "pkey 0x8000 is outside 0x0001-0x7ffe"),
    ({"pkey": 0x10000}, "pkey 65536 is not a P_Key; allowed: 0x0001-0x7ffe"),
    ({"pkey": "two"}, "pkey 'two' is not a P_Key"),
    ({"pkey": None}, "pkey None is not a P_Key"),
    ({"mtu": 1500}, r"\(p\): mtu 1500 is not an IB MTU; allowed \(bytes\): 256, 512, 1024, 2048, 4096"),
    ({"rate": 3}, r"\(p\): rate 3 is not an IB rate; allowed \(Gb/s\): 2.5, 5, 10, 14, 20, 25, 28, 30, 40"),
    ({"sl": 16}, r"\(p\): sl 16 is not a service level; allowed: 0-15"),
    ({"sl": -1}, "sl -1 is not a service level"),
    ({"ipoib": "yes"}, "ipoib must be true or false"),
    ({"name": "9lives"}, "name '9lives' must be a word"),
    ({"name": "a b"}, "name 'a b' must be a word"),
    ({"name": None}, "name None must be a word"),
    ({"color": "red"}, "unknown keys color; allowed: name, pkey"),
    ({"members": "ALL"}, "members must be a list"),
    ({"members": ["ALL"]}, r"members\[0\]: must be a map \{selector, membership\}"),
    ({"members": [{"selector": "ALL_HOSTS", "membership": "full"}]},
     r"\(p\) members\[0\]: selector 'ALL_HOSTS' is not one of ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF or a "
     r"port GUID"),
    ({"members": [{"selector": "node01", "membership": "full"}]}, "selector 'node01'"),
    ({"members": [{"selector": "0x0", "membership": "full"}]}, "selector '0x0'"),
    ({"members": [{"selector": "all", "membership": "full"}]}, "selector 'all'"),
    ({"members": [{"selector": "ALL", "membership": "partial"}]},
     r"members\[0\]: membership 'partial'; allowed: full, limited, both"),
    ({"members": [{"selector": "ALL"}]}, "membership None; allowed: full, limited, both"),
    ({"members": [{"selector": "SELF", "membership": "full"}, {"selector": "SELF", "membership": "limited"}]},
     r"members\[1\]: selector SELF is listed twice"),
])
def test_check_errors(part, message):
    errors = _one(part)
    assert len(errors) == 1, errors
    assert __import__("re").search(message, errors[0]), errors[0]


def test_check_duplicates():
    errors = ibr.check_partitions([
        {"name": "a", "pkey": 2}, {"name": "b", "pkey": 0x8002}, {"name": "a", "pkey": 4}, {"name": "c", "pkey": 4}])
    assert errors == [
        "partitions[1] (b): pkey 0x8002 is the partition of partitions[0] (P_Keys that differ only in the "
        "full-membership bit 0x8000 are one partition)",
        "partitions[2] (a): name 'a' is already used by partitions[0]",
        "partitions[3] (c): pkey 0x0004 is the partition of partitions[2] (P_Keys that differ only in the "
        "full-membership bit 0x8000 are one partition)",
    ]


def test_check_shapes():
    assert ibr.check_partitions({"name": "a"})[0].startswith("partitions must be a list")
    assert ibr.check_partitions(["a"])[0].startswith("partitions[0]: must be a map")
    assert ibr.check_partitions([]) == []
    assert ibr.check_partitions([{"name": "a", "pkey": "0x7ffe", "rate": "2.5", "sl": 0}]) == []


# ------------------------------------------------------------------------------------------------ IPoIB / P_Key index

def test_ipoib_mtu_limit():
    assert ib.ipoib_mtu_limit(4096, "datagram") == 4092
    assert ib.ipoib_mtu_limit(2048, "datagram") == 2044
    assert [ib.ipoib_mtu_limit(size, "datagram") for size in (256, 512, 1024)] == [252, 508, 1020]
    assert ib.ipoib_mtu_limit(2048, "connected") == ib.ipoib_mtu_limit(4096, "connected") == 65520
    with pytest.raises(ib.PartitionConfigError, match="mode 'cm' is not an IPoIB mode; allowed: datagram, connected"):
        ib.ipoib_mtu_limit(4096, "cm")
    with pytest.raises(ib.PartitionConfigError, match="partition mtu 4092 is not an IB MTU"):
        ib.ipoib_mtu_limit(4092, "datagram")


def test_pkey_index_sysfs_captures():
    """sysfs pkeys/0 = 0x800b (Azure tenant, full), pkeys/1 = 0x7fff (default, limited)."""
    table = [_text("sysfs-pkey-index0-01.txt").strip(), _text("sysfs-pkey-index1-01.txt").strip()]
    assert table == ["0x800b", "0x7fff"]
    assert ib.pkey_index(table, 0x800B) == 0
    assert ib.pkey_index(table, 0x000B) == 0
    assert ib.pkey_index(table, "0x000b") == 0
    assert ib.pkey_index(table, 0x7FFF) == 1
    assert ib.pkey_index(table, 0xFFFF) == 1
    assert ib.pkey_index(table, 0x8002) is None
    assert ib.pkey_index({"0": "0x800b", "1": "0x7fff"}, 0x7FFF) == 1


def test_pkey_index_smpquery_table_after_default_retry():
    table = ib.parse_smpquery_pkeys(_text("smpquery-pkeys-after-default-retry-sim-01.txt"))
    assert table["capacity"] == 64 and len(table["pkeys"]) == 64
    assert table["pkeys"][0] == 0xFFFF and set(table["pkeys"][1:]) == {0}
    assert ib.pkey_index(table["pkeys"], 0x7FFF) == 0
    assert ib.pkey_index(table["pkeys"], 0x8002) is None  # the storage partition is gone


def test_pkey_index_prefers_exact_then_full_and_skips_holes():
    assert ib.pkey_index(["0xffff", "0x0000", "0x8002"], 0x0002) == 2
    assert ib.pkey_index(["0xffff", "0x0002", "0x8002"], 0x0002) == 1
    assert ib.pkey_index(["0xffff", "0x0002", "0x8002"], 0x8002) == 2
    assert ib.pkey_index(["0xffff", "0x0002", "0x8002"], 0x0102) is None
    assert ib.pkey_index([], 0x8002) is None
    for bad in (0, 0x8000, 0x10000, "x"):
        with pytest.raises(ib.PartitionConfigError, match="is not a P_Key"):
            ib.pkey_index(["0xffff"], bad)


def test_member_pkeys_by_selector_guid_self_and_membership():
    conf = ("Default=0x7fff, ipoib : ALL=full ;\n"
            "compute=0x0002 : ALL_CAS=limited, 0x0000000000000011=full ;\n"
            "storage=0x0003 : 0x0000000000000012 ;\n"
            "mgmt=0x0004 : SELF=both ;\n"
            "switches=0x0005 : ALL_SWITCHES=full ;\n")
    parts = ib.parse_partitions(conf)
    # a later entry for a port replaces an earlier one (opensm: "Will overwrite"); SELF is the elected master's port,
    # which the file cannot tell, so it is never counted; switches are not CA ports
    assert ib.member_pkeys(parts, "0x0000000000000011") == ["0x8002", "0xffff"]
    assert ib.member_pkeys(parts, 0x12) == ["0x0002", "0x0003", "0xffff"]
    assert ib.member_pkeys(parts, "0x0000000000000013") == ["0x0002", "0xffff"]
