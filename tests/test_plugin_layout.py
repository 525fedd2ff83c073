"""Every scheduler plugin follows the layout of docs/hooks.md ("Plugin layout").

* ``hooks.py`` and ``scheduler.py`` exist; ``hooks.py`` holds only ``@hookimpl`` functions,
  imports no backend SDK, and every dotted path it registers names a module and a name
  that exist (a moved factory is a failing test, not a broken ``tx run``);
* ``request.py`` (k8s: ``_pod.py``, ``_names.py``, ``_yaml.py``, which its per-kind modules
  build on), where present, is pure: neither it nor a module of its own package that
  it imports (followed transitively) imports a backend SDK, ``subprocess`` or the plugin's
  ``_client``, or calls ``os.system``/``os.popen``/``os.spawn*``/``os.exec*``/``os.fork``;
* no module carries another spelling of a role's name (``states.py``, ``_request.py``,
  ``client.py``, ...);
* every scheduler plugin whose tests start a backend (all but the local one, which runs on
  this host) has ``testing.py``, its pytest fixtures;
* no module of tx-core or of a plugin is over :data:`MAX_LINES` lines (issue 41), but for
  those in :data:`OVER_MAX_LINES`, being split.

The checks read the sources (``ast``): nothing is imported, so a plugin whose SDK is not
installed here is checked too.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCHEDULER_PLUGINS = sorted(p for p in (ROOT / "plugins").glob("scheduler-*") if (p / "pyproject.toml").is_file())

#: top-level import names of the backend SDKs (and their transports)
SDKS = frozenset({"boto3", "botocore", "kubernetes", "docker", "google", "ray", "mlflow", "requests"})
#: modules that run commands
COMMANDS = frozenset({"subprocess"})
#: ``os`` functions that run or start programs
OS_RUNNERS = ("system", "popen", "spawn", "exec", "fork", "posix_spawn")
#: scheduler plugins without ``testing.py``: the local schedulers need no backend started
NO_BACKEND = {"scheduler-local"}
#: the most lines of a source module (tx-core's and the plugins')
MAX_LINES = 600
#: modules still over :data:`MAX_LINES`, being split by other changes of issue 41 (paths
#: relative to the repository): a module may leave this set, never join it
OVER_MAX_LINES: set = set()
#: pure modules that build requests, besides ``request.py``: k8s builds per kind, over ``_pod``
PURE_BUILDERS = {"scheduler-k8s": ("_pod", "_names", "_yaml")}
#: module names that would be another spelling of a layout role
WRONG_NAMES = {
    "_hooks.py": "hooks.py",
    "_scheduler.py": "scheduler.py",
    "_request.py": "request.py",
    "requests.py": "request.py",
    "client.py": "_client.py",
    "states.py": "_states.py",
    "state.py": "_states.py",
    "_state.py": "_states.py",
}


def _package(plugin: Path) -> Path:
    pkgs = [p for p in (plugin / "src").iterdir() if (p / "__init__.py").is_file()]
    assert len(pkgs) == 1, f"{plugin.name}: expected one import package under src/, found {pkgs}"
    return pkgs[0]


def _module_file(pkg: Path, dotted: str) -> Path:
    """The file of module ``dotted`` (``pkg.x.y``) of package ``pkg``, or a missing path."""
    parts = dotted.split(".")[1:]
    base = pkg.joinpath(*parts) if parts else pkg
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _imports(tree: ast.AST, pkg_name: str) -> Iterator[str]:
    """Every module ``tree`` imports (absolute dotted names; ``from pkg import x`` yields
    both ``pkg`` and ``pkg.x``, as ``x`` may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package (plugins use absolute imports)
                mod = pkg_name + (f".{node.module}" if node.module else "")
            else:
                mod = node.module or ""
            yield mod
            yield from (f"{mod}.{a.name}" for a in node.names)


def _os_runner_calls(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
                and node.attr.startswith(OS_RUNNERS)):
            yield f"os.{node.attr}"


def impurities(pkg: Path, start: str = "request") -> List[str]:
    """What makes ``<pkg>/<start>.py`` impure: ``"<module>: <reason>"`` for each module of
    the package reached from it by imports."""
    name = pkg.name
    todo = [f"{name}.{start}"]
    seen: Set[str] = set()
    found: List[str] = []
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        path = _module_file(pkg, mod)
        if not path.is_file():
            continue  # a name imported from a module, not a module
        tree = ast.parse(path.read_text(), str(path))
        for imp in _imports(tree, name):
            top = imp.split(".")[0]
            if top in SDKS:
                found.append(f"{mod}: imports {imp}")
            elif top in COMMANDS:
                found.append(f"{mod}: imports {imp} (runs commands)")
            elif imp == f"{name}._client":
                found.append(f"{mod}: imports {imp} (backend calls)")
            elif top == name and imp != name:
                todo.append(imp)
        found += [f"{mod}: calls {call}" for call in _os_runner_calls(tree)]
    return sorted(set(found))


def _hooks_problems(pkg: Path) -> List[str]:
    tree = ast.parse((pkg / "hooks.py").read_text())
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for imp in _imports(node, pkg.name):
                if imp.split(".")[0] in SDKS:
                    out.append(f"imports {imp} at the top")
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            names = {d.id if isinstance(d, ast.Name) else getattr(d, "attr", "") for d in node.decorator_list}
            if "hookimpl" not in names:
                out.append(f"{node.name}() is not a @hookimpl")
    return out


_DOTTED = re.compile(r"^(?P<mod>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_]\w*)$")


def _top_level_names(path: Path) -> Set[str]:
    names: Set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def dangling_registrations(pkg: Path) -> List[str]:
    """Dotted paths (``pkg.module:name``) in ``pkg``'s hooks.py whose module file or
    top-level name does not exist (read from the sources, nothing imported)."""
    out = []
    for node in ast.walk(ast.parse((pkg / "hooks.py").read_text())):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        m = _DOTTED.match(node.value)
        if not m or m["mod"].split(".")[0] != pkg.name:
            continue
        path = _module_file(pkg, m["mod"])
        if not path.is_file():
            out.append(f"{node.value}: no module {m['mod']}")
        elif m["attr"] not in _top_level_names(path):
            out.append(f"{node.value}: {m['mod']} has no {m['attr']}")
    return out


def _plugin_ids() -> List[str]:
    return [p.name for p in SCHEDULER_PLUGINS]


def test_every_scheduler_plugin_is_found() -> None:
    names = set(_plugin_ids())
    assert {"scheduler-local", "scheduler-docker", "scheduler-k8s", "scheduler-slurm"} <= names


@pytest.mark.parametrize("plugin", SCHEDULER_PLUGINS, ids=_plugin_ids())
def test_plugin_has_hooks_and_scheduler(plugin: Path) -> None:
    pkg = _package(plugin)
    missing = [m for m in ("hooks.py", "scheduler.py") if not (pkg / m).is_file()]
    assert not missing, f"{plugin.name}: {missing} missing (docs/hooks.md, Plugin layout)"
    assert _hooks_problems(pkg) == []
    assert dangling_registrations(pkg) == []


@pytest.mark.parametrize("plugin", [p for p in SCHEDULER_PLUGINS if p.name not in NO_BACKEND], ids=lambda p: p.name)
def test_scheduler_plugin_has_its_testing_module(plugin: Path) -> None:
    """Its session fixtures (the backend its tests start) are in ``testing.py``, which the
    repository's root conftest.py loads, so other test trees share them."""
    pkg = _package(plugin)
    assert (pkg / "testing.py").is_file(), f"{plugin.name}: no testing.py (docs/hooks.md, Plugin layout)"
    conftest = (ROOT / "conftest.py").read_text()
    assert f'"{pkg.name}.testing"' in conftest, f"{pkg.name}.testing is not in conftest.py's PLUGIN_FIXTURES"


def test_no_module_over_max_lines() -> None:
    sources = [ROOT / "core" / "src", *sorted((ROOT / "plugins").glob("*/src"))]
    sizes = {str(f.relative_to(ROOT)): len(f.read_text().splitlines()) for src in sources for f in src.rglob("*.py")}
    over = sorted(f"{f} ({n} lines)" for f, n in sizes.items() if n > MAX_LINES and f not in OVER_MAX_LINES)
    assert over == [], f"modules over {MAX_LINES} lines: split them along their seams"


@pytest.mark.parametrize("plugin", SCHEDULER_PLUGINS, ids=_plugin_ids())
def test_request_module_is_pure(plugin: Path) -> None:
    pkg = _package(plugin)
    builders = [m for m in ("request", *PURE_BUILDERS.get(plugin.name, ())) if (pkg / f"{m}.py").is_file()]
    assert builders, f"{plugin.name}: no request.py (nor a pure builder named in PURE_BUILDERS)"
    assert {m: impurities(pkg, m) for m in builders} == {m: [] for m in builders}


@pytest.mark.parametrize("plugin", sorted((ROOT / "plugins").glob("*/src/*/")), ids=lambda p: p.name)
def test_no_other_spelling_of_a_role(plugin: Path) -> None:
    wrong: Dict[str, str] = {p.name: WRONG_NAMES[p.name] for p in plugin.glob("*.py") if p.name in WRONG_NAMES}
    assert wrong == {}, f"rename (docs/hooks.md, Plugin layout): {wrong}"


def _write(root: Path, files: Dict[str, str]) -> Path:
    pkg = root / "tx_scheduler_fake"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / name).write_text(text)
    return pkg


