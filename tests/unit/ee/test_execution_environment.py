"""The execution environment for AWX / Ansible Automation Platform: what `ansible-builder create` puts in the image.

`ansible-builder create` only writes a build context (Containerfile, _build/), so it runs offline. The image
build itself (`ansible-builder build`) needs a registry and is not run here; these tests instead replay the two
build steps that decide what the image holds, with the context's own files: the galaxy stage (ansible-galaxy
installs _build/requirements.yml from /build) and the builder stage (_build/scripts/introspect.py collects the
Python and system packages of the installed collections). They check that the image gets exactly what the
collection declares, and that what it declares matches what its content uses.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
EE_FILE = REPO_ROOT / "execution-environment.yml"
AWX_REQUIREMENTS = REPO_ROOT / "collections" / "requirements.yml"
COLLECTION_EE_META = REPO_ROOT / "meta" / "execution-environment.yml"
# Content the collection ships and runs (tests/, molecule/ and inventories/demo/ are development only).
CONTENT_DIRS = ("roles", "playbooks", "plugins")
# Controller-side plugin types: these run in the execution environment, not on the managed hosts.
CONTROLLER_PLUGIN_DIRS = ("action", "become", "cache", "callback", "cliconf", "connection", "filter", "httpapi",
                          "inventory", "lookup", "netconf", "shell", "strategy", "terminal", "test", "vars")
NOT_DEPENDENCIES = {"hpcnet.rdma", "ansible.builtin", "ansible.legacy"}

_NAME = r"[a-z_][a-z0-9_]*"
# ns.coll.name on its own: not part of a longer dotted chain (os.path.join.x, ansible_collections.a.b.c).
_FQCN_TOKEN = re.compile(r"(?<![\w.])(%s)\.(%s)\.(%s)(?!\w|\.\w)" % (_NAME, _NAME, _NAME))
# In Jinja: a filter, test or lookup of any collection, known to this venv or not.
_JINJA_PLUGIN = re.compile(r"(?:\||\bis\s+(?:not\s+)?|\b(?:lookup|query|q)\(\s*['\"])\s*(%s)\.(%s)\.%s" % (_NAME, _NAME, _NAME))
# The same, with the plugin type and name: which controller-side plugins of other collections the content runs.
_JINJA_PLUGIN_USES = (
    ("filter", re.compile(r"\|\s*(%s)\.(%s)\.(%s)" % (_NAME, _NAME, _NAME))),
    ("test", re.compile(r"\bis\s+(?:not\s+)?(%s)\.(%s)\.(%s)" % (_NAME, _NAME, _NAME))),
    ("lookup", re.compile(r"\b(?:lookup|query|q)\(\s*['\"](%s)\.(%s)\.(%s)" % (_NAME, _NAME, _NAME))),
)
_PY_COLLECTION_IMPORT = re.compile(r"\bansible_collections\.(%s)\.(%s)\b" % (_NAME, _NAME))
_FQCN_STRING = re.compile(r"^(%s)\.(%s)\.%s$" % (_NAME, _NAME, _NAME))
_FQCN_VALUED_KEYS = {"role", "connection", "ansible_connection", "become_method", "ansible_become_method", "strategy",
                     "action", "module", "cache_plugin"}


def _load_yaml(path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _requirement_pins(path):
    """``{canonical name: 'name==version'}`` of a pip requirements file (comments and blank lines skipped)."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name = re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0]
            pins[_canonical(name)] = line
    return pins


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _content_lines(path):
    """The requirement lines of a pip or bindep file as ansible-builder's introspect.py passes them on."""
    lines = (re.sub(r"(?:^|\s+)#.*$", "", line.strip()) for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


# --- which collections the content uses ------------------------------------------------------------------------


def _known_collections():
    """Collections installed in this venv (the `ansible` package carries ~100): names a bare text match may count."""
    known = set()
    try:
        import ansible_collections  # pylint: disable=import-outside-toplevel
    except ImportError:
        return known
    for root in ansible_collections.__path__:
        for coll in Path(root).glob("*/*"):
            if coll.is_dir() and re.fullmatch(_NAME, coll.parent.name) and re.fullmatch(_NAME, coll.name):
                known.add("%s.%s" % (coll.parent.name, coll.name))
    return known


def _walk_yaml(node, found, parent_key=None):
    if isinstance(node, dict):
        for key, value in node.items():
            key = str(key)
            if _FQCN_STRING.match(key):  # a module or action: `community.docker.docker_container:`
                found.add(key.rsplit(".", 1)[0])
            if key == "collections" and isinstance(value, list):
                found.update(str(item) for item in value if isinstance(item, str) and item.count(".") == 1)
            if key in _FQCN_VALUED_KEYS or (key == "name" and parent_key and parent_key.endswith(("import_role", "include_role"))):
                if isinstance(value, str) and _FQCN_STRING.match(value.strip()):
                    found.add(value.strip().rsplit(".", 1)[0])
            if key == "roles" and isinstance(value, list):
                for item in value:
                    name = item if isinstance(item, str) else (item.get("role") or item.get("name")) if isinstance(item, dict) else None
                    if isinstance(name, str) and _FQCN_STRING.match(name.strip()):
                        found.add(name.strip().rsplit(".", 1)[0])
            _walk_yaml(value, found, key)
    elif isinstance(node, list):
        for item in node:
            _walk_yaml(item, found, parent_key)


def used_collections(root, dirs=CONTENT_DIRS, extra_files=()):
    """Every collection that files under ``root/dirs`` (and ``extra_files``) use, but this one and ansible.builtin.

    Counted: YAML mapping keys that are FQCNs (modules), FQCN values of role/connection/become/strategy keys and of
    roles:, collections: lists, Jinja filters/tests/lookups (``| ns.coll.f``, ``is ns.coll.t``,
    ``lookup('ns.coll.l')``) of any collection, ``ansible_collections.ns.coll`` imports, and any other
    ``ns.coll.name`` text whose ``ns.coll`` is a collection installed in this venv.
    """
    root = Path(root)
    known = _known_collections()
    files = [p for d in dirs for p in sorted((root / d).rglob("*")) if p.is_file()]
    files += [root / f for f in extra_files]
    found = {}
    for path in files:
        if path.suffix not in (".yml", ".yaml", ".py", ".j2", ".json", ".cfg", ".ini"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        here = set()
        for match in _FQCN_TOKEN.finditer(text):
            if "%s.%s" % match.group(1, 2) in known:
                here.add("%s.%s" % match.group(1, 2))
        if path.suffix == ".py":
            here.update("%s.%s" % m.group(1, 2) for m in _PY_COLLECTION_IMPORT.finditer(text))
        else:
            here.update("%s.%s" % m.group(1, 2) for m in _JINJA_PLUGIN.finditer(text))
        if path.suffix in (".yml", ".yaml"):
            try:
                for doc in yaml.safe_load_all(text):
                    _walk_yaml(doc, here)
            except yaml.YAMLError:
                pass
        for coll in here - NOT_DEPENDENCIES:
            found.setdefault(coll, []).append(str(path.relative_to(root)) if path.is_relative_to(root) else str(path))
    return found


def _shipped_root_playbooks(root):
    """Root-level playbooks (site.yml): a list of plays or import_playbook entries."""
    out = []
    keys = {"hosts", "import_playbook", "ansible.builtin.import_playbook", "ansible.legacy.import_playbook"}
    for path in sorted(Path(root).glob("*.y*ml")):
        data = _load_yaml(path)
        if isinstance(data, list) and data and all(isinstance(p, dict) and keys & set(p) for p in data):
            out.append(path.name)
    return out


def _requirements_collections(data):
    entries = (data or {}).get("collections") or []
    return [e if isinstance(e, dict) else {"name": e} for e in entries]


def test_the_scan_finds_collections_that_roles_use_without_declaring_them(tmp_path):
    """The FQCN scan itself: it has to see the uses the declaration test relies on, and not invent any."""
    tasks = tmp_path / "roles" / "demo" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(
        "- name: A container\n"
        "  community.docker.docker_container:\n"
        "    name: x\n"
        "- name: A query\n"
        "  ansible.builtin.debug:\n"
        "    msg: \"{{ data | community.general.json_query('a') | hpcnet.rdma.nccl_settings }}\"\n"
        "- name: A lookup of a collection this venv does not have\n"
        "  ansible.builtin.debug:\n"
        "    msg: \"{{ lookup('example.unknown.thing', 'x') }}\"\n"
        "- name: A role\n"
        "  ansible.builtin.include_role:\n"
        "    name: example.roles.tuning\n"
        "- name: Not collections\n"
        "  ansible.builtin.set_fact:\n"
        "    a: \"{{ ansible_facts.rdma.devices }} {{ os.path.join }}\"\n")
    (tmp_path / "plugins" / "filter").mkdir(parents=True)
    (tmp_path / "plugins" / "filter" / "f.py").write_text(
        "import os.path\nfrom ansible_collections.ansible.netcommon.plugins.module_utils import x\n"
        "from ansible_collections.hpcnet.rdma.plugins.module_utils import y\n")
    found = used_collections(tmp_path)
    assert set(found) == {"community.docker", "community.general", "example.unknown", "example.roles", "ansible.netcommon"}


def declaration_problems(root):
    """How collections/requirements.yml and galaxy.yml `dependencies` disagree with what the content uses."""
    root = Path(root)
    used = used_collections(root, extra_files=_shipped_root_playbooks(root))
    declared = {e["name"] for e in _requirements_collections(_load_yaml(root / "collections" / "requirements.yml"))}
    problems = []
    undeclared = {coll: files for coll, files in sorted(used.items()) if coll not in declared}
    if undeclared:
        problems.append("used but not in collections/requirements.yml: %s" % undeclared)
    if declared - set(used):
        problems.append("in collections/requirements.yml but not used by roles/, playbooks/, plugins/: %s"
                        % sorted(declared - set(used)))
    if "hpcnet.rdma" in declared:
        problems.append("collections/requirements.yml lists hpcnet.rdma: from a clone it is the collections/ link")
    galaxy_deps = set(_load_yaml(root / "galaxy.yml").get("dependencies") or {})
    if galaxy_deps != declared:
        problems.append("galaxy.yml dependencies %s differ from collections/requirements.yml %s: "
                        "`ansible-galaxy collection install hpcnet.rdma` (an infrastructure project) would not bring them"
                        % (sorted(galaxy_deps), sorted(declared)))
    return problems


def test_requirements_list_exactly_the_collections_the_content_uses():
    """collections/requirements.yml (AWX; the EE's list too, below) agrees with the content."""
    assert [p for p in declaration_problems(REPO_ROOT) if not p.startswith("galaxy.yml")] == []


def test_galaxy_yml_dependencies_are_the_collections_the_content_uses():
    assert [p for p in declaration_problems(REPO_ROOT) if p.startswith("galaxy.yml")] == []


def test_an_undeclared_or_unused_collection_fails_the_declaration_check(tmp_path):
    """The check above on a copy of the content: a role that starts using community.docker, and a stale entry."""
    for name in CONTENT_DIRS:
        shutil.copytree(REPO_ROOT / name, tmp_path / name)
    for name in _shipped_root_playbooks(REPO_ROOT):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    # Declarations that agree with the copy, whatever the real ones say (the tests above check those).
    used = sorted(used_collections(tmp_path, extra_files=_shipped_root_playbooks(tmp_path)))
    assert "community.docker" not in used

    def declare(collections):
        (tmp_path / "collections").mkdir(exist_ok=True)
        (tmp_path / "collections" / "requirements.yml").write_text(yaml.safe_dump({"collections": [{"name": c} for c in collections]}))
        (tmp_path / "galaxy.yml").write_text(yaml.safe_dump({"dependencies": {c: "*" for c in collections}}))

    declare(used)
    assert declaration_problems(tmp_path) == []
    tasks = next((tmp_path / "roles").glob("*/tasks/main.yml"))
    tasks.write_text(tasks.read_text() + "\n- name: Start a helper container\n  community.docker.docker_container:\n"
                     "    name: helper\n")
    problems = declaration_problems(tmp_path)
    assert len(problems) == 1 and "community.docker" in problems[0] and str(tasks.relative_to(tmp_path)) in problems[0]
    declare(used + ["community.docker", "example.stale"])
    problems = declaration_problems(tmp_path)
    assert len(problems) == 1 and "example.stale" in problems[0] and "not used" in problems[0], problems


def test_collection_versions_are_the_ones_requirements_txt_brings():
    """collections/requirements.yml pins what the `ansible` package of requirements.txt carries: the tested versions."""
    for entry in _requirements_collections(_load_yaml(AWX_REQUIREMENTS)):
        installed = _installed_collection(entry["name"])
        assert "version" in entry, "unpinned collection: %s" % entry
        if installed is None or not re.fullmatch(r"=*\d+(\.\d+)*", str(entry["version"])):
            continue
        manifest = yaml.safe_load((installed / "MANIFEST.json").read_text(encoding="utf-8"))
        assert str(entry["version"]).lstrip("=") == manifest["collection_info"]["version"], entry


def test_awx_collection_path_link_is_kept():
    link = REPO_ROOT / "collections" / "ansible_collections" / "hpcnet" / "rdma"
    assert link.is_symlink() and link.resolve() == REPO_ROOT


def test_collection_declares_its_ee_dependencies_instead_of_the_dev_requirements():
    """Without meta/execution-environment.yml ansible-builder would install requirements.txt (molecule, pytest...)."""
    meta = _load_yaml(COLLECTION_EE_META)
    assert meta["dependencies"] == {"python": "requirements-ee.txt", "system": "bindep.txt"}


def test_python_requirements_are_pinned_as_requirements_txt_pins_them():
    dev = _requirement_pins(REPO_ROOT / "requirements.txt")
    for name, line in _requirement_pins(REPO_ROOT / "requirements-ee.txt").items():
        assert re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+==[^=\s]+", line), "unpinned: %s" % line
        if name in dev:
            assert line == dev[name], "requirements-ee.txt %s, requirements.txt %s" % (line, dev[name])


def _imported_top_level_modules(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            # `from pkg import name`: name may be a submodule (module_utils files are imported like this too)
            names.update("%s.%s" % (node.module, alias.name) for alias in node.names)
    return names


def _third_party_imports(files, collection_root, fqcn):
    """Top-level modules outside the standard library and Ansible that ``files`` import, following the imports of
    the collection's own module_utils. ``{module: [file names]}``."""
    prefix = "ansible_collections.%s.plugins.module_utils." % fqcn
    todo, seen, found = list(files), set(), {}
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        for module in _imported_top_level_modules(path):
            top = module.split(".")[0]
            if module.startswith(prefix):
                base = collection_root / "plugins" / "module_utils" / module[len(prefix):].replace(".", "/")
                todo += [base.with_name(base.name + ".py"), base / "__init__.py"]  # the ones that exist are read
            elif top not in sys.stdlib_module_names and top not in ("ansible", "ansible_collections", "__future__"):
                found.setdefault(top, []).append(path.name)
    return found


def _collection_ee_python(collection_root):
    """What a collection declares for ansible-builder itself (introspect.py reads the same files)."""
    meta = collection_root / "meta" / "execution-environment.yml"
    python = (_load_yaml(meta) or {}).get("dependencies", {}).get("python") if meta.is_file() else "requirements.txt"
    path = collection_root / python if isinstance(python, str) else None
    return set(_requirement_pins(path)) if path and path.is_file() else set()


def _installed_collection(fqcn):
    import ansible_collections  # pylint: disable=import-outside-toplevel

    for root in ansible_collections.__path__:
        candidate = Path(root) / fqcn.replace(".", "/")
        if (candidate / "MANIFEST.json").is_file() or (candidate / "galaxy.yml").is_file():
            return candidate
    return None


def used_controller_plugins(root):
    """``{(fqcn of the collection, plugin type, name)}`` of the filters, tests and lookups of other collections that
    the content under ``root`` runs (they run on the controller, in the EE)."""
    used = set()
    for d in CONTENT_DIRS:
        for path in sorted((Path(root) / d).rglob("*")):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".j2"):
                text = path.read_text(encoding="utf-8", errors="replace")
                for kind, regex in _JINJA_PLUGIN_USES:
                    used.update(("%s.%s" % m.group(1, 2), kind, m.group(3)) for m in regex.finditer(text))
    return {u for u in used if u[0] not in NOT_DEPENDENCIES}


def _plugin_files(collection_root, kind, name):
    folder = collection_root / "plugins" / kind
    own = folder / (name + ".py")
    if own.is_file():
        return [own]
    # Several filters or tests per file: the file whose FilterModule/TestModule maps the name.
    return [p for p in sorted(folder.glob("*.py")) if re.search(r"""['"]%s['"]\s*:""" % re.escape(name), p.read_text(encoding="utf-8"))]


def controller_import_problems(root):
    """Third-party imports of the controller-side code the content runs that requirements-ee.txt does not declare:
    this collection's filters, lookups, ... and the filters, tests and lookups of other collections it uses (unless
    their collection declares them for ansible-builder itself)."""
    root = Path(root)
    declared = set(_requirement_pins(root / "requirements-ee.txt"))
    distributions = importlib.metadata.packages_distributions()

    def undeclared(imports, also_declared=()):
        return {top: files for top, files in imports.items()
                if not {_canonical(d) for d in distributions.get(top, [top])} & (declared | set(also_declared))}

    problems = []
    own = [p for d in CONTROLLER_PLUGIN_DIRS for p in sorted((root / "plugins" / d).glob("*.py"))]
    missing = undeclared(_third_party_imports(own, root, "hpcnet.rdma"))
    if missing:
        problems.append("this collection's controller-side plugins import %s" % missing)
    for fqcn, kind, name in sorted(used_controller_plugins(root)):
        collection_root = _installed_collection(fqcn)
        if collection_root is None:
            problems.append("%s.%s (%s) is used, but %s is not installed here to read its imports" % (fqcn, name, kind, fqcn))
            continue
        files = _plugin_files(collection_root, kind, name)
        if not files:
            problems.append("%s.%s: no %s plugin of that name in %s" % (fqcn, name, kind, collection_root))
            continue
        missing = undeclared(_third_party_imports(files, collection_root, fqcn), _collection_ee_python(collection_root))
        if missing:
            problems.append("%s.%s (%s, used by the content) imports %s" % (fqcn, name, kind, missing))
    return problems


def test_controller_side_code_imports_only_what_requirements_ee_declares():
    """Filters, tests, lookups, ... run in the EE: their third-party imports must be in requirements-ee.txt."""
    assert controller_import_problems(REPO_ROOT) == []


def test_a_used_filter_with_an_undeclared_import_fails_the_import_check(tmp_path):
    """The check above on a copy: a role that starts using community.general.json_query (jmespath)."""
    tasks = tmp_path / "roles" / "demo" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text("- name: Query\n  ansible.builtin.debug:\n"
                                    "    msg: \"{{ x | community.general.json_query('a[0]') }}\"\n")
    (tmp_path / "requirements-ee.txt").write_text("")
    if _installed_collection("community.general") is None:
        pytest.skip("community.general is not installed here (the ansible package of requirements.txt carries it)")
    problems = controller_import_problems(tmp_path)
    assert len(problems) == 1 and "community.general.json_query" in problems[0] and "jmespath" in problems[0], problems
    (tmp_path / "requirements-ee.txt").write_text("jmespath==1.1.0\n")
    assert controller_import_problems(tmp_path) == []


def test_bindep_parses_and_gives_the_base_image_an_ssh_client():
    depends_module = pytest.importorskip("bindep.depends", reason="bindep comes with ansible-builder (requirements.txt)")
    depends = depends_module.Depends((REPO_ROOT / "bindep.txt").read_text(encoding="utf-8"))
    rpm = depends.list_all_packages(depends.active_rules(["default", "platform:rpm", "platform:centos", "platform:redhat"]))
    dpkg = depends.list_all_packages(depends.active_rules(["default", "platform:dpkg", "platform:debian"]))
    assert "openssh-clients" in rpm and "openssh-client" in dpkg


# --- the generated build context -------------------------------------------------------------------------------


@pytest.fixture(name="build_context", scope="module")
def _build_context(tmp_path_factory):
    """`make build`'s tarball and `ansible-builder create`, both into a temp dir (the clone is not written to)."""
    builder = shutil.which("ansible-builder", path=str(BIN)) or shutil.which("ansible-builder")
    if not builder:
        pytest.skip("ansible-builder is not installed (pip install -r requirements.txt)")
    work = tmp_path_factory.mktemp("ee")
    env = {"PATH": "%s:/usr/bin:/bin" % BIN, "HOME": str(work), "ANSIBLE_HOME": str(work / ".ansible"), "LANG": "C.UTF-8"}
    galaxy = _load_yaml(REPO_ROOT / "galaxy.yml")
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(work / "build")],
                   cwd=REPO_ROOT, env=env, check=True, capture_output=True, text=True)
    # Paths in the definition are relative to it: copy it and the files it names beside the fresh build/.
    ee = _load_yaml(EE_FILE)
    named = [v for k, v in (ee.get("dependencies") or {}).items() if k in ("galaxy", "python", "system") and isinstance(v, str)]
    named += [e["src"] for e in ee.get("additional_build_files") or [] if not e["src"].startswith("build/")]
    for pattern in named:
        for src in REPO_ROOT.glob(pattern):
            dest = work / src.relative_to(REPO_ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy)(src, dest)
    shutil.copy(EE_FILE, work / EE_FILE.name)
    context = work / "context"
    result = subprocess.run([builder, "create", "-f", str(work / EE_FILE.name), "-c", str(context),
                             "--output-filename", "Containerfile", "-v", "3"],
                            cwd=work, env=env, check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No matches for" not in result.stdout + result.stderr, result.stdout + result.stderr
    return {"context": context, "work": work, "env": env, "galaxy": galaxy,
            "containerfile": (context / "Containerfile").read_text(encoding="utf-8")}


def test_ee_installs_ansible_core_and_runner_as_requirements_txt_pins_them(build_context):
    dev = _requirement_pins(REPO_ROOT / "requirements.txt")
    containerfile = build_context["containerfile"]
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="([^"]*)"$', containerfile, re.M)
    assert refs, containerfile
    assert sorted(refs.group(1).split()) == sorted([dev["ansible-core"], dev["ansible-runner"]])
    assert "RUN $PYCMD -m pip install --no-cache-dir $ANSIBLE_INSTALL_REFS" in containerfile
    assert "RUN /output/scripts/check_ansible $PYCMD" in containerfile  # the build fails without them


