"""mlxconfig / mstconfig parsers and the plan, on the real captures (tests/fixtures/real)."""

from __future__ import annotations

import random
import re

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware import mlxconfig as mc
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import card_port
from fixtures_path import real_fixtures

REAL = real_fixtures()
QUERIES = ["rdma-outputs/mlxconfig-query-0%d.txt" % n for n in range(1, 6)] + [
    "qos-firmware/mlxconfig-query-02.txt", "qos-firmware/mstconfig-query-01.txt"]
SETS = ["rdma-outputs/mlxconfig-set-01.txt", "qos-firmware/mlxconfig-set-01.txt", "qos-firmware/mlxconfig-set-02.txt",
        "qos-firmware/mstconfig-set-01.txt", "qos-firmware/mstconfig-set-02.txt"]
ROW = re.compile(r"^[* ]\s*[A-Z][A-Z0-9_\[\].]*\s+\S")


def _text(name):
    return (REAL / name).read_text()


def _query(name):
    return mc.parse_query(_text(name))


@pytest.mark.parametrize("name", QUERIES)
def test_every_table_row_is_a_parameter(name):
    text = _text(name)
    rows = [line for line in text.splitlines() if ROW.match(line)]
    assert len(_query(name)["params"]) == len(rows) > 0


@pytest.mark.parametrize("name", QUERIES + SETS)
def test_parse_does_not_depend_on_column_widths(name):
    """Re-pad every table row to other widths (as other MFT / mstflint releases print them): same result."""
    text = _text(name)
    rng = random.Random(name)
    out = []
    for line in text.splitlines():
        if ROW.match(line):
            mark = "*" if line.startswith("*") else " "
            tokens = line[1:].split()
            width = rng.randint(len(tokens[0]) + 1, 50)
            line = mark + " " * rng.randint(1, 9) + tokens[0].ljust(width) + "".join(
                tok + " " * rng.randint(1, 21) for tok in tokens[1:])
        elif line.startswith("Configurations:"):
            line = "Configurations:" + "".join(" " * rng.randint(2, 40) + col for col in re.split(
                r"\s{2,}", line[len("Configurations:"):].strip()))
        out.append(line)
    assert mc.parse_query("\n".join(out)) == mc.parse_query(text)
    assert mc.parse_set("\n".join(out)) == mc.parse_set(text)


def test_query_with_default_current_next_boot():
    q = _query("rdma-outputs/mlxconfig-query-01.txt")
    assert q["device"] == {"type": "ConnectX4LX", "name": "0R887V", "device": "19:00.0",
                           "description": "MCX422A-ACAA ConnectX-4 Lx EN Dual Port SFP28; 25GbE for Dell rack NDC"}
    assert q["columns"] == ["default", "current", "next_boot"]
    assert q["params"]["SRIOV_EN"] == {"default": "False(0)", "current": "True(1)", "next_boot": "True(1)",
                                       "modified": True}
    # a value wider than its field runs into the next one with a single blank
    assert q["params"]["PCI_ATOMIC_MODE"]["current"] == "PCI_ATOMIC_DISABLED_EXT_ATOMIC_ENABLED(0)"
    assert mc.config_of(q)["CNP_DSCP_P1"] == {"default": 48, "current": 48, "next_boot": 48}
    assert mc.config_of(q)["PCI_DOWNSTREAM_PORT_OWNER"]["current"] == "Array[0..15]"
    assert mc.pending_of(q) == {
        "LEGACY_BOOT_PROTOCOL": {"current": 1, "next_boot": 0, "printed": {"current": "PXE(1)", "next_boot": "NONE(0)"}},
        "ROCE_CONTROL": {"current": 0, "next_boot": 2,
                         "printed": {"current": "DEVICE_DEFAULT(0)", "next_boot": "ROCE_ENABLE(2)"}}}


