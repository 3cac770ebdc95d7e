"""Counter faults of the simulated host: ``python3 -m simhost counters pfc-storm|ecn|drops|symbol-errors|flap|show``
(simhost/faults.py, the model in simhost/fabric_model.py "Fault injection").

Each action runs as the command line does and must move exactly the counters the model declares, seen where the
product reads them: the stand-in ``ethtool -S`` (tests/simhost/bin/ethtool) and the sysfs files of the port and its
netdev. Also: the PMA's saturation, PFC counters of a priority with PFC off (kept, listed by ethtool only once PFC
is on), counters reset by a boot, and bad input (exit 2, one line naming the option)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[2] / "simhost"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import fabric_model  # noqa: E402  pylint: disable=wrong-import-position

ROCE = "cx7_roce_400g_2x"        # mlx5_0/mlx5_1: Ethernet 400 Gb/s, enp12s0np0 / enp140s0np0
VPI = "cx7_vpi_2p"               # mlx5_0: InfiniBand 200 Gb/s (ibp12s0f0), mlx5_1: Ethernet 200 Gb/s (enp12s0f1np1)
IF0 = "enp12s0np0"


@pytest.fixture(autouse=True)
def persist(tmp_path, monkeypatch):
    """Every test has its own NV store / cable table (the container's /var/lib/simhost) and tree root."""
    path = tmp_path / "persist"
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(path))
    monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(tmp_path / "sys"))
    return path


def boot(profile: str, root: Path) -> Path:
    simhost.build_tree(simhost.load(profile), root)
    return root


@pytest.fixture
def roce(tmp_path):
    return boot(ROCE, tmp_path / "sys")


@pytest.fixture
def vpi(tmp_path):
    return boot(VPI, tmp_path / "sys")


def _env(root: Path) -> dict:
    return {**os.environ, "SIMHOST_SYSFS_ROOT": str(root), "PYTHONPATH": str(KIT), "LC_ALL": "C"}


def counters(root: Path, *args: str) -> subprocess.CompletedProcess:
    """``python3 -m simhost counters ARGS --root ROOT`` (-S: the kit is standard library only, as in the containers)."""
    return subprocess.run([sys.executable, "-S", "-m", "simhost", "counters", *args, "--root", str(root)],
                          capture_output=True, text=True, env=_env(root), check=False, timeout=60)


def inject(root: Path, *args: str) -> subprocess.CompletedProcess:
    res = counters(root, *args)
    assert res.returncode == 0, (args, res.stdout, res.stderr)
    return res


def tool(root: Path, name: str, *args: str) -> str:
    res = subprocess.run([sys.executable, "-S", str(KIT / "bin" / name), *args], capture_output=True, text=True,
                         env=_env(root), check=False, timeout=60)
    assert res.returncode == 0, (name, args, res.stdout, res.stderr)
    return res.stdout


def ethtool_s(root: Path, netdev: str) -> dict:
    """``ethtool -S IF`` of the stand-in, parsed: {name: value} in its order."""
    lines = tool(root, "ethtool", "-S", netdev).splitlines()
    assert lines[0] == "NIC statistics:"
    out = {}
    for line in lines[1:]:
        name, value = line.strip().split(": ")
        out[name] = int(value)
    return out


def snapshot(root: Path) -> dict:
    """Every counter a reader can see: each port's counters/ and hw_counters/ files, each netdev's
    carrier_changes and ``ethtool -S`` of each RoCE netdev. Keys: (where, name)."""
    out = {}
    exp = json.loads((root / ".simhost/profile.json").read_text())
    for dev in exp["devices"]:
        for port in dev["ports"]:
            pdir = root / "class/infiniband" / dev["name"] / "ports" / str(port["port"])
            for kind in ("counters", "hw_counters"):
                for path in sorted((pdir / kind).iterdir()):
                    out[(f"{dev['name']}/{port['port']}", f"{kind}/{path.name}")] = int(path.read_text())
            ndir = root / "class/net" / port["netdev"]
            out[(port["netdev"], "carrier_changes")] = int((ndir / "carrier_changes").read_text())
            out[(port["netdev"], "state")] = (pdir / "state").read_text()
            out[(port["netdev"], "phys_state")] = (pdir / "phys_state").read_text()
            if port["link_layer"] == "Ethernet":
                for name, value in ethtool_s(root, port["netdev"]).items():
                    out[(port["netdev"], f"ethtool:{name}")] = value
    return out