@pytest.mark.parametrize("files, expected", [
    ({"request.py": "import json\nfrom tx.specs import AppDef\n"}, []),
    ({"request.py": "def f():\n    import boto3\n"}, ["tx_scheduler_fake.request: imports boto3"]),
    ({"request.py": "from tx_scheduler_fake import _names\n",
      "_names.py": "from google.cloud import batch_v1\n"},
     ["tx_scheduler_fake._names: imports google.cloud", "tx_scheduler_fake._names: imports google.cloud.batch_v1"]),
    ({"request.py": "from tx_scheduler_fake._util import x\n", "_util.py": "import subprocess\nx = 1\n"},
     ["tx_scheduler_fake._util: imports subprocess (runs commands)"]),
    ({"request.py": "from tx_scheduler_fake import _client\n", "_client.py": ""},
     ["tx_scheduler_fake.request: imports tx_scheduler_fake._client (backend calls)"]),
    ({"request.py": "import os\n\ndef f():\n    os.system('ls')\n"}, ["tx_scheduler_fake.request: calls os.system"]),
])
def test_impurities_are_found(tmp_path: Path, files: Dict[str, str], expected: List[str]) -> None:
    """The checker itself: each kind of impurity is reported, a pure module is not."""
    assert impurities(_write(tmp_path, files)) == expected