def test_query_without_e_has_only_next_boot():
    for name in ("qos-firmware/mlxconfig-query-02.txt", "qos-firmware/mstconfig-query-01.txt"):
        q = _query(name)
        assert q["columns"] == ["next_boot"]
        assert q["params"]["SRIOV_EN"] == {"default": None, "current": None, "next_boot": "True(1)", "modified": False}
        assert mc.pending_of(q) == {}
    # an excerpt with no header at all
    q = _query("rdma-outputs/mlxconfig-query-05.txt")
    assert q["columns"] is None and q["params"]["MIN_TIME_BETWEEN_CNPS_P1"]["next_boot"] == "4"


def test_pending_and_array_entries():
    q = _query("rdma-outputs/mlxconfig-query-02.txt")
    assert mc.pending_of(q) == {"MEMIC_SIZE_LIMIT": {"current": 1, "next_boot": 0,
                                                     "printed": {"current": "_256KB(1)", "next_boot": "DISABLED(0)"}}}
    assert q["params"]["ESWITCH_HAIRPIN_DESCRIPTORS"]["next_boot"] == "Array[0..7]"
    q = _query("rdma-outputs/mlxconfig-query-03.txt")
    assert sorted(q["params"]) == ["ESWITCH_HAIRPIN_DESCRIPTORS[%d]" % i for i in range(8)]
    q = _query("rdma-outputs/mlxconfig-query-04.txt")
    # an enum whose current value has no symbol prints the bare number
    assert mc.pending_of(q)["PCI_DOWNSTREAM_PORT_OWNER[0]"] == {
        "current": 148, "next_boot": 0, "printed": {"current": "148", "next_boot": "DEVICE_DEFAULT(0)"}}
    assert "PCI_DOWNSTREAM_PORT_OWNER[2]" not in mc.pending_of(q)


@pytest.mark.parametrize("raw,value,split", [
    ("IB(1)", 1, ("IB", 1)), ("ETH(2)", 2, ("ETH", 2)), ("True(1)", 1, ("True", 1)), ("8", 8, (None, 8)),
    ("_256KB(1)", 1, ("_256KB", 1)), ("Array[0..7]", "Array[0..7]", ("Array[0..7]", None)),
    ("PCI_ATOMIC_DISABLED_EXT_ATOMIC_ENABLED(0)", 0, ("PCI_ATOMIC_DISABLED_EXT_ATOMIC_ENABLED", 0)),
])
def test_normalize(raw, value, split):
    assert mc.normalize(raw) == value
    assert mc.split_value(raw) == split


def test_set_dialogs():
    s = mc.parse_set(_text("rdma-outputs/mlxconfig-set-01.txt"))
    assert s["params"] == {"LINK_TYPE_P1": {"next_boot": "IB(1)", "new": "ETH(2)"},
                           "LINK_TYPE_P2": {"next_boot": "IB(1)", "new": "ETH(2)"}}
    assert s["applied"] and s["reboot_required"]
    s = mc.parse_set(_text("qos-firmware/mstconfig-set-01.txt"))
    assert s["params"] == {"ROCE_CONTROL": {"next_boot": "ROCE_ENABLE(2)", "new": "ROCE_DISABLE(1)"}}
    assert s["device"]["device"] == "4b:00.0"
    reset = _text("qos-firmware/mlxconfig-reset-01.txt")
    assert mc.parse_set(reset)["applied"] and mc.parse_set(reset)["reboot_required"]


def test_errors():
    assert mc.parse_errors(_text("qos-firmware/mstconfig-error-01.txt")) == ["Failed to open the device"]
    assert mc.parse_errors(_text("qos-firmware/mstconfig-error-02.txt")) == [
        "The Device doesn't support MPFS_UC_LOOPBACK_DISABLE_P1 parameter"]
    assert mc.parse_errors(_text("rdma-outputs/mlxconfig-query-01.txt")) == []


