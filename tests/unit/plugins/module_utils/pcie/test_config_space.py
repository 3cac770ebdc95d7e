"""A PCI function's config space (pcie/config_space.py): a real PLX downstream port's bytes against what lspci printed
for them, the synthetic tree's registers, truncated reads (64 bytes without root, 256 without extended space) as
unknown, and the real lspci reading the synthetic tree the way the parser does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import checks, config_space, tree
from fixtures_path import real_fixtures
from simhost import pcie_tree

PCIE = real_fixtures() / "pcie"
PLX = "lspci-vvxxx-plx-downstream-port-01.txt"
CX7 = "lspci-vvv-connectx7-x8-gen4-01.txt"


def _capture(name):
    """(text, the config bytes of its hex dump)."""
    text = (PCIE / name).read_text(encoding="utf-8")
    data = bytearray()
    for line in text.splitlines():
        match = re.match(r"^([0-9a-f]{2,3}): ((?:[0-9a-f]{2} ?){16})$", line)
        if match:
            data += bytes(int(b, 16) for b in match.group(2).split())
    return text, bytes(data)


def _lspci_link(text):
    """{LnkCap: (speed, width), LnkSta: (speed, width), MaxReadReq, MaxPayload, ACSCtl: {name: bool}} of lspci -vvv."""
    out = {}
    for key in ("LnkCap", "LnkSta"):
        match = re.search(r"%s:\s.*?Speed ([\d.]+)GT/s[^,]*, Width x(\d+)" % key, text)
        if match:
            out[key] = (float(match.group(1)), int(match.group(2)))
    match = re.search(r"MaxPayload (\d+) bytes, MaxReadReq (\d+) bytes", text)
    if match:
        out["MaxPayload"], out["MaxReadReq"] = int(match.group(1)), int(match.group(2))
    match = re.search(r"ACSCtl:\s(.*)", text)
    if match:
        out["ACSCtl"] = dict((bit[:-1], bit[-1] == "+") for bit in match.group(1).split())
    return out


def test_a_real_plx_downstream_port_reads_as_lspci_printed_it():
    text, data = _capture(PLX)
    assert len(data) == 256
    parsed = config_space.parse(data)
    shown = _lspci_link(text)
    express = parsed["express"]
    assert express["port_type"] == "downstream_port"
    assert (express["max_speed"], express["max_width"]) == shown["LnkCap"] == (5.0, 16)
    assert (express["speed"], express["width"]) == shown["LnkSta"] == (2.5, 0)   # nothing below the port
    assert (express["max_payload"], express["max_read_req"]) == (shown["MaxPayload"], shown["MaxReadReq"])
    assert express["max_payload_supported"] == 256
    # lspci -xxx dumps 256 bytes: the ACS capability at 0xf24 is past them, so unknown (not absent)
    assert parsed["acs"] is None and parsed["ats_enabled"] is None
    assert config_space.acs_redirect(parsed["acs"]) is None


def test_the_real_port_with_its_acs_capability_added_reads_its_acsctl_line():
    """The capture's 256 bytes, extended space as the capture lists it (a Device Serial Number at 0x100, ACS at 0xf24
    with the capture's ACSCap and ACSCtl words): the parser's bits are the capture's ACSCtl line."""
    text, data = _capture(PLX)
    cfg = bytearray(data) + bytearray(4096 - len(data))
    cfg[0x100:0x104] = (0x0003 | (1 << 16) | (0xF24 << 20)).to_bytes(4, "little")
    cfg[0xF24:0xF28] = (0x000D | (1 << 16)).to_bytes(4, "little")
    cfg[0xF28:0xF2A] = (0x007F).to_bytes(2, "little")    # ACSCap: every bit +
    cfg[0xF2A:0xF2C] = (0x001D).to_bytes(2, "little")    # ACSCtl: SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+
    parsed = config_space.parse(bytes(cfg))
    assert parsed["acs"] == _lspci_link(text)["ACSCtl"]
    assert all(parsed["acs_cap"].values())
    assert parsed["acs"]["ReqRedir"] and config_space.acs_redirect(parsed["acs"]) is True


