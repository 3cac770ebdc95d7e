"""The platform_vars lookup: a role's per-OS files merged for the host's facts, and every role's files complete."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader

from ansible_collections.hpcnet.rdma.plugins.lookup.platform_vars import LookupModule, platform_names

REPO = Path(__file__).resolve().parents[4]
DEBIAN = {"os_family": "Debian", "distribution": "Ubuntu", "distribution_major_version": "24"}
REDHAT = {"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "9"}


def run(directory, facts):
    return LookupModule(loader=DataLoader()).run([str(directory)], variables={"ansible_facts": facts})


def test_names_go_from_the_family_to_the_major_version():
    assert platform_names(DEBIAN) == ["Debian", "Ubuntu", "Ubuntu_24"]
    assert platform_names({"os_family": "Debian"}) == ["Debian"]
    assert platform_names({}) == []


def test_a_later_file_wins_and_missing_files_are_skipped(tmp_path):
    (tmp_path / "Debian.yml").write_text("packages: [iproute2]\nprovider: networkd\n")
    (tmp_path / "Ubuntu_24.yml").write_text("provider: netplan\n")
    assert run(tmp_path, DEBIAN) == [{"packages": ["iproute2"], "provider": "netplan"}]


def test_an_unsupported_platform_gets_an_empty_mapping(tmp_path):
    (tmp_path / "Debian.yml").write_text("packages: [iproute2]\n")
    assert run(tmp_path, {"os_family": "Suse", "distribution": "SLES"}) == [{}]


def test_without_facts_it_says_to_gather_them(tmp_path):
    with pytest.raises(AnsibleLookupError, match="needs ansible_facts.os_family .* gather facts first"):
        run(tmp_path, {})


def test_a_file_that_is_not_a_mapping_is_refused_with_its_path(tmp_path):
    (tmp_path / "Debian.yml").write_text("- iproute2\n")
    with pytest.raises(AnsibleLookupError, match="Debian.yml is not a mapping"):
        run(tmp_path, DEBIAN)


def test_values_are_data_not_templates(tmp_path):
    (tmp_path / "Debian.yml").write_text("headers: \"linux-headers-{{ kernel }}\"\n")
    assert run(tmp_path, DEBIAN) == [{"headers": "linux-headers-{{ kernel }}"}]


ROLES = sorted(p.parent.parent.name for p in REPO.glob("roles/*/vars/main.yml")
               if "platform_vars" in p.read_text())


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("facts", [DEBIAN, REDHAT], ids=["Debian", "RedHat"])
def test_every_key_a_role_reads_is_in_its_files_for_each_supported_family(role, facts):
    """vars/main.yml reads __<role>_platform['__<role>_key']: each supported family's file has the key, and the files hold no
    template (the lookup returns data)."""
    main = (REPO / "roles" / role / "vars" / "main.yml").read_text()
    wanted = set(re.findall(r"__%s_platform\['(__\w+)'\]" % role, main))
    assert wanted, "roles/%s/vars/main.yml reads no platform key" % role
    data = run(REPO / "roles" / role / "vars", facts)[0]
    assert wanted <= set(data), "roles/%s/vars/%s.yml lacks %s" % (role, facts["os_family"], wanted - set(data))
    assert "{{" not in json.dumps(data)
