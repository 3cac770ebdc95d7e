"""A module's DOCUMENTATION with the collection's doc fragments merged in, as ansible-doc shows it (test helper)."""

from __future__ import annotations

import importlib

import yaml

FRAGMENTS = "ansible_collections.hpcnet.rdma.plugins.doc_fragments"


def documentation(module):
    """``module``'s DOCUMENTATION as a dict, with its ``extends_documentation_fragment`` options and attributes merged
    (the module's own entries win, as in Ansible)."""
    doc = yaml.safe_load(module.DOCUMENTATION)
    for name in doc.get("extends_documentation_fragment", []):
        parts = name.split(".")
        assert parts[:2] == ["hpcnet", "rdma"], "a fragment of another collection: %s" % name
        fragment_class = importlib.import_module("%s.%s" % (FRAGMENTS, parts[2])).ModuleDocFragment
        fragment = yaml.safe_load(getattr(fragment_class, parts[3].upper() if len(parts) > 3 else "DOCUMENTATION"))
        for key in ("options", "attributes"):
            merged = dict(fragment.get(key) or {})
            merged.update(doc.get(key) or {})
            if merged:
                doc[key] = merged
    return doc
