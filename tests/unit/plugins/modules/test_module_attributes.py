"""Every module declares its attributes (check mode, diff mode) through the collection's doc fragments, and a
module that only reads never claims diff support."""

import importlib
import pathlib

import pytest

import module_docs  # tests/tools, on sys.path via tests/unit/conftest.py

MODULES = sorted(p.stem for p in (pathlib.Path(__file__).resolve().parents[4] / "plugins" / "modules").glob("*.py")
                 if p.stem != "__init__")


@pytest.mark.parametrize("name", MODULES)
def test_module_declares_check_mode_and_diff_mode(name):
    module = importlib.import_module("ansible_collections.hpcnet.rdma.plugins.modules." + name)
    doc = module_docs.documentation(module)
    fragments = doc.get("extends_documentation_fragment", [])
    assert any(f.startswith("hpcnet.rdma.attributes") for f in fragments), name
    attributes = doc["attributes"]
    assert attributes["check_mode"]["support"] == "full", name
    assert attributes["diff_mode"]["support"] in ("full", "none"), name
    read_only = "hpcnet.rdma.attributes.read_only" in fragments
    assert (attributes["diff_mode"]["support"] == "none") == read_only, name
    if "sysfs_root" in doc["options"]:
        assert "hpcnet.rdma.sysfs_root" in fragments, "%s documents sysfs_root itself" % name
