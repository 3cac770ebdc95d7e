"""The demo test bed is set up as the README says: srun gets srun's arguments and Slurm wires MPI ranks through PMIx
(MpiDefault=pmix, as GPU clusters set it), and a demo host reboots through playbooks/rolling_reboot.yml (Docker
starts a container again after `systemctl reboot`). `make demo-launcher` and `make demo-reboot` run them for real."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import verify_nccl

ROOT = Path(__file__).resolve().parents[3]
DEMO_VARS = yaml.safe_load((ROOT / "inventories/demo/hosts.yml").read_text())["all"]["vars"]


def _tasks(path):
    return [t for play in yaml.safe_load((ROOT / path).read_text()) for t in play.get("tasks") or []]


def test_switching_the_demo_to_srun_hands_it_no_mpirun_option():
    for launcher, own in (("srun", "verify_srun_args"), ("mpirun", "verify_mpirun_args")):
        args = verify_nccl.launcher_args(launcher, DEMO_VARS.get("verify_launcher_args"), DEMO_VARS.get(own))
        assert ("--mca" in args) == (launcher == "mpirun"), (launcher, args)


def test_the_demo_slurm_wires_mpi_ranks_through_pmix():
    conf = yaml.safe_load((ROOT / "tests/container/slurm-up.yml").read_text())[0]["vars"]["__testbed_slurm_conf"]
    assert "\nMpiDefault=pmix\n" in conf


def test_a_demo_host_comes_back_after_systemctl_reboot():
    [start] = [t for t in _tasks("tests/container/demo-up.yml") if "community.docker.docker_container" in t]
    assert start["community.docker.docker_container"]["restart_policy"] == "unless-stopped"
    assert DEMO_VARS["rolling_reboot_command"] == "systemctl reboot"
    # PID 1 restarts without a new kernel: the boot_id stays, PID 1's start time tells the new boot
    assert DEMO_VARS["rolling_reboot_boot_time_command"] == "ps -o lstart= -p 1"
