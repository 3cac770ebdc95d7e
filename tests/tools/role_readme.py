#!/usr/bin/env python3
"""Render each role's README.md input table from its meta/argument_specs.yml (the contract).

Usage: role_readme.py [--check] [ROLE_DIR ...]   (default: every role under roles/)
--check exits 1 when a README is out of date, without writing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
BEGIN = "<!-- BEGIN generated from meta/argument_specs.yml -->"
END = "<!-- END generated -->"


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _default(option):
    if "default" not in option:
        return "required" if option.get("required") else ""
    return "`%s`" % (yaml.safe_dump(option["default"], default_flow_style=True).strip().removesuffix("\n...").strip(),)


def render_table(spec):
    """Return the Markdown table of a role's ``main`` entry point options."""
    main = spec["argument_specs"]["main"]
    rows = ["| Variable | Type | Default | Choices | Description |", "|---|---|---|---|---|"]
    for name, option in main.get("options", {}).items():
        description = option.get("description", "")
        if isinstance(description, list):
            description = " ".join(description)
        choices = ", ".join("`%s`" % c for c in option.get("choices", []))
        rows.append("| `%s` | %s | %s | %s | %s |" % (name, option.get("type", "str"), _cell(_default(option)), choices, _cell(description)))
    return "\n".join(rows)


def render(role_dir):
    """Return the README text of a role with its table regenerated."""
    spec = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text())
    readme = role_dir / "README.md"
    block = "%s\n%s\n%s" % (BEGIN, render_table(spec), END)
    if readme.exists() and BEGIN in readme.read_text():
        text = readme.read_text()
        head, rest = text.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    main = spec["argument_specs"]["main"]
    description = main.get("description", [])
    return "# hpcnet.rdma.%s\n\n%s\n\n%s\n\n## Variables\n\n%s\n" % (
        role_dir.name, main["short_description"], "\n".join("- %s" % d for d in description), block)


def main(argv):
    check = "--check" in argv
    dirs = [Path(a) for a in argv if a != "--check"] or sorted(p.parent.parent for p in ROOT.glob("roles/*/meta/argument_specs.yml"))
    stale = []
    for role_dir in dirs:
        text = render(role_dir)
        readme = role_dir / "README.md"
        if not readme.exists() or readme.read_text() != text:
            stale.append(str(readme))
            if not check:
                readme.write_text(text)
    if check and stale:
        print("out of date (run tests/tools/role_readme.py): %s" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