def test_ee_python_satisfies_ansible_core(build_context):
    python = re.search(r'^ARG PYCMD="/usr/bin/python(\d+\.\d+)"$', build_context["containerfile"], re.M)
    assert python, "the EE must name its Python interpreter (dependencies.python_interpreter)"
    from packaging.specifiers import SpecifierSet  # pylint: disable=import-outside-toplevel

    requires = importlib.metadata.metadata("ansible-core")["Requires-Python"]
    assert python.group(1) in SpecifierSet(requires), "ansible-core needs Python %s" % requires


def test_ee_galaxy_requirements_are_this_collection_and_the_awx_requirements(build_context):
    galaxy = build_context["galaxy"]
    tarball = "%s-%s-%s.tar.gz" % (galaxy["namespace"], galaxy["name"], galaxy["version"])
    ee = _load_yaml(EE_FILE)
    assert {"src": "build/" + tarball, "dest": "collections"} in ee["additional_build_files"], \
        "the EE must copy the tarball of `make build` (build/%s) into the build context" % tarball
    assert "--output-path build/" in (REPO_ROOT / "Makefile").read_text(encoding="utf-8")

    context_reqs = _requirements_collections(_load_yaml(build_context["context"] / "_build" / "requirements.yml"))
    assert context_reqs[0] == {"name": "collections/" + tarball, "type": "file"}
    assert context_reqs[1:] == _requirements_collections(_load_yaml(AWX_REQUIREMENTS))
    assert (build_context["context"] / "_build" / "collections" / tarball).is_file()
    # The galaxy stage installs _build/requirements.yml from /build, where _build is copied: the relative tarball
    # path above resolves there (the installed fixture below replays that).
    stage = build_context["containerfile"].split("FROM base AS galaxy\n", 1)[1].split("\nFROM ", 1)[0].splitlines()
    install = [i for i, line in enumerate(stage) if "ansible-galaxy collection install" in line and "-r requirements.yml" in line]
    assert install and stage.index("COPY _build /build") < stage.index("WORKDIR /build") < install[0], stage


