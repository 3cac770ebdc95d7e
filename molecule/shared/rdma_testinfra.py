"""Testinfra helpers and fixtures shared by the Molecule scenarios of hpcnet.rdma.

Loaded by molecule/conftest.py (molecule/pytest.ini puts this folder on sys.path). The tests read their
expectations from the scenario's inventory (molecule.yml host_vars: expected_nccl_conf, expected_link_layer,
expected_gid_index, expected_mtu) through the `hostvars` fixture, and run the collection's own modules on the
host through testinfra's Ansible backend (`rdma_facts`).

How the modules are found: `molecule verify` starts pytest with Molecule's environment, whose
ANSIBLE_COLLECTIONS_PATH starts with $ANSIBLE_HOME/collections, where Molecule installed this checkout of
hpcnet.rdma before the run; testinfra's `host.ansible(...)` runs the `ansible` command with that environment.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

COLLECTION = "hpcnet.rdma"


def parse_nccl_conf(text: str) -> dict[str, str]:
    r"""Settings of an nccl.conf as NCCL reads them (setEnvFile() in NCCL's src/misc/param.cc).

    NCCL skips lines that start with '#' (only in the first column), drops the '\n', skips lines without '=',
    and takes the name before the first '=' and the rest as the value, both verbatim (no trimming; a stray '\r'
    stays in the value, as NCCL's getline() reader keeps it) and cut at 1023 characters. It does not overwrite a
    variable that is already set, so the first line of a name wins.
    """
    settings: dict[str, str] = {}
    for line in text.split("\n"):
        if line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        settings.setdefault(name[:1023], value[:1023])
    return settings


def nccl_conf_repeated_names(text: str) -> list[str]:
    """Names set on more than one line (NCCL silently ignores all but the first)."""
    names = [line.split("=", 1)[0] for line in text.split("\n") if not line.startswith("#") and "=" in line]
    return sorted({name for name in names if names.count(name) > 1})


def nccl_ib_hca_ports(value: str | None) -> list[tuple[str, int]]:
    """(device, port) pairs of an NCCL_IB_HCA value such as '=mlx5_0:1,mlx5_1:1' (leading '=' or '^' dropped)."""
    if not value:
        return []
    pairs = []
    for item in value.lstrip("=^").split(","):
        dev, _, port = item.partition(":")
        pairs.append((dev, int(port) if port else 1))
    return pairs


def parse_ibv_devinfo(text: str) -> dict[str, dict]:
    """Plain `ibv_devinfo` output: {hca_id: {field: value, ..., 'ports': {port_number: {field: value}}}}.

    Nesting is read from the indentation (tabs as rdma-core prints them, or the spaces they become when copied).
    """
    devices: dict[str, dict] = {}
    dev = port = None
    port_indent = 0
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        indent = len(line.expandtabs()) - len(line.expandtabs().lstrip())
        value = value.strip()
        if indent == 0 and key == "hca_id":
            dev, port = devices.setdefault(value, {"ports": {}}), None
        elif dev is None:
            continue
        elif key == "port" and value.isdigit():
            port, port_indent = dev["ports"].setdefault(int(value), {}), indent
        elif port is not None and indent > port_indent:
            port[key] = value
        else:
            dev[key], port = value, None
    return devices


def collection_path() -> Path | None:
    """The copy of hpcnet.rdma that Ansible would load: the first one along ANSIBLE_COLLECTIONS_PATH."""
    namespace, name = COLLECTION.split(".")
    for entry in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep):
        if not entry:
            continue
        root = Path(entry).expanduser()
        for candidate in (root / "ansible_collections" / namespace / name, root / namespace / name):
            if (candidate / "plugins" / "modules").is_dir():
                return candidate
    return None


@pytest.fixture(scope="module")
def hostvars(host) -> dict:
    """The host's inventory variables as Molecule wrote them (scenario host_vars and base config group_vars)."""
    return host.ansible.get_variables()


def _run_rdma_facts(host, hostvars: dict) -> dict:
    # as the roles read them: the host's groups and rdma_port_roles give each port its role and rail
    args = {"sysfs_root": hostvars.get("rdma_sysfs_root", "/sys"), "fabrics": list(hostvars.get("group_names", []))}
    if hostvars.get("rdma_port_roles"):
        args["port_roles"] = hostvars["rdma_port_roles"]
    return host.ansible(f"{COLLECTION}.rdma_facts", json.dumps(args), check=False)


@pytest.fixture(scope="session", autouse=True)
def _rdma_facts_runs(request) -> dict:
    """One rdma_facts run per host that a collected test needs it for, started with the session, all at once.

    Each run is one `ansible` process (seconds of start-up), so they run side by side, and beside the other tests.
    """
    hosts = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "rdma_facts_result" in item.fixturenames:
            host = callspec.params.get("_testinfra_host")
            if host is not None:
                hosts.setdefault(host.backend.host, host)
    if not hosts:
        return {}
    # Read the inventory here, once, before the threads use it.
    variables = {name: host.ansible.get_variables() for name, host in hosts.items()}
    pool = ThreadPoolExecutor(max_workers=len(hosts))
    request.addfinalizer(pool.shutdown)
    return {name: pool.submit(_run_rdma_facts, host, variables[name]) for name, host in hosts.items()}


@pytest.fixture(scope="module")
def rdma_facts_result(host, hostvars, _rdma_facts_runs) -> dict:
    """Result of hpcnet.rdma.rdma_facts run on the host through testinfra's Ansible backend (once per host)."""
    name = hostvars["inventory_hostname"]
    run = _rdma_facts_runs.get(name)
    try:
        result = run.result() if run is not None else _run_rdma_facts(host, hostvars)
    except host.ansible.AnsibleException as exc:
        result = exc.result
    # A module Ansible cannot resolve comes back as {'changed': False, 'msg': ...}, without 'failed'.
    if result.get("failed") or "rdma" not in result.get("ansible_facts", {}):
        pytest.fail(
            f"{COLLECTION}.rdma_facts gave no facts on {name}: {result.get('msg', result)}\n"
            f"{COLLECTION} found on ANSIBLE_COLLECTIONS_PATH at: {collection_path()} "
            "(run the tests with `molecule verify`, which installs the collection into "
            "$ANSIBLE_HOME/collections and puts it first on that path)",
            pytrace=False,
        )
    return result


@pytest.fixture(scope="module")
def rdma_facts(rdma_facts_result) -> dict:
    """ansible_facts.rdma of the host."""
    return rdma_facts_result["ansible_facts"]["rdma"]


@pytest.fixture(scope="module")
def expected_ports(hostvars) -> list[tuple[str, int]]:
    """The (device, port) pairs the scenario expects in NCCL_IB_HCA; empty for a host without RDMA."""
    return nccl_ib_hca_ports(hostvars["expected_nccl_conf"].get("NCCL_IB_HCA"))


@pytest.fixture(scope="module")
def rdma_host(hostvars) -> dict:
    """hostvars of a host that the scenario expects to have RDMA ports (expected_link_layer set); skips others."""
    if hostvars.get("expected_link_layer") is None:
        pytest.skip("the scenario expects no RDMA device on this host")
    return hostvars


@pytest.fixture(scope="module")
def rdma_less_host(hostvars) -> dict:
    """hostvars of a host that the scenario expects to have no RDMA device (expected_link_layer null)."""
    if hostvars.get("expected_link_layer") is not None:
        pytest.skip("the scenario expects RDMA devices on this host")
    return hostvars
