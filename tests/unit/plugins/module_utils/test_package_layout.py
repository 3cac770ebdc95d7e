"""The layout of plugins/module_utils (plugins/module_utils/README.md): packages by domain, each with its map, imports
in one direction, no file in plugins/ over 600 lines, and no import cycle between files."""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[4]
MU = ROOT / "plugins" / "module_utils"
PREFIX = "ansible_collections.hpcnet.rdma.plugins.module_utils"

# what each package may import of the others (its own files always); the base packages import none
BASE = {"sysfs", "runner"}
DOMAIN = {"stack", "firmware", "qos", "infiniband", "host", "nccl_log", "fabric", "pcie"}
ALLOWED = dict([(p, set()) for p in BASE] + [(p, BASE) for p in DOMAIN]
               + [("nccl", BASE | DOMAIN), ("verify", BASE | DOMAIN), ("play", BASE | DOMAIN)]
               # the health check runs verify's checks on the host itself
               + [("health", BASE | DOMAIN | {"verify"})])
MAX_LINES = 600


def _imports(path):
    """Full names of the collection's module_utils modules ``path`` imports."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            for alias in node.names:
                candidate = node.module + "." + alias.name
                rel = candidate[len(PREFIX) + 1:].replace(".", "/")
                out.add(candidate if (MU / (rel + ".py")).exists() else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith(PREFIX))
    return out


def _name(path):
    rel = path.relative_to(MU).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join((PREFIX,) + parts)


FILES = sorted(MU.rglob("*.py"))


def test_every_file_is_in_a_package_with_a_map():
    loose = [p.name for p in MU.glob("*.py")]
    assert loose == [], "module_utils files outside a package: %s" % loose
    packages = sorted(p.name for p in MU.iterdir() if p.is_dir() and not p.name.startswith("__"))
    assert set(packages) == set(ALLOWED), "a package without an import rule here, or a rule without its package"
    for package in packages:
        assert (MU / package / "__init__.py").exists(), package
        readme = MU / package / "README.md"
        assert readme.exists(), "%s has no README.md (its map)" % package
        text = readme.read_text()
        for path in sorted((MU / package).glob("*.py")):
            if path.name != "__init__.py":
                assert "`%s`" % path.name in text, "%s/README.md does not name %s" % (package, path.name)
    top = (MU / "README.md").read_text()
    for package in packages:
        assert "`%s/`" % package in top, "module_utils/README.md does not list %s/" % package


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(MU)))
def test_imports_go_one_way(path):
    package = path.relative_to(MU).parts[0]
    for imported in _imports(path):
        other = imported[len(PREFIX) + 1:].split(".")[0]
        assert other == package or other in ALLOWED[package], (
            "%s imports %s: %s/ may import only %s" % (path.relative_to(MU), imported, package,
                                                     sorted(ALLOWED[package]) or "nothing of the collection"))


def test_no_import_cycle_between_files():
    graph = dict((_name(p), set(i for i in _imports(p) if i != _name(p))) for p in FILES)
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in graph.get(node, ()):
            if state.get(nxt) == "open":
                raise AssertionError("import cycle: %s" % " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [node])


def test_no_file_in_plugins_is_over_the_limit():
    over = ["%s (%d)" % (p.relative_to(ROOT), n) for p in sorted((ROOT / "plugins").rglob("*.py"))
            for n in [len(p.read_text().splitlines())] if n > MAX_LINES]
    assert over == [], "over %d lines: %s" % (MAX_LINES, ", ".join(over))



def test_programs_run_only_through_the_runner():
    """No file in plugins/ but runner/tool_runner.py imports subprocess or calls run_command: one command runner."""
    runner = MU / "runner" / "tool_runner.py"
    offenders = []
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        if path == runner:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "subprocess" for a in node.names):
                offenders.append("%s imports subprocess" % path.relative_to(ROOT))
            elif isinstance(node, ast.ImportFrom) and node.module == "subprocess":
                offenders.append("%s imports from subprocess" % path.relative_to(ROOT))
            elif isinstance(node, ast.Attribute) and node.attr == "run_command":
                offenders.append("%s calls run_command" % path.relative_to(ROOT))
    assert offenders == []


def test_tests_mirror_the_packages_they_test():
    """A package's tests sit in tests/unit/plugins/module_utils/<package>/, a folder per package of module_utils
    (and no test folder for a package that does not exist); only this file, which holds them all to the layout, and
    the shared fixtures sit beside them."""
    here = pathlib.Path(__file__).resolve().parent
    packages = set(p.name for p in MU.iterdir() if p.is_dir() and (p / "README.md").exists())
    folders = set(p.name for p in here.iterdir() if p.is_dir() and p.name not in ("fixtures", "__pycache__"))
    assert folders <= packages, "test folders without a module_utils package: %s" % sorted(folders - packages)
    loose = sorted(p.name for p in here.glob("test_*.py") if p.name != pathlib.Path(__file__).name)
    assert loose == [], "tests of a package belong in its folder: %s" % loose