@pytest.fixture(name="installed", scope="module")
def _installed(build_context):
    """The galaxy stage, replayed: ansible-galaxy installs the context's requirements from _build (the EE's /build).

    Only the local (file/dir) entries: the others come from Galaxy, which this machine cannot reach.
    """
    build = build_context["context"] / "_build"
    local = [e for e in _requirements_collections(_load_yaml(build / "requirements.yml")) if e.get("type") in ("file", "dir")]
    reqs = build_context["work"] / "local-requirements.yml"
    reqs.write_text(yaml.safe_dump({"collections": local}))
    target = build_context["work"] / "usr-share-ansible-collections"
    result = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "-r", str(reqs),
                             "--collections-path", str(target)],
                            cwd=build, env=dict(build_context["env"], ANSIBLE_GALAXY_DISABLE_GPG_VERIFY="1"),
                            check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return target


def test_galaxy_stage_installs_this_collection(installed, build_context):
    manifest = yaml.safe_load((installed / "ansible_collections" / "hpcnet" / "rdma" / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["version"] == build_context["galaxy"]["version"]


def test_builder_stage_installs_exactly_the_declared_python_and_system_packages(installed, build_context):
    """introspect.py, as the builder stage runs it, over the installed collection: requirements-ee.txt and bindep.txt."""
    build = build_context["context"] / "_build"
    step = re.search(r"^RUN \$PYCMD /output/scripts/introspect.py introspect(.*)$", build_context["containerfile"], re.M)
    assert step, "the builder stage does not introspect the collections"
    # The same options, with the builder stage's /build (WORKDIR) files taken from _build; not its --write-* outputs.
    options = [opt.split("=", 1) for opt in step.group(1).split()]
    args = ["%s=%s" % (key, build / value) for key, value in options if not key.startswith("--write-")]
    result = subprocess.run([sys.executable, str(build / "scripts" / "introspect.py"), "introspect", *args, str(installed)],
                            check=True, capture_output=True, text=True)
    data = yaml.safe_load(result.stdout)
    # What the collection declares (meta/execution-environment.yml), then what the EE definition adds, if anything.
    user = dict(options)
    expected_python = [line + "  # from collection hpcnet.rdma" for line in _content_lines(REPO_ROOT / "requirements-ee.txt")]
    expected_system = [line + "  # from collection hpcnet.rdma" for line in _content_lines(REPO_ROOT / "bindep.txt")]
    if "--user-pip" in user:
        expected_python += [line + "  # from collection user" for line in _content_lines(build / user["--user-pip"])]
    if "--user-bindep" in user:
        expected_system += [line + "  # from collection user" for line in _content_lines(build / user["--user-bindep"])]
    assert data["python"] == expected_python, "the EE would pip-install %s" % data["python"]
    assert data["system"] == expected_system, "the EE would install the system packages %s" % data["system"]
    assert expected_system, "bindep.txt is empty: the EE would have no SSH client"
