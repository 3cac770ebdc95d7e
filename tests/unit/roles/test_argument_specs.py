"""Every role's defaults and meta/argument_specs.yml agree: the spec is the contract."""

from __future__ import annotations

from pathlib import Path

import re

import pytest
import yaml

ROLES = sorted(p for p in (Path(__file__).resolve().parents[3] / "roles").iterdir() if (p / "meta/argument_specs.yml").exists())
PY_TYPES = {"str": str, "bool": bool, "int": int, "float": (int, float), "list": list, "dict": dict, "path": str,
            "raw": object}


def _load(role):
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
    spec = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    return defaults, spec


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_every_default_has_a_spec_entry_and_back(role):
    defaults, spec = _load(role)
    assert set(defaults) == set(spec)


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_every_input_is_prefixed_with_the_role_name_and_described(role):
    _defaults, spec = _load(role)
    for name, entry in spec.items():
        assert name.startswith(role.name + "_"), name
        assert entry.get("description"), name


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_defaults_match_spec_type_default_and_choices(role):
    defaults, spec = _load(role)
    for name, value in defaults.items():
        entry = spec[name]
        if isinstance(value, str) and "{{" in value:
            continue  # templated from a collection-wide variable; the spec documents the effective default
        if value is None:
            assert not entry.get("required"), name
            continue
        assert isinstance(value, PY_TYPES[entry["type"]]), name
        assert entry.get("default") == value, name
        if "choices" in entry:
            values = value if entry["type"] == "list" else [value]
            assert all(v in entry["choices"] for v in values), name


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_readme_table_is_generated_from_the_spec(role):
    import role_readme  # tests/tools, on sys.path via tests/unit/conftest.py

    assert (role / "README.md").read_text() == role_readme.render(role), "run tests/tools/role_readme.py"


def _entry_points_used():
    """(role, entry point) of every include_role / import_role with tasks_from in roles/ and playbooks/."""
    repo = Path(__file__).resolve().parents[3]
    used = set()
    for path in sorted(list((repo / "roles").rglob("*.yml")) + list((repo / "playbooks").rglob("*.yml"))):
        text = path.read_text()
        for block in re.finditer(r"name: hpcnet\.rdma\.(\w+)\s*\n\s*tasks_from: ([\w.]+)", text):
            used.add((block.group(1), block.group(2), str(path.relative_to(repo))))
    return sorted(used)


@pytest.mark.parametrize("role,entry,where", _entry_points_used(), ids=lambda v: str(v))
def test_every_entry_point_a_playbook_or_role_uses_has_an_argument_spec(role, entry, where):
    repo = Path(__file__).resolve().parents[3]
    specs = yaml.safe_load((repo / "roles" / role / "meta/argument_specs.yml").read_text())["argument_specs"]
    # Ansible looks the spec up by tasks_from as written: "preflight.yml" would find no entry point and check nothing
    assert not re.search(r"\.ya?ml$", entry), "%s: tasks_from %s; name the entry point without .yml" % (where, entry)
    assert entry in specs, "%s uses hpcnet.rdma.%s tasks_from %s, which has no argument spec" % (where, role, entry)


def test_entry_points_that_read_the_roles_inputs_share_the_main_spec():
    repo = Path(__file__).resolve().parents[3]
    for role, entries in {"roce": ["preflight", "drift"], "infiniband": ["preflight"], "nccl": ["preflight"]}.items():
        specs = yaml.safe_load((repo / "roles" / role / "meta/argument_specs.yml").read_text())["argument_specs"]
        for entry in entries:
            assert specs[entry]["options"] == specs["main"]["options"], (role, entry)


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_readme_says_what_facts_it_publishes_and_reads(role):
    text = (role / "README.md").read_text()
    section = text.split("## Facts between roles", 1)
    assert len(section) == 2, "%s/README.md has no 'Facts between roles' section" % role.name
    assert "- Publishes:" in section[1] and "- Reads:" in section[1]