def moved(before: dict, after: dict) -> dict:
    """{key: after - before} of the counters that changed (a key new in ``after`` counts from 0)."""
    assert set(before) <= set(after), sorted(set(before) - set(after))
    return {k: (after[k] - before.get(k, 0) if isinstance(after[k], int) else after[k])
            for k in after if after[k] != before.get(k, 0 if isinstance(after[k], int) else None)}


def pfc_on(root: Path, netdev: str, *prios: int) -> None:
    tool(root, "dcb", "pfc", "set", "dev", netdev, "prio-pfc", *(f"{p}:on" for p in prios))


def frames(rate_gbps: float, seconds: float) -> int:
    """The declared rule, computed here independently: one XOFF frame per 65535 quanta of 512 bit times."""
    return int(round(rate_gbps * 1e9 / (65535 * 512) * seconds))


# ------------------------------------------------------------------------------------------------ the model
def test_model_constants_are_declared_in_one_place():
    assert (fabric_model.PFC_PAUSE_QUANTA, fabric_model.PFC_QUANTUM_BITS) == (0xFFFF, 512)
    assert fabric_model.pause_frames_per_second(400) == pytest.approx(11921.1, abs=0.1)
    assert fabric_model.pfc_stall_watermarks_ms() == (6800, 8000)
    assert fabric_model.PMA_COUNTER_MAX["counters/symbol_error"] == 0xFFFF
    assert fabric_model.PMA_COUNTER_MAX["counters/link_downed"] == 0xFF
    assert "counters/port_xmit_data" not in fabric_model.PMA_COUNTER_MAX      # 64-bit extended counters


# ----------------------------------------------------------------------------------------------- pfc-storm
@pytest.mark.parametrize("seconds, paused, events", [
    ("5", 5.0, {}),                                                      # under the warning watermark (6.8 s)
    ("7", 7.0, {"tx_pause_storm_warning_events": 1}),
    (None, 8.0, {"tx_pause_storm_warning_events": 1, "tx_pause_storm_error_events": 1}),  # default 60 s: cut at 8 s
])
def test_tx_pfc_storm_moves_pause_counters_and_the_storm_guard(roce, seconds, paused, events):
    pfc_on(roce, IF0, 3)
    before = snapshot(roce)
    res = inject(roce, "pfc-storm", "--device", "mlx5_0", "--priority", "3",
                 *(["--seconds", seconds] if seconds else []))
    assert res.stderr == ""                                      # PFC is on: no note
    want = {(IF0, "ethtool:tx_prio3_pause"): frames(400, paused),
            (IF0, "ethtool:tx_prio3_pause_duration"): int(paused * 1e6)}
    want.update({(IF0, f"ethtool:{name}"): n for name, n in events.items()})
    assert moved(before, snapshot(roce)) == want
    assert "tx_prio3_pause +%d" % frames(400, paused) in res.stdout


def test_rx_pfc_storm_counts_received_pause_and_one_transition_without_storm_guard(roce):
    pfc_on(roce, IF0, 4)
    before = snapshot(roce)
    inject(roce, "pfc-storm", "--device", "mlx5_0", "--priority", "4", "--seconds", "60", "--direction", "rx")
    assert moved(before, snapshot(roce)) == {(IF0, "ethtool:rx_prio4_pause"): frames(400, 60),
                                             (IF0, "ethtool:rx_prio4_pause_duration"): 60_000_000,
                                             (IF0, "ethtool:rx_prio4_pause_transition"): 1}


def test_pfc_storm_frames_follow_the_port_rate(vpi):
    pfc_on(vpi, "enp12s0f1np1", 3)
    inject(vpi, "pfc-storm", "--device", "mlx5_1", "--priority", "3", "--seconds", "2")
    stats = ethtool_s(vpi, "enp12s0f1np1")
    assert stats["tx_prio3_pause"] == frames(200, 2) == 11921 and stats["tx_prio3_pause_duration"] == 2_000_000


