"""tests/unit/conftest.py: the scopes pytest-xdist workers take whole (make unit runs two workers)."""
from pathlib import Path

import yaml

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
CATALOGUE = yaml.safe_load((CONFTEST.parents[1] / "bad_inputs" / "catalogue.yml").read_text(encoding="utf-8"))
TEST = "tests/unit/playbooks/test_bad_inputs.py::test_bad_input_fails_with_its_message_and_changes_nothing[%s]"


def _xdist_scope(pytestconfig):
    return pytestconfig.pluginmanager.get_plugin(str(CONFTEST)).xdist_scope


def test_the_entries_of_one_shared_run_are_one_scope_and_a_lone_entry_its_own(pytestconfig):
    scope = _xdist_scope(pytestconfig)
    shared = [e["id"] for e in CATALOGUE if e["playbook"] == "site.yml" and e["group"] == "infiniband"
              and e["profile"] == "cx7_ib_ndr_8x" and not (e.get("netns") or e.get("hosts") or e.get("alone"))]
    assert len(shared) > 1 and len({scope(TEST % entry) for entry in shared}) == 1
    alone = [e["id"] for e in CATALOGUE if e["playbook"] == "verify.yml"][:2]
    assert len({scope(TEST % entry) for entry in alone}) == 2
    assert scope(TEST % shared[0]) not in {scope(TEST % entry) for entry in alone}


def test_other_tests_go_by_their_file(pytestconfig):
    scope = _xdist_scope(pytestconfig)
    assert scope("tests/unit/playbooks/test_site_awx_runner.py::test_awx_job[site.yml-from-repo]") == \
        "tests/unit/playbooks/test_site_awx_runner.py"
    catalogue_file = "tests/unit/playbooks/test_bad_inputs.py"
    assert scope(catalogue_file + "::test_every_entry_has_the_catalogue_fields_and_a_unique_id") == catalogue_file
