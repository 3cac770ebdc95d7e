"""Tests of the rdma_host role's logic (module_utils/host/host_settings.py, filter plugin host_settings.py)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.hpcnet.rdma.plugins.filter import host_settings as filters
from ansible_collections.hpcnet.rdma.plugins.module_utils.host.host_settings import (
    HostSettingsError,
    memlock_setting,
    module_name_problems,
    peermem_failure,
    peermem_kernel_lines,
)
from fixtures_path import real_fixtures

# Real captures (../shared/fixtures/ib-stack, see its SOURCES.md), copied here verbatim so that the tests do not
# depend on a folder outside the clone; the same files under tests/fixtures/real/ib-stack are read too when present.
# NVIDIA/gpu-operator#2868 (2026-09-08), nvidia-peermem-ctr container on aarch64:
PEERMEM_MODPROBE_FAIL = """DRIVER_ARCH is aarch64
modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument
failed to load nvidia-peermem module
"""
# the same issue, dmesg -T | grep -i -E 'peermem|ib_core|peer_mem':
PEERMEM_DMESG = """[Tue Sep  8 17:16:02 2026] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client
[Tue Sep  8 17:16:02 2026] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)
[Tue Sep  8 17:16:02 2026] nvidia_peermem: disagrees about version of symbol ib_unregister_peer_memory_client
[Tue Sep  8 17:16:02 2026] nvidia_peermem: Unknown symbol ib_unregister_peer_memory_client (err -22)
[Tue Sep  8 17:21:18 2026] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client
[Tue Sep  8 17:21:18 2026] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)
[Tue Sep  8 17:21:18 2026] nvidia_peermem: disagrees about version of symbol ib_unregister_peer_memory_client
[Tue Sep  8 17:21:18 2026] nvidia_peermem: Unknown symbol ib_unregister_peer_memory_client (err -22)
"""
# Mellanox/nv_peer_memory#84 (2021-02-12), modprobe -v nv_peer_mem after an OFED upgrade underneath the module:
NV_PEER_MEM_UNKNOWN_SYMBOL = """insmod /lib/modules/3.10.0-1127.19.1.el7.x86_64/extra/nv_peer_mem.ko
modprobe: ERROR: could not insert 'nv_peer_mem': Unknown symbol in module, or unknown parameter (see dmesg)
"""
IB_STACK = real_fixtures() / "ib-stack"


# -- memlock --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["unlimited", "UNLIMITED", " unlimited "])
def test_memlock_unlimited_is_unlimited_in_limits_conf_and_infinity_in_systemd(value):
    assert memlock_setting(value) == {"value": "unlimited", "limits": "unlimited", "systemd": "infinity", "kib": None}


@pytest.mark.parametrize("value", [1048576, "1048576"])
def test_memlock_kib_goes_to_limits_conf_as_is_and_to_systemd_with_the_k_suffix(value):
    assert memlock_setting(value) == {"value": 1048576, "limits": "1048576", "systemd": "1048576K", "kib": 1048576}


@pytest.mark.parametrize("value", [True, False, None, 0, "0", -1, "-5", 1.5, "1.5", "64M", "1G", "infinity", "", "01",
                                   2 ** 64])
def test_memlock_refuses_what_is_neither_unlimited_nor_positive_kib(value):
    with pytest.raises(HostSettingsError, match=r"rdma_host_memlock must be 'unlimited' or a number of KiB"):
        memlock_setting(value)


def test_memlock_filter_returns_the_error_for_an_assert_or_raises():
    assert filters.rdma_host_memlock("64M", on_error="return") == {
        "error": "rdma_host_memlock must be 'unlimited' or a number of KiB (a positive integer, as limits.conf counts "
                 "memlock); got '64M'."}
    assert filters.rdma_host_memlock("unlimited")["error"] is None
    with pytest.raises(AnsibleFilterError, match="rdma_host_memlock must be"):
        filters.rdma_host_memlock(True)


# -- module names -----------------------------------------------------------------------------------------------------
def test_module_names_accept_kernel_module_names():
    assert module_name_problems(["ib_umad", "ib_uverbs", "rdma_ucm", "ib_ipoib", "nvidia-peermem", "mlx5_ib"]) == []


@pytest.mark.parametrize("names", [["ib.umad"], ["../etc/passwd"], ["ib umad"], [""], ["ib_umad", 3], ["(a|b)"]])
def test_module_names_refuse_paths_spaces_and_regex_characters(names):
    assert module_name_problems(names)[0].startswith("rdma_host_modules takes kernel module names")


def test_module_names_must_be_a_list():
    assert module_name_problems("ib_umad") == ['rdma_host_modules must be a list of kernel module names; got "ib_umad".']


# -- kernel modules: loaded = <sysfs>/module/<name>, one modules-load.d file ------------------------------------------
def test_kernel_module_state_comes_from_sysfs_and_the_load_file_lists_them(tmp_path):
    from ansible_collections.hpcnet.rdma.plugins.module_utils.host import kernel_modules as km
    (tmp_path / "module" / "ib_umad").mkdir(parents=True)
    (tmp_path / "module" / "ib_umad" / "initstate").write_text("live\n")
    (tmp_path / "module" / "ib_core").mkdir()                     # built in: no initstate
    (tmp_path / "module" / "rdma_ucm").mkdir()
    (tmp_path / "module" / "rdma_ucm" / "initstate").write_text("going\n")
    assert km.loaded(str(tmp_path), "ib_umad") and km.loaded(str(tmp_path), "ib_core")
    assert not km.loaded(str(tmp_path), "rdma_ucm") and not km.loaded(str(tmp_path), "nvidia_peermem")
    assert km.loaded(str(tmp_path), "ib-umad")                     # /sys/module uses underscores
    to_load, text = km.plan(str(tmp_path), ["ib_umad", "rdma_ucm"], "/etc/modules-load.d/x.conf", ["hdr"], None)
    assert to_load == ["rdma_ucm"] and text == "# hdr\nib_umad\nrdma_ucm\n"
    assert km.plan(str(tmp_path), ["ib_umad"], "/x.conf", ["hdr"], "# hdr\nib_umad\n") == ([], None)
    with pytest.raises(km.KernelModuleError, match="kernel module names"):
        km.plan(str(tmp_path), ["ib.umad"], None, [], None)


# -- nvidia_peermem load failures -------------------------------------------------------------------------------------
def test_invalid_argument_with_symbol_version_errors_is_a_peermem_built_against_another_ib_core():
    result = peermem_failure(PEERMEM_MODPROBE_FAIL, PEERMEM_DMESG, "6.8.0-45-generic", "apt-get install --reinstall X")
    assert result["cause"] == "symbol_version_mismatch"
    assert "built against another ib_core" in result["reason"]
    assert "GPU driver was installed before MLNX_OFED / DOCA-OFED" in result["reason"]
    assert result["fix"].startswith("reinstall (rebuild) the NVIDIA GPU driver after the RDMA stack")
    assert "the 6.8.0-45-generic kernel (apt-get install --reinstall X)" in result["fix"]
    assert "use DMA-BUF" in result["fix"] and "rdma_gdr=false" in result["fix"]
    # modprobe's lines (not the container's DRIVER_ARCH line), then the kernel's, without timestamps and repeats
    assert result["evidence"] == [
        "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument",
        "failed to load nvidia-peermem module",
        "nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client",
        "nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)",
        "nvidia_peermem: disagrees about version of symbol ib_unregister_peer_memory_client",
        "nvidia_peermem: Unknown symbol ib_unregister_peer_memory_client (err -22)"]
    assert result["msg"].startswith("nvidia_peermem did not load: nvidia_peermem was built against another ib_core")
    assert " Fix: Reinstall (rebuild) the NVIDIA GPU driver" in result["msg"]


def test_invalid_argument_without_kernel_log_is_a_peermem_built_without_peer_memory_support():
    result = peermem_failure(PEERMEM_MODPROBE_FAIL, "")
    assert result["cause"] == "no_peer_memory_support"
    assert "built without the MLNX_OFED / DOCA-OFED peer-memory headers" in result["reason"]
    assert "the running kernel" in result["fix"]
    assert "DMA-BUF" in result["fix"]


def test_unknown_symbol_is_a_missing_peer_memory_api():
    result = peermem_failure(NV_PEER_MEM_UNKNOWN_SYMBOL)
    assert result["cause"] == "unknown_symbol"
    assert "ib_register_peer_memory_client" in result["reason"]
    assert result["fix"].startswith("reinstall (rebuild) the NVIDIA GPU driver after the RDMA stack")


@pytest.mark.parametrize("stderr, dmesg, cause", [
    ("modprobe: FATAL: Module nvidia_peermem not found in directory /lib/modules/6.1.0-26-amd64", "", "not_found"),
    ("modprobe: ERROR: could not insert 'nvidia_peermem': Key was rejected by service", "", "key_rejected"),
    ("modprobe: ERROR: could not insert 'nvidia_peermem': Exec format error", "", "exec_format"),
    ("modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument",
     "nvidia-peermem nv_mem_param_conf_check:497 invalid peerdirect_support param value 2", "bad_parameter"),
    ("modprobe: ERROR: could not insert 'nvidia_peermem': Device or resource busy", "", "unknown"),
])
def test_other_failures_get_their_own_reason(stderr, dmesg, cause):
    result = peermem_failure(stderr, dmesg)
    assert result["cause"] == cause
    assert result["reason"] and result["fix"] and result["msg"].startswith("nvidia_peermem did not load: ")


def test_only_the_kernel_lines_about_peer_memory_are_kept():
    dmesg = "eth0: link up\n" + PEERMEM_DMESG + "mlx5_core 0000:12:00.0: firmware version 28.39.1002\n"
    assert peermem_kernel_lines(dmesg) == [line.split("] ", 1)[1] for line in PEERMEM_DMESG.splitlines()[4:]]
    assert peermem_kernel_lines(dmesg, limit=2) == peermem_kernel_lines(dmesg)[-2:]


def test_the_filter_gives_the_same_result():
    assert filters.rdma_host_peermem_failure(PEERMEM_MODPROBE_FAIL, PEERMEM_DMESG) == peermem_failure(
        PEERMEM_MODPROBE_FAIL, PEERMEM_DMESG)


CAPTURED = {
    "nvidia-peermem-modprobe-fail-01.txt": ("dmesg-nvidia-peermem-symbols-01.txt", "symbol_version_mismatch"),
    "modprobe-nv_peer_mem-unknown-symbol-01.txt": (None, "unknown_symbol"),
}


@pytest.mark.parametrize("capture", sorted(CAPTURED))
def test_the_real_captures_when_the_clone_has_them(capture):
    dmesg_name, cause = CAPTURED[capture]
    for name in filter(None, (capture, dmesg_name)):
        if not (IB_STACK / name).exists():
            pytest.skip("%s is not under %s (its text is embedded above)" % (name, IB_STACK))
    dmesg = (IB_STACK / dmesg_name).read_text() if dmesg_name else ""
    assert peermem_failure((IB_STACK / capture).read_text(), dmesg)["cause"] == cause


def test_the_embedded_captures_are_the_real_files_when_the_clone_has_them():
    for name, text in (("nvidia-peermem-modprobe-fail-01.txt", PEERMEM_MODPROBE_FAIL),
                       ("dmesg-nvidia-peermem-symbols-01.txt", PEERMEM_DMESG),
                       ("modprobe-nv_peer_mem-unknown-symbol-01.txt", NV_PEER_MEM_UNKNOWN_SYMBOL)):
        if (IB_STACK / name).exists():
            assert (IB_STACK / name).read_text() == text, name
