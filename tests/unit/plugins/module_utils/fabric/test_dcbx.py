"""The IEEE 802.1Qaz decoder (fabric/dcbx.py): hand-built TLVs laid out as 802.1Q annex D gives them, the octets of a
real Spectrum-4 switch as lldpcli printed them, truncated and malformed TLVs, and a fuzz test."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import dcbx
from fixtures_path import real_fixtures

LLDP = real_fixtures() / "lldp"
_TLV_LINE = re.compile(r"TLV:\s+OUI: (?P<oui>[0-9A-F,]+), SubType: (?P<subtype>\d+), Len: (?P<len>\d+) ?(?P<value>\S*)")


def _hex(octets) -> str:
    """Octets as lldpcli prints an information string: upper-case hex joined by commas."""
    return ",".join("%02X" % o for o in octets)


def _tlv(subtype, octets, oui="00,80,C2"):
    return {"oui": oui, "subtype": str(subtype), "len": str(len(octets)), "value": _hex(octets)}


def _capture_tlvs(name):
    """The Unknown TLVs lines of a plain-text lldpcli capture, as {oui, subtype, len, value}."""
    text = (LLDP / name).read_text(encoding="utf-8")
    return [m.groupdict() for m in _TLV_LINE.finditer(text)]


# ------------------------------------------------------------------------------------------ the standard's layout
def test_pfc_configuration_bits():
    # octet 0: Willing=1 (bit 7) | MBC=1 (bit 6) | reserved 00 | PFC cap 0100 (4)
    # octet 1: PFC Enable 0001 1000: priorities 3 and 4
    got = dcbx.decode_pfc(bytearray([0b11000100, 0b00011000]))
    assert got == ({"willing": True, "mbc": True, "cap": 4, "enabled": [3, 4]}, [])


def test_pfc_enable_bit_n_is_priority_n():
    for prio in range(8):
        pfc, _ = dcbx.decode_pfc(bytearray([0x08, 1 << prio]))
        assert pfc["enabled"] == [prio]


def test_ets_configuration_layout():
    data = bytearray(
        [0b11000011]                                    # Willing=1, CBS=1, reserved 000, Max TCs 011 (3)
        + [0x01, 0x23, 0x45, 0x67]                      # priority n -> TC n (priority 0 in the high nibble)
        + [10, 20, 30, 40, 0, 0, 0, 0]                  # TC bandwidth %, TC 0..7
        + [2, 2, 2, 2, 0, 1, 255, 0])                   # TSA: ETS x4, strict, CBS, vendor, strict
    ets, problems = dcbx.decode_ets_config(data)
    assert ets == {"willing": True, "cbs": True, "max_tcs": 3, "prio_tc": [0, 1, 2, 3, 4, 5, 6, 7],
                   "tc_bw": [10, 20, 30, 40, 0, 0, 0, 0],
                   "tc_tsa": ["ets", "ets", "ets", "ets", "strict", "cbs", "vendor", "strict"]}
    assert problems == []


def test_ets_max_tcs_zero_means_eight():
    ets, _ = dcbx.decode_ets_config(bytearray([0x00] + [0] * 4 + [100] + [0] * 7 + [2] + [0] * 7))
    assert ets["max_tcs"] == 8


def test_ets_recommendation_ignores_the_reserved_octet():
    data = bytearray([0xFF] + [0x10, 0x00, 0x00, 0x00] + [0, 100] + [0] * 6 + [0, 2] + [0] * 6)
    reco, problems = dcbx.decode_ets_reco(data)
    assert reco == {"reco_prio_tc": [1, 0, 0, 0, 0, 0, 0, 0], "reco_tc_bw": [0, 100, 0, 0, 0, 0, 0, 0],
                    "reco_tc_tsa": ["strict", "ets", "strict", "strict", "strict", "strict", "strict", "strict"]}
    assert problems == []


def test_app_entries_priority_selector_protocol():
    data = bytearray([0x00,                             # reserved
                      0b01100101, 0x00, 26,             # priority 3 | reserved 00 | Sel 101 (DSCP); DSCP 26
                      0b01100011, 0x12, 0xB7,           # priority 3, Sel 011 (UDP/DCCP); port 4791
                      0b11000001, 0x89, 0x06])          # priority 6, Sel 001 (Ethertype); 0x8906 (FCoE)
    app, problems = dcbx.decode_app(data)
    assert app == [
        {"selector": 5, "selector_name": "dscp", "protocol": 26, "priority": 3},
        {"selector": 3, "selector_name": "udp_dccp", "protocol": 4791, "priority": 3},
        {"selector": 1, "selector_name": "ethertype", "protocol": 0x8906, "priority": 6},
    ]
    assert problems == []


def test_app_priorities_lookup():
    got = dcbx.decode([_tlv(12, [0, 0x65, 0, 26, 0x84, 0x12, 0xB7, 0x63, 0x12, 0xB7])])
    assert dcbx.app_priorities(got, [dcbx.SEL_DSCP], 26) == [3]
    assert dcbx.app_priorities(got, dcbx.UDP_SELECTORS, dcbx.ROCE_V2_UDP_PORT) == [3, 4]
    assert dcbx.app_priorities(got, [dcbx.SEL_DSCP], 46) == []
    assert dcbx.app_priorities(None, [dcbx.SEL_DSCP], 26) == []


# ------------------------------------------------------------------------------------------------- real captures
def test_spectrum4_cumulus_capture():
    tlvs = _capture_tlvs("lldpcli-neighbors-cumulus-sn5600-01.txt")
    assert len(tlvs) == 4
    got = dcbx.decode(tlvs)
    assert got["pfc"] == {"willing": False, "mbc": False, "cap": 8, "enabled": [3]}
    assert got["app"] == [{"selector": 3, "selector_name": "udp_dccp", "protocol": 4791, "priority": 3}]
    assert got["ets"] == {
        "willing": False, "cbs": False, "max_tcs": 8,
        "prio_tc": [0, 0, 0, 3, 0, 0, 6, 0], "tc_bw": [50, 0, 0, 50, 0, 0, 0, 0],
        "tc_tsa": ["ets"] * 6 + ["strict", "ets"],
        "reco_prio_tc": [0, 0, 0, 3, 0, 0, 6, 0], "reco_tc_bw": [50, 0, 0, 50, 0, 0, 0, 0],
        "reco_tc_tsa": ["ets"] * 6 + ["strict", "ets"]}
    assert got["problems"] == []
    # the switch maps RoCE's UDP port, not its DSCP
    assert dcbx.app_priorities(got, dcbx.UDP_SELECTORS, 4791) == [3]
    assert dcbx.app_priorities(got, [dcbx.SEL_DSCP], 26) == []


# ----------------------------------------------------------------------------------------- what is not DCBX
def test_no_dcbx_tlv_is_none():
    assert dcbx.decode([]) is None
    assert dcbx.decode(None) is None
    # another organisation's TLV, and an 802.1 TLV that is not 802.1Qaz (PVID subtype 1, PPVID 2)
    assert dcbx.decode([_tlv(2, [1, 2, 3], oui="00,1B,21"), _tlv(1, [0, 100]), _tlv(6, [0, 0x64])]) is None


@pytest.mark.parametrize("oui", ["00,80,C2", "00,80,c2", "00-80-C2", "00:80:c2"])
def test_oui_spellings(oui):
    assert dcbx.is_dcbx_tlv(oui, "11")
    assert not dcbx.is_dcbx_tlv(oui, "8")


# ----------------------------------------------------------------------------------- truncated and malformed
@pytest.mark.parametrize("subtype,octets,key", [
    (11, [0x08], "pfc"),
    (9, [0x00] * 20, "ets"),
    (10, [0x00] * 5, "ets"),
])
def test_truncated_tlv_is_a_problem_not_a_value(subtype, octets, key):
    got = dcbx.decode([_tlv(subtype, octets)])
    assert got[key] is None
    assert len(got["problems"]) == 1
    assert "expected; not decoded" in got["problems"][0]
    assert "subtype %d" % subtype in got["problems"][0]


def test_app_with_a_partial_entry_keeps_the_whole_ones():
    got = dcbx.decode([_tlv(12, [0x00, 0x65, 0x00, 26, 0x63, 0x12])])
    assert got["app"] == [{"selector": 5, "selector_name": "dscp", "protocol": 26, "priority": 3}]
    assert "not a whole number of 3-octet entries" in got["problems"][0]


def test_app_reserved_selector_and_dscp_out_of_range():
    got = dcbx.decode([_tlv(12, [0x00, 0x66, 0x00, 1, 0x65, 0x00, 64])])
    assert [e["selector_name"] for e in got["app"]] == ["reserved", "dscp"]
    assert len(got["problems"]) == 2


def test_empty_app_is_a_problem():
    got = dcbx.decode([{"oui": "00,80,C2", "subtype": "12", "len": "0"}])
    assert got["app"] == [] and got["problems"]


def test_value_not_hex():
    got = dcbx.decode([{"oui": "00,80,C2", "subtype": "11", "len": "2", "value": "08,ZZ"}])
    assert got["pfc"] is None
    assert "not hexadecimal" in got["problems"][0]


def test_len_disagreeing_with_the_octets():
    got = dcbx.decode([{"oui": "00,80,C2", "subtype": "11", "len": "3", "value": "08,08"}])
    assert got["pfc"]["enabled"] == [3]
    assert "lldpcli says 3 octets and prints 2" in got["problems"][0]


def test_repeated_tlv_first_counts():
    got = dcbx.decode([_tlv(11, [0x08, 0x08]), _tlv(11, [0x08, 0x10])])
    assert got["pfc"]["enabled"] == [3]
    assert "more than once" in got["problems"][0]


def test_ets_shares_not_100_and_reserved_tc():
    data = [0x00, 0x09, 0x00, 0x00, 0x00] + [40, 40] + [0] * 6 + [2, 2] + [0] * 6
    got = dcbx.decode([_tlv(9, data)])
    assert any("add up to 80%" in p for p in got["problems"])
    assert any("priorities [1] assigned to a reserved TC" in p for p in got["problems"])


def test_pfc_on_more_priorities_than_its_cap():
    got = dcbx.decode([_tlv(11, [0x01, 0x18])])
    assert got["pfc"]["enabled"] == [3, 4]
    assert "more than the 1" in got["problems"][0]


# ---------------------------------------------------------------------------------------------------- fuzz
_TLVS = st.lists(st.fixed_dictionaries({
    "oui": st.sampled_from(["00,80,C2", "00,12,0F", "00-80-c2", "", "zz"]),
    "subtype": st.one_of(st.sampled_from(["9", "10", "11", "12", "1"]), st.text(max_size=3)),
    "len": st.one_of(st.none(), st.text(max_size=3), st.integers(0, 40).map(str)),
    "value": st.one_of(st.none(), st.text(max_size=20),
                       st.lists(st.integers(0, 255), max_size=30).map(_hex)),
}), max_size=6)


@settings(max_examples=300, deadline=None)
@given(_TLVS)
def test_decode_never_raises_and_keeps_its_shape(tlvs):
    got = dcbx.decode(tlvs)
    if got is None:
        return
    assert set(got) == {"pfc", "app", "ets", "problems"}
    assert all(isinstance(p, str) for p in got["problems"])
    for entry in got["app"]:
        assert 0 <= entry["priority"] <= 7 and 0 <= entry["protocol"] <= 0xFFFF
    if got["pfc"]:
        assert all(0 <= p <= 7 for p in got["pfc"]["enabled"])