def _node(**kw):
    node = {"pci": "0000:19:00.0", "kind": "nic", "max_speed": 32.0, "max_width": 16, "_speed": 16.0, "_width": 8,
            "ats": True, "max_read_req": 512}
    node.update(kw)
    return node


def test_the_synthetic_registers_read_back():
    parsed = config_space.parse(pcie_tree.config_space(_node()))
    express = parsed["express"]
    assert express["port_type"] == "endpoint"
    assert (express["max_speed"], express["max_width"], express["speed"], express["width"]) == (32.0, 16, 16.0, 8)
    assert express["supported_speeds"] == [2.5, 5.0, 8.0, 16.0, 32.0]
    assert (express["max_payload"], express["max_read_req"]) == (256, 512)
    assert parsed["ats_enabled"] is True and parsed["acs"] == {}     # an endpoint without ACS: nothing redirected
    bridge = config_space.parse(pcie_tree.config_space(
        _node(kind="downstream_port", acs=pcie_tree.ACS_REDIRECT_ON, _speed=32.0, _width=16), 0x17, 0x19, 0x19))
    assert bridge["express"]["port_type"] == "downstream_port"
    assert bridge["acs"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                             "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}
    assert bridge["ats_enabled"] is False


@pytest.mark.parametrize("size", [0, 1, 14, 63, 64, 255])
def test_a_truncated_read_is_unknown_never_an_exception(size):
    parsed = config_space.parse(pcie_tree.config_space(_node(), size=size))
    assert parsed["express"] is None and parsed["acs"] is None and parsed["ats_enabled"] is None
    assert parsed["size"] == size
    if size >= 64:
        assert (parsed["vendor"], parsed["device"]) == (0x15B3, 0x1021)


def test_256_bytes_give_the_link_but_not_acs_or_ats():
    parsed = config_space.parse(pcie_tree.config_space(_node(), size=256))
    assert parsed["express"]["max_read_req"] == 512
    assert parsed["acs"] is None and parsed["ats_enabled"] is None


def test_a_looped_capability_chain_ends():
    cfg = bytearray(pcie_tree.config_space(_node()))
    cfg[0x61] = 0x40            # Express -> Power Management -> Express ...
    cfg[0x100:0x104] = (0x0003 | (1 << 16) | (0x100 << 20)).to_bytes(4, "little")
    parsed = config_space.parse(bytes(cfg))
    assert parsed["express"]["port_type"] == "endpoint" and parsed["ats_enabled"] is False


def test_a_function_without_the_capability_list_has_no_express():
    cfg = bytearray(pcie_tree.config_space(_node()))
    cfg[0x06] = 0
    assert config_space.parse(bytes(cfg))["express"] == {}


LSPCI = shutil.which("lspci", path="/usr/bin:/bin:/usr/sbin:/sbin")


def _need_lspci():
    """Skip without pciutils' lspci, except where HPCNET_REQUIRE_LSPCI=1 (.ci/run installs pciutils and sets it)."""
    if LSPCI is None:
        reason = "pciutils' lspci is not installed (apt-get install pciutils)"
        if os.environ.get("HPCNET_REQUIRE_LSPCI", "") == "1":
            pytest.fail("%s; HPCNET_REQUIRE_LSPCI=1 is set, so the lspci cross-check must run" % reason, pytrace=False)
        pytest.skip(reason)


def test_the_real_lspci_reads_the_synthetic_tree_as_the_parser_does(tmp_path):
    _need_lspci()
    host_bridges, nodes = pcie_tree.dgx_h100()
    nodes["0000:17:00.0"]["acs"] = pcie_tree.ACS_REDIRECT_ON          # rail 0's GPU port redirects
    nodes["0000:19:00.0"].update(speed=16.0, width=8, max_read_req=512)  # rail 0's NIC at x8 Gen4
    pcie_tree.write(tmp_path, host_bridges)
    checked = 0
    for pci in ("0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:17:01.0", "0000:18:00.0", "0000:19:00.0"):
        run = subprocess.run([LSPCI, "-A", "linux-sysfs", "-O", "sysfs.path=%s" % (tmp_path / "bus" / "pci"),
                              "-vvv", "-s", pci], capture_output=True, text=True, check=True,
                             env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
        shown = _lspci_link(run.stdout)
        parsed = config_space.read(tmp_path / "bus" / "pci" / "devices" / pci / "config")
        express = parsed["express"]
        assert shown["LnkCap"] == (express["max_speed"], express["max_width"]), pci
        assert shown["LnkSta"] == (express["speed"], express["width"]), pci
        assert shown["MaxReadReq"] == express["max_read_req"] and shown["MaxPayload"] == express["max_payload"]
        if parsed["acs"]:
            assert shown["ACSCtl"] == parsed["acs"], pci
            checked += 1
        else:
            assert "ACSCtl" not in shown
    assert checked == 3   # the root port and both downstream ports
    assert _lspci_link(subprocess.run([LSPCI, "-A", "linux-sysfs", "-O", "sysfs.path=%s" % (tmp_path / "bus" / "pci"),
                                       "-vvv", "-s", "17:00.0"], capture_output=True, text=True).stdout)[
        "ACSCtl"]["ReqRedir"] is True


def _cx7_host(root):
    """The capture's ConnectX-7 (b1:00.1, function 1 of its card) under its Ice Lake root port b0:04.0. The model's
    assumption, stated: Ice Lake-SP root ports are PCI Express 4.0 x16 (the capture does not show the port)."""
    nic = {"pci": "0000:b1:00.1", "kind": "nic", "max_speed": 32.0, "max_width": 16, "speed": 16.0, "width": 8,
           "max_read_req": 4096, "max_payload": 512, "ats": False, "rail": 0}
    port = {"pci": "0000:b0:04.0", "kind": "root_port", "max_speed": 16.0, "max_width": 16, "acs": 0x001D,
            "children": [nic]}
    pcie_tree.write(root, [{"name": "pci0000:b0", "numa_node": 1, "ports": [port]}])
    return nic


def test_a_real_connectx7_at_x8_gen4_and_its_synthetic_twin(tmp_path):
    """What the capture shows of a ConnectX-7 trained at 16GT/s x8: the parser reads the same of its synthetic twin,
    and the link check names the width (the speed is the lower of the two ends' maxima: no finding for it)."""
    text = (PCIE / CX7).read_text(encoding="utf-8")
    shown = _lspci_link(text)
    assert shown["LnkCap"] == (32.0, 16) and shown["LnkSta"] == (16.0, 8)
    _cx7_host(tmp_path)
    parsed = config_space.read(tmp_path / "bus" / "pci" / "devices" / "0000:b1:00.1" / "config")
    express = parsed["express"]
    assert (express["max_speed"], express["max_width"]) == shown["LnkCap"]
    assert (express["speed"], express["width"]) == shown["LnkSta"]
    assert (express["max_payload"], express["max_read_req"]) == (shown["MaxPayload"], shown["MaxReadReq"]) == (512, 4096)
    nic = tree.read(str(tmp_path), ["0000:b1:00.1"])["devices"]["0000:b1:00.1"]
    found = checks.pcie_link("node1", "mlx5_1", nic["pcie_path"], rail=1)
    assert [(f["check"], f["found"]) for f in found] == [("pcie_link", "16GT/s x8")]
    assert found[0]["expected"].startswith("16GT/s x16 on the link 0000:b0:04.0 -> 0000:b1:00.1")
    assert checks.pcie_max_read_req("node1", "mlx5_1", "0000:b1:00.1", nic["max_read_req"]) == []


def test_the_real_lspci_prints_the_captures_link_lines_for_the_twin(tmp_path):
    _need_lspci()
    _cx7_host(tmp_path)
    run = subprocess.run([LSPCI, "-A", "linux-sysfs", "-O", "sysfs.path=%s" % (tmp_path / "bus" / "pci"), "-vvv",
                          "-s", "b1:00.1"], capture_output=True, text=True, check=True,
                         env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    capture = (PCIE / CX7).read_text(encoding="utf-8").splitlines()
    for prefix in ("\t\tLnkCap:\t", "\t\tLnkSta:\t", "\t\t\tMaxPayload "):
        want = [line for line in capture if line.startswith(prefix)]
        assert want and want == [line for line in run.stdout.splitlines() if line.startswith(prefix)], prefix