def test_pfc_counters_of_a_priority_with_pfc_off_are_kept_but_listed_only_once_pfc_is_on(roce):
    before = snapshot(roce)
    res = inject(roce, "pfc-storm", "--device", "mlx5_0", "--priority", "5", "--seconds", "1")
    assert res.stderr.count("\n") == 1 and "PFC is off on priority 5 of enp12s0np0" in res.stderr
    assert moved(before, snapshot(roce)) == {}                     # nothing ethtool or sysfs shows
    assert not [n for n in ethtool_s(roce, IF0) if n.startswith("tx_prio5_pause")]
    pfc = json.loads(tool(roce, "dcb", "-s", "-j", "pfc", "show", "dev", IF0))
    assert pfc["requests"] == [0, 0, 0, 0, 0, frames(400, 1), 0, 0]   # dcb's requests read every priority
    shown = json.loads(counters(roce, "show", "--device", "mlx5_0").stdout)
    assert shown["ethtool_hidden"] == {"tx_prio5_pause": frames(400, 1), "tx_prio5_pause_duration": 1_000_000}
    pfc_on(roce, IF0, 5)
    stats = ethtool_s(roce, IF0)
    assert (stats["tx_prio5_pause"], stats["tx_prio5_pause_duration"], stats["rx_prio5_pause"]) == \
        (frames(400, 1), 1_000_000, 0)
    shown = json.loads(counters(roce, "show", "--device", "mlx5_0").stdout)
    assert shown["ethtool_hidden"] == {} and shown["ethtool"]["tx_prio5_pause"] == frames(400, 1)
    tool(roce, "dcb", "pfc", "set", "dev", IF0, "prio-pfc", "5:off")
    assert "tx_prio5_pause" not in ethtool_s(roce, IF0)


# ------------------------------------------------------------------------------------------------------ ecn
@pytest.mark.parametrize("extra, cnps", [([], 60), (["--cnp", "7"], 7), (["--cnp", "0"], 0)])
def test_ecn_moves_the_notification_point_counters(roce, extra, cnps):
    before = snapshot(roce)
    inject(roce, "ecn", "--device", "mlx5_1", "--marked", "120", *extra)
    want = {("mlx5_1/1", "hw_counters/np_ecn_marked_roce_packets"): 120}
    if cnps:
        want[("mlx5_1/1", "hw_counters/np_cnp_sent")] = cnps
    assert moved(before, snapshot(roce)) == want
    assert fabric_model.CONGESTION_PER_GB["cnp_per_marked"] * 120 == 60      # the default is the traffic's rule


# ---------------------------------------------------------------------------------------------------- drops
def test_drops_move_rx_discards_phy_or_out_of_buffer(vpi):
    before = snapshot(vpi)
    inject(vpi, "drops", "--device", "mlx5_1", "--count", "25")
    after = snapshot(vpi)
    assert moved(before, after) == {("enp12s0f1np1", "ethtool:rx_discards_phy"): 25}
    inject(vpi, "drops", "--device", "mlx5_1", "--count", "4", "--counter", "out_of_buffer")
    inject(vpi, "drops", "--device", "mlx5_0", "--count", "3", "--counter", "out_of_buffer")   # IB port: hw_counters
    assert moved(after, snapshot(vpi)) == {("mlx5_1/1", "hw_counters/out_of_buffer"): 4,
                                           ("mlx5_0/1", "hw_counters/out_of_buffer"): 3}


