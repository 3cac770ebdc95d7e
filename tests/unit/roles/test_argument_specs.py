"""Every role's defaults and meta/argument_specs.yml agree: the spec is the contract."""

from __future__ import annotations

from pathlib import Path

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