def test_show_confs():
    confs = mc.parse_show_confs(_text("qos-firmware/mstconfig-show-confs-01.txt"))
    assert confs["ROCE_CC_ALGORITHM_P1"] == {"type": "enum", "symbols": {"ECN": 0, "QCN": 1}}
    assert confs["ROCE_CC_ALGORITHM_P2"] == {"type": "enum", "symbols": {"ECN": None, "QCN": None}}
    assert confs["CNP_DSCP_P1"]["type"] == "num"
    assert confs["ROCE_CC_LEGACY_DCQCN"] == {"type": "bool", "symbols": {"False": 0, "True": 1}}
    assert confs["ROCE_CC_SHAPER_COALESCE_P1"]["symbols"] == {"DEST_IP": 1, "DEVICE_DEFAULT": 0, "SOURCE_QP": 2,
                                                              "_5_TUPLE": 3}


@pytest.mark.parametrize("raw,want,same", [
    ("IB(1)", "IB", True), ("IB(1)", "ib", True), ("IB(1)", 1, True), ("IB(1)", "1", True), ("IB(1)", "ETH", False),
    ("True(1)", True, True), ("True(1)", "True", True), ("False(0)", True, False), ("False(0)", False, True),
    ("8", 8, True), ("8", "8", True), ("8", 16, False), ("255", "0xff", True), ("Array[0..7]", 1, False),
])
def test_matches(raw, want, same):
    assert mc.matches(raw, want) is same


def test_plan_sets_only_what_differs_from_next_boot():
    q = _query("rdma-outputs/mlxconfig-query-01.txt")
    assert mc.plan(q, {"SRIOV_EN": True, "NUM_OF_VFS": 8}) == {"reset": False, "set": {}, "changes": {}}
    p = mc.plan(q, {"SRIOV_EN": "True", "NUM_OF_VFS": 16, "CNP_DSCP_P1": 48, "ROCE_CC_PRIO_MASK_P1": 8})
    assert p["set"] == {"NUM_OF_VFS": "16", "ROCE_CC_PRIO_MASK_P1": "8"}
    assert p["changes"] == {"NUM_OF_VFS": {"before": 8, "after": 16}, "ROCE_CC_PRIO_MASK_P1": {"before": 255, "after": 8}}
    assert mc.plan(q, {"SRIOV_EN": False})["set"] == {"SRIOV_EN": "False"}


def test_plan_compares_with_next_boot_not_current():
    """A second run before the reboot: the value is pending (next boot), nothing to set."""
    q = _query("rdma-outputs/mlxconfig-query-02.txt")
    assert mc.plan(q, {"MEMIC_SIZE_LIMIT": "DISABLED"})["set"] == {}
    assert mc.plan(q, {"MEMIC_SIZE_LIMIT": "_256KB"})["set"] == {"MEMIC_SIZE_LIMIT": "_256KB"}


def test_plan_reset():
    q = _query("rdma-outputs/mlxconfig-query-01.txt")
    p = mc.plan(q, {}, reset=True)
    assert p["reset"] and p["set"] == {}
    assert p["changes"] == {"SRIOV_EN": {"before": 1, "after": 0}, "LEGACY_BOOT_PROTOCOL": {"before": 0, "after": 1}}
    # after the reset, the set call carries what the defaults do not give
    p = mc.plan(q, {"SRIOV_EN": True, "NUM_OF_VFS": 4}, reset=True)
    assert p["reset"] and p["set"] == {"SRIOV_EN": "True", "NUM_OF_VFS": "4"}
    assert sorted(p["changes"]) == ["LEGACY_BOOT_PROTOCOL", "NUM_OF_VFS"]
    # keeping the parameters that differ needs no reset, and sets nothing
    assert mc.plan(q, {"SRIOV_EN": True, "LEGACY_BOOT_PROTOCOL": "NONE"}, reset=True) == {
        "reset": False, "set": {}, "changes": {}}
    defaults = _query("rdma-outputs/mlxconfig-query-03.txt")
    assert mc.plan(defaults, {}, reset=True) == {"reset": False, "set": {}, "changes": {}}