# -------------------------------------------------------------------------------------------- symbol errors
def test_symbol_errors_on_roce_and_ib_ports_and_the_pma_saturation(vpi):
    before = snapshot(vpi)
    inject(vpi, "symbol-errors", "--device", "mlx5_1", "--count", "386")
    inject(vpi, "symbol-errors", "--device", "mlx5_0", "--count", "9")
    after = snapshot(vpi)
    assert moved(before, after) == {("mlx5_1/1", "counters/symbol_error"): 386,
                                    ("enp12s0f1np1", "ethtool:rx_symbol_err_phy"): 386,
                                    ("enp12s0f1np1", "ethtool:rx_pcs_symbol_err_phy"): 386,
                                    ("mlx5_0/1", "counters/symbol_error"): 9}
    inject(vpi, "symbol-errors", "--device", "mlx5_0", "--count", "70000")
    res = inject(vpi, "symbol-errors", "--device", "mlx5_1", "--count", "65500")
    port = vpi / "class/infiniband"
    assert (port / "mlx5_0/ports/1/counters/symbol_error").read_text() == "65535\n"    # 16-bit PMA field
    assert (port / "mlx5_1/ports/1/counters/symbol_error").read_text() == "65535\n"
    assert "counters/symbol_error +65500 (now 65535)" in res.stdout
    stats = ethtool_s(vpi, "enp12s0f1np1")                                          # ethtool's are 64-bit
    assert stats["rx_symbol_err_phy"] == stats["rx_pcs_symbol_err_phy"] == 386 + 65500


# ----------------------------------------------------------------------------------------------------- flap
def test_flap_counts_link_down_and_leaves_the_port_active(vpi):
    before = snapshot(vpi)
    inject(vpi, "flap", "--device", "mlx5_1")
    inject(vpi, "flap", "--device", "mlx5_0", "--times", "3")
    after = snapshot(vpi)
    assert moved(before, after) == {("mlx5_1/1", "counters/link_downed"): 1,
                                    ("enp12s0f1np1", "ethtool:link_down_events_phy"): 1,
                                    ("enp12s0f1np1", "carrier_changes"): 2,
                                    ("mlx5_0/1", "counters/link_downed"): 3,
                                    ("ibp12s0f0", "carrier_changes"): 6}
    for dev in ("mlx5_0", "mlx5_1"):
        pdir = vpi / "class/infiniband" / dev / "ports/1"
        assert (pdir / "state").read_text() == "4: ACTIVE\n" and (pdir / "phys_state").read_text() == "5: LinkUp\n"
        assert (pdir / "counters/link_error_recovery").read_text() == "0\n"
    assert (vpi / "class/net/enp12s0f1np1/carrier").read_text() == "1\n"
    inject(vpi, "flap", "--device", "mlx5_1", "--times", "300")
    assert (vpi / "class/infiniband/mlx5_1/ports/1/counters/link_downed").read_text() == "255\n"   # 8-bit
    assert ethtool_s(vpi, "enp12s0f1np1")["link_down_events_phy"] == 301


def test_a_port_without_link_takes_no_fault(vpi):
    simhost.firmware.set_cable(vpi, "mlx5_1", 1, plugged=False)
    before = snapshot(vpi)
    for args in (["flap"], ["symbol-errors", "--count", "1"], ["pfc-storm", "--priority", "3"]):
        res = counters(vpi, *args, "--device", "mlx5_1")
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert "--device mlx5_1 --port 1: no link (phys_state Polling" in res.stderr
    assert moved(before, snapshot(vpi)) == {}
    assert counters(vpi, "show", "--device", "mlx5_1").returncode == 0


# ----------------------------------------------------------------------------------------------------- show
def test_show_prints_what_the_tools_show(vpi):
    inject(vpi, "symbol-errors", "--device", "mlx5_1", "--count", "2")
    inject(vpi, "flap", "--device", "mlx5_1")
    res = counters(vpi, "show", "--device", "mlx5_1")
    assert res.returncode == 0, res.stderr
    shown = json.loads(res.stdout)
    assert (shown["device"], shown["port"], shown["link_layer"], shown["netdev"], shown["state"]) == \
        ("mlx5_1", 1, "Ethernet", "enp12s0f1np1", "ACTIVE")
    assert shown["ethtool"] == ethtool_s(vpi, "enp12s0f1np1") and list(shown["ethtool"]) == list(ethtool_s(vpi, "enp12s0f1np1"))
    snap = snapshot(vpi)
    assert shown["counters"] == {k[1].split("/", 1)[1]: v for k, v in snap.items()
                                 if k[0] == "mlx5_1/1" and k[1].startswith("counters/")}
    assert shown["hw_counters"]["np_cnp_sent"] == 0 and shown["counters"]["link_downed"] == 1
    assert shown["carrier_changes"] == snap[("enp12s0f1np1", "carrier_changes")]
    ib = json.loads(counters(vpi, "show", "--device", "mlx5_0").stdout)
    assert ib["link_layer"] == "InfiniBand" and "ethtool" not in ib and "np_cnp_sent" not in ib["hw_counters"]


