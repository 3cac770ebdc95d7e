"""Every role's defaults and meta/argument_specs.yml agree: the spec is the contract."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
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


# ---- a role variable that becomes a module option with choices: the role's spec (checked first) has those choices,
# so that a value outside them is refused naming the variable the user set, not the module option it becomes ----
REPO = Path(__file__).resolve().parents[3]
# filters that keep a value as it is, or map each choice as the module will get it
CHOICE_FILTERS = {"string": str, "lower": lambda v: str(v).lower(), "upper": lambda v: str(v).upper(),
                  "trim": lambda v: str(v).strip()}
TASK_KEYS = {"block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"}


def _role_inputs():
    """{variable: [(role, entry point, its spec entry)]} of every role of the collection."""
    inputs = {}
    for role in ROLES:
        for entry, spec in yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"].items():
            for name, option in (spec.get("options") or {}).items():
                inputs.setdefault(name, []).append((role.name, entry, option))
    return inputs


def _collection_module_options(name):
    path = REPO / "plugins" / "modules" / (name + ".py")
    match = re.search(r'^DOCUMENTATION\s*=\s*r?("""|\'\'\')(.*?)\1', path.read_text(), re.S | re.M)
    return yaml.safe_load(match.group(2))["options"]


def _other_module_options(names):
    """{module: its options} of modules outside this collection, from ansible-doc in its own process (no plugin
    loader set up in this one); a module of a collection not installed here is left out."""
    if not names:
        return {}
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-doc"), "--json", "-t", "module"] + sorted(names),
                         cwd=REPO, env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
                         capture_output=True, text=True, check=False, timeout=300)
    docs = json.loads(run.stdout or "{}")
    return dict((name, (entry.get("doc") or {}).get("options") or {}) for name, entry in docs.items())


def _tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in TASK_KEYS & set(node):
            yield from _tasks(node[key])


def _options_with_choices(args, doc, where):
    """(where, option path, its choices, the value given) of each module option with choices among ``args``."""
    for key, value in (args or {}).items():
        option = (doc or {}).get(key) or {}
        if isinstance(value, dict) and option.get("suboptions"):
            yield from _options_with_choices(value, option["suboptions"], where + "." + key)
        elif isinstance(value, str) and option.get("choices"):
            yield where + "." + key, option["choices"], value


@functools.lru_cache(maxsize=None)
def _module_calls():
    """(file, module, its arguments, its options doc) of every task of the roles and playbooks that calls a module."""
    tasks = []
    for path in sorted(list((REPO / "roles").glob("*/tasks/*.yml")) + list((REPO / "roles").glob("*/handlers/*.yml"))
                       + list((REPO / "playbooks").rglob("*.yml"))):
        for task in _tasks(yaml.safe_load(path.read_text())):
            tasks.extend((str(path.relative_to(REPO)), key, args) for key, args in task.items()
                         if isinstance(args, dict) and "." in key
                         and not key.startswith(("ansible.builtin.include", "ansible.builtin.import")))
    others = _other_module_options(set(key for _path, key, _args in tasks if not key.startswith("hpcnet.rdma.")))
    return [(path, key, args, _collection_module_options(key.rsplit(".", 1)[1]) if key.startswith("hpcnet.rdma.")
             else others[key]) for path, key, args in tasks if key.startswith("hpcnet.rdma.") or key in others]


@functools.lru_cache(maxsize=None)
def _variable_flows():
    """(where, role variable, the filters it goes through, the module option's choices) for each module option with
    choices whose value is a role variable, as it is or through filters."""
    inputs = _role_inputs()
    flows = []
    for path, module, args, doc in _module_calls():
        for where, choices, value in _options_with_choices(args, doc, "%s %s" % (path, module)):
            match = re.fullmatch(r"\{\{\s*(\w+)((?:\s*\|\s*[\w.]+(?:\([^)]*\))?)*)\s*\}\}", value.strip())
            if match and match.group(1) in inputs:
                filters = [f.strip() for f in match.group(2).split("|") if f.strip()]
                flows.append((where, match.group(1), filters, choices))
            else:
                # an expression: it must not carry a role variable's value into the option unchecked
                named = set(re.findall(r"\b([a-z][a-z0-9_]*)\b", value)) & set(inputs)
                assert not named or re.search(r"\bif\b", value), (
                    "%s: %s reaches an option with choices through %s; teach this test the expression"
                    % (where, sorted(named), value))
    return flows


def test_the_walk_finds_the_role_variables_that_become_module_options_with_choices():
    # the walk itself can fail: these are known members (a refactor that hides them from it breaks the test)
    found = set((variable, where.rsplit(".", 1)[1]) for where, variable, _filters, _choices in _variable_flows())
    # and it reads the options of the modules of other collections too (ansible-doc answered)
    assert "choices" in dict((module, doc) for _path, module, _args, doc in _module_calls())[
        "ansible.builtin.systemd_service"]["state"]
    assert {("health_expect_gdr", "gdr"), ("health_metrics", "metrics"), ("firmware_tool", "tool"),
            ("ofed_provider", "provider"), ("ofed_device_naming", "device_naming"), ("roce_backend", "backend")} <= found


@pytest.mark.parametrize("flow", _variable_flows(), ids=lambda flow: "%s-%s" % (flow[1], flow[0].rsplit(".", 1)[1]))
def test_a_role_variable_passed_to_a_module_option_with_choices_has_the_same_choices_in_its_spec(flow):
    where, variable, filters, choices = flow
    for role, entry, option in _role_inputs()[variable]:
        assert option.get("choices"), (
            "%s becomes %s, which takes %s, but hpcnet.rdma.%s's %s spec has no choices for it: a value outside them "
            "would be refused naming the module option, not %s" % (variable, where, choices, role, entry, variable))
        given = []
        for value in option["choices"]:
            for name in filters:
                name = name.split("(", 1)[0]
                if name == "default":
                    continue
                assert name in CHOICE_FILTERS, "%s: %s goes through | %s; teach this test what it does" % (where, variable, name)
                value = CHOICE_FILTERS[name](value)
            given.append(value)
        assert set(given) == set(choices), (
            "%s's choices in hpcnet.rdma.%s's %s spec (%s) become %s at %s, which takes %s"
            % (variable, role, entry, option["choices"], sorted(set(given)), where, choices))