def test_plan_refuses_a_parameter_the_device_does_not_show():
    with pytest.raises(mc.MlxconfigError, match="does not have the parameter LINK_TYPE_P1"):
        mc.plan(_query("rdma-outputs/mlxconfig-query-01.txt"), {"LINK_TYPE_P1": "IB"})


@pytest.mark.parametrize("params,fragment", [
    ({"link_type_p1": "IB"}, "'link_type_p1' is not an mlxconfig parameter name"),
    ({"NAME[0..7]": 1}, "'NAME[0..7]' is not an mlxconfig parameter name"),
    ({"NUM_OF_VFS": -1}, "NUM_OF_VFS=-1 must be"),
    ({"NUM_OF_VFS": "-1"}, "NUM_OF_VFS=-1 is negative"),
    ({"LINK_TYPE_P1": "I B"}, "LINK_TYPE_P1='I B' must be a symbol"),
    ({"LINK_TYPE_P1": [1]}, "LINK_TYPE_P1=[1] must be"),
    ({"LINK_TYPE_P1": 1.5}, "LINK_TYPE_P1=1.5 must be"),
    ({"NUM_OF_VFS": "010"}, "NUM_OF_VFS=010 has a leading zero, which the tool would read as octal; write 10 or 0xa"),
    ({"NUM_OF_VFS": 4294967296}, "NUM_OF_VFS=4294967296 is larger than any mlxconfig parameter"),
    ({"NUM_OF_VFS": "0x100000000"}, "NUM_OF_VFS=0x100000000 is larger than any mlxconfig parameter"),
])
def test_check_params(params, fragment):
    assert any(fragment in error for error in mc.check_params(params))


def test_check_params_accepts_the_documented_forms():
    assert mc.check_params({"LINK_TYPE_P1": "IB", "SRIOV_EN": True, "NUM_OF_VFS": 8, "CNP_DSCP_P1": "48",
                            "ROCE_CC_PRIO_MASK_P1": "0xff", "ESWITCH_HAIRPIN_DESCRIPTORS[3]": 64}) == []


def test_check_values_against_show_confs():
    confs = mc.parse_show_confs(_text("qos-firmware/mstconfig-show-confs-01.txt"))
    q = _query("qos-firmware/mstconfig-query-01.txt")
    assert mc.check_values(q, confs, {"ROCE_CC_ALGORITHM_P1": "FOO"}) == [
        "ROCE_CC_ALGORITHM_P1=FOO is not a value the device accepts; allowed: ECN, QCN"]
    assert mc.check_values(q, confs, {"ROCE_CC_ALGORITHM_P1": 7}) == [
        "ROCE_CC_ALGORITHM_P1=7 is not a value the device accepts; allowed: ECN (0), QCN (1)"]
    assert mc.check_values(q, confs, {"CNP_DSCP_P1": "high"}) == ["CNP_DSCP_P1 takes a number, got high"]
    assert mc.check_values(q, confs, {"ROCE_CC_ALGORITHM_P1": "qcn", "CNP_DSCP_P1": 26}) == []


@pytest.mark.parametrize("device,pci", [("0000:0C:00.1", "0000:0c:00.1"), ("0c:00.0", "0000:0c:00.0")])
def test_pci_address(device, pci, tmp_path):
    assert mc.pci_address(device, str(tmp_path)) == pci
    assert card_port(pci) == int(pci[-1]) + 1


def test_card_port_is_the_pci_function_plus_one_everywhere():
    """One rule for every _P<n> parameter (firmware, roce, infiniband link type, verify): function n-1 is port n."""
    assert [card_port("0000:0c:00.%d" % fn) for fn in range(4)] == [1, 2, 3, 4]
    assert card_port("") is None and card_port(None, 1) == 1 and card_port("0000:0c:00", 7) == 7


def test_unknown_device_lists_the_rdma_devices(tmp_path):
    (tmp_path / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    with pytest.raises(mc.MlxconfigError, match=r"'mlx5_9' is neither a PCI address .* \(present: mlx5_0\)"):
        mc.pci_address("mlx5_9", str(tmp_path))