def test_counters_are_runtime_state_reset_at_boot(roce):
    pfc_on(roce, IF0, 3)
    inject(roce, "pfc-storm", "--device", "mlx5_0", "--priority", "3", "--seconds", "1")
    inject(roce, "flap", "--device", "mlx5_0")
    inject(roce, "ecn", "--device", "mlx5_0", "--marked", "10")
    fresh = snapshot(boot(ROCE, roce.parent / "fresh"))
    boot(ROCE, roce)                                                    # a reboot rebuilds the tree
    assert snapshot(roce) == fresh
    assert not (roce / ".simhost/state/counters.json").exists()


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("args, option", [
    (["flap", "--device", "mlx5_9"], "--device mlx5_9: no RDMA device"),
    (["flap", "--device", "mlx5_0", "--port", "2"], "--port 2: mlx5_0 has no such port"),
    (["flap", "--device", "mlx5_0", "--port", "x"], "--port x: not an integer"),
    (["pfc-storm", "--device", "mlx5_1", "--priority", "8"], "--priority 8: out of range (0..7)"),
    (["pfc-storm", "--device", "mlx5_1", "--priority", "-1"], "--priority -1: out of range (0..7)"),
    (["pfc-storm", "--device", "mlx5_1"], "--priority: required by pfc-storm"),
    (["pfc-storm", "--device", "mlx5_1", "--priority", "3", "--seconds", "0"], "--seconds 0: must be more than 0"),
    (["pfc-storm", "--device", "mlx5_1", "--priority", "3", "--direction", "up"], "--direction up: must be one of tx, rx"),
    (["pfc-storm", "--device", "mlx5_0", "--priority", "3"], "--device mlx5_0 --port 1: an InfiniBand port has no PFC"),
    (["ecn", "--device", "mlx5_1", "--marked", "-5"], "--marked -5: out of range (at least 0)"),
    (["ecn", "--device", "mlx5_1", "--marked", "5", "--cnp", "-1"], "--cnp -1: out of range (at least 0)"),
    (["ecn", "--device", "mlx5_1", "--marked", "5", "--priority", "3"], "--priority: not an option of ecn"),
    (["ecn", "--device", "mlx5_0", "--marked", "5"], "an InfiniBand port has no RoCE ECN counters"),
    (["drops", "--device", "mlx5_1", "--count", "-1"], "--count -1: out of range (at least 0)"),
    (["drops", "--device", "mlx5_1", "--count", "1", "--counter", "rx_crc_errors_phy"], "--counter rx_crc_errors_phy:"),
    (["drops", "--device", "mlx5_0", "--count", "1"], "--counter rx_discards_phy: mlx5_0 port 1 is InfiniBand"),
    (["symbol-errors", "--device", "mlx5_1", "--count", "many"], "--count many: not an integer"),
    (["flap", "--device", "mlx5_1", "--times", "0"], "--times 0: out of range (at least 1)"),
    (["show", "--device", "mlx5_1", "--count", "3"], "--count: not an option of show"),
    (["flap"], "the following arguments are required: --device"),
    (["storm", "--device", "mlx5_1"], "argument action: invalid choice: 'storm'"),
])
def test_bad_input_exits_2_with_one_line_naming_the_option(vpi, args, option):
    before = snapshot(vpi)
    res = counters(vpi, *args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.count("\n") == 1 and option in res.stderr, res.stderr
    assert res.stdout == ""
    assert moved(before, snapshot(vpi)) == {}


def test_a_root_without_a_tree_is_refused(tmp_path):
    res = counters(tmp_path / "nothing", "show", "--device", "mlx5_0")
    assert res.returncode == 2 and f"--root {tmp_path / 'nothing'}: no simulated tree there" in res.stderr
