# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/architecture.md, the page to read first, against the tree: the counts of roles, playbooks and modules in its
first sentence, every module in its module list, every module_utils package in its package map, every role in its
phase table."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PAGE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
NUMBERS = dict((word, n) for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty".split()))


def _count(what):
    """The number the page's first sentence gives for ``what`` (roles, playbooks, modules), as a word or digits."""
    intro = PAGE.split("\n\n")[1]
    found = re.search(r"\b(\w+) %s\b" % what, intro)
    assert found, "the first paragraph of docs/architecture.md gives no number of %s" % what
    word = found.group(1).lower()
    assert word.isdigit() or word in NUMBERS, "%r is no number (of %s)" % (word, what)
    return int(word) if word.isdigit() else NUMBERS[word]


def _roles():
    """The roles to run (``common`` holds the task files they share: the page names it apart)."""
    return sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir() and p.name != "common")


def _modules():
    return sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")


def _packages():
    return sorted(p.name for p in (REPO / "plugins" / "module_utils").iterdir()
                  if p.is_dir() and (p / "__init__.py").is_file())


def test_the_counts_match_the_tree():
    assert _count("roles") == len(_roles()), _roles()
    assert _count("playbooks") == len(list((REPO / "playbooks").glob("*.yml")))
    assert _count("modules") == len(_modules()), _modules()


def test_every_module_is_in_the_module_list():
    listed = PAGE[PAGE.index("- `plugins/modules/`"):PAGE.index("- `plugins/module_utils/`")]
    assert [m for m in _modules() if "`%s`" % m not in listed] == []


def test_every_package_is_in_the_package_map():
    section = PAGE[PAGE.index("- `plugins/module_utils/`"):PAGE.index("- `plugins/filter/`")]
    assert [p for p in _packages() if "`%s/`" % p not in section] == []
    named = set(re.findall(r"`(\w+)/`", section)) - {"plugins"}
    assert sorted(named - set(_packages())) == [], "the map names packages that are not in the tree"


def test_every_role_has_a_row_in_the_phase_table():
    rows = set(re.findall(r"^\| (\w+) \|", PAGE, re.M))
    assert [r for r in _roles() if r not in rows] == []