def test_dangling_registrations_are_found(tmp_path: Path) -> None:
    pkg = _write(tmp_path, {
        "hooks.py": 'def f(register):\n    register("a", "tx_scheduler_fake.scheduler:create_scheduler")\n'
                    '    register("b", "tx_scheduler_fake.scheduler:gone")\n'
                    '    register("c", "tx_scheduler_fake.moved:create_scheduler")\n'
                    '    register("d", "tx_scheduler_fake.scheduler:bound")\n',
        "scheduler.py": "class S:\n    pass\n\n\ndef create_scheduler(session_name):\n    return S()\n\n\nbound = S\n",
    })
    assert dangling_registrations(pkg) == [
        "tx_scheduler_fake.scheduler:gone: tx_scheduler_fake.scheduler has no gone",
        "tx_scheduler_fake.moved:create_scheduler: no module tx_scheduler_fake.moved",
    ]


def test_hooks_problems_are_found(tmp_path: Path) -> None:
    pkg = _write(tmp_path, {"hooks.py": "import docker\nfrom tx import hookimpl\n\n"
                                        "@hookimpl\ndef tx_register_schedulers(register):\n    pass\n\n"
                                        "def helper():\n    pass\n"})
    assert _hooks_problems(pkg) == ["imports docker at the top", "helper() is not a @hookimpl"]

