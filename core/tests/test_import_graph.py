"""The import graph of tx-core and of every plugin in this repository: no cycle anywhere,
core's floors read bottom-up (docs/architecture.md), no core module imports a plugin, no
plugin imports another, and imports inside functions only in the import-light set, each
with its reason."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "core" / "src"
PLUGIN_SRCS = sorted(p for p in (REPO / "plugins").glob("*/src") if p.is_dir())

#: core's floors, bottom up (docs/architecture.md): a module may import its own floor and
#: those below, never one above. The longest matching prefix names a module's floor.
FLOORS: List[Tuple[str, ...]] = [
    ("tx.errors", "tx.log", "tx.version", "tx.hooknames", "tx._plugin_cache", "tx.durations"),
    ("tx.specs",),
    ("tx.config",),
    ("tx", "tx.hookspecs", "tx.plugins", "tx._builtin_plugin"),
    ("tx.schedulers", "tx.workspace", "tx.tracker"),
    ("tx.components",),
    ("tx.runner", "tx.views"),
    ("tx.cli",),
    ("tx.testing", "tx.distributed", "tx.apps"),
]

#: the import-light set: the modules that may import inside functions, and why. Every such
#: import carries a comment (on its line or the line above) saying what it defers.
IMPORT_LIGHT: Dict[str, str] = {
    "tx": "`import tx` stays free of pluggy: `tx.hookimpl` is resolved on first use",
    "tx._plugin_cache": "`tx --help` lists schedulers from the snapshot without importlib.metadata",
    "tx.plugins": "a registry built from the snapshot never imports pluggy",
    "tx._install_hints": "importlib.metadata, urllib and importlib.resources only when an install hint is shown",
    "tx._builtin_plugin": "`tx --help` reads the command table without the model",
    "tx.schedulers": "a replica's supervisor imports tx.schedulers.env without attrs",
    "tx.specs.files": "`tx run` stores an AppDef without PyYAML or cattrs",
    "tx.specs._convert": "cattrs is imported when a document is converted",
    "tx.specs.status": "PyYAML only to print a status",
    "tx.log": "structlog only when a library log line is written",
    "tx.distributed": "the launcher never imports torch; the helpers do when called",
    "tx.components.system.file_linter": "docstring_parser only to read a docstring",
    "tx.tracker.backend.fsspec": "fsspec only when the file tracker is used",
    "tx.workspace.api": "pathspec (30 modules) only when a workspace is walked",
    "tx.config.files": "configparser only when a config file exists (the cold run path has none)",
    "tx.components.system._custom_components": "hashlib (~5 ms with OpenSSL) only for a component file",
    "tx.runner.api": "Runner.run of an AppDef needs no component system",
    "tx.runner.engine": "Runner.run of an AppDef needs no component system",
    "tx.runner.archiver": "fsspec only once logs are archived or read (`archive = off` never loads it)",
    "tx.runner.archive": "fsspec only for an archive that is not a local directory (the detached copier's imports)",
    "tx.apps": "helper programs: fsspec only for the URL they were given",
    "tx.cli": "`tx --version`, `tx --help` and the `tx run` cold path",
    "tx.specs.file_linter": "TorchX's path of a module above the model: its names resolve on first use",
    "tx.specs.finder": "TorchX's path of a module above the model: its names resolve on first use",
    "tx.specs.builders": "TorchX's path of a module above the model: its names resolve on first use",
}

#: package faces (docs/api.md) that load some of the names they export on first access (a
#: module ``__getattr__``), and why; by exact name: the modules under them are not thereby in
#: the import-light set. tx and tx.schedulers are faces in the set above.
LAZY_FACES: Dict[str, str] = {
    "tx.specs": "`import tx.specs` stays cheap: the AppDef file and sweep-spec names load on first access",
    "tx.runner": "a Runner of an AppDef never imports failover, sweeps or the views the face also exports",
}

#: TorchX 0.7.0's module paths that tx keeps where TorchX had them while the code lives on a
#: higher floor (docs/architecture.md): each is a lazy alias (a module ``__getattr__``) whose
#: one deferred import is the module it names. That one edge is exempt from the floors; no
#: core module may import an alias (it would hide an upward import behind it).
LAZY_ALIASES: Dict[str, str] = {
    "tx.specs.file_linter": "tx.components.system.file_linter",
    "tx.specs.finder": "tx.components.system.finder",
    "tx.specs.builders": "tx.components.system.builders",
}


def _upward(m: str, t: str) -> bool:
    return _top(t) == "tx" and _floor(t) > _floor(m) and LAZY_ALIASES.get(m) != t


def _module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> Dict[str, Path]:
    out: Dict[str, Path] = {}
    for src in [CORE, *PLUGIN_SRCS]:
        for path in src.rglob("*.py"):
            out[_module_name(src, path)] = path
    return out


MODULES = _modules()


def _top(name: str) -> str:
    return name.split(".")[0]


class _Imports(ast.NodeVisitor):
    """Every import of a module with its line and whether it is inside a function; imports
    under ``if TYPE_CHECKING:`` are for type checkers only and left out unless
    ``typing`` is set (a type checker and a reader follow them)."""

    def __init__(self, module: str, is_package: bool, typing: bool = False) -> None:
        self.module, self.is_package, self.typing = module, is_package, typing
        self.depth = 0
        self.found: List[Tuple[str, int, bool]] = []

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test) and not self.typing:
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _resolve(self, node: ast.ImportFrom) -> Optional[str]:
        if not node.level:
            return node.module
        base = self.module.split(".")
        if not self.is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, node.lineno, self.depth > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = self._resolve(node)
        if not target:
            return
        for alias in node.names:  # `from tx import config` imports the module tx.config
            sub = f"{target}.{alias.name}"
            self.found.append((sub if sub in MODULES else target, node.lineno, self.depth > 0))


def _imports_of(module: str, typing: bool = False) -> List[Tuple[str, int, bool]]:
    path = MODULES[module]
    visitor = _Imports(module, path.name == "__init__.py", typing)
    visitor.visit(ast.parse(path.read_text(), str(path)))
    return visitor.found


def _graph(typing: bool) -> Dict[str, Set[str]]:
    return {m: {t for t, _, _ in _imports_of(m, typing) if t in MODULES and t != m} for m in MODULES}


#: what runs: imports at module top and inside functions
GRAPH = _graph(typing=False)
#: what a type checker follows as well: GRAPH plus the imports under ``if TYPE_CHECKING:``
TYPED_GRAPH = _graph(typing=True)


def _cycles(graph: Optional[Dict[str, Set[str]]] = None) -> Iterator[List[str]]:
    """Tarjan's strongly connected components of more than one module."""
    graph = GRAPH if graph is None else graph
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    counter = [0]

    def strong(v: str) -> Iterator[List[str]]:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                yield from strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                yield sorted(comp)

    for v in sorted(graph):
        if v not in index:
            yield from strong(v)


def _floor(module: str) -> int:
    best, floor = -1, -1
    for i, prefixes in enumerate(FLOORS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, floor = len(p), i
    return floor


def test_the_graph_covers_core_and_every_plugin():
    assert "tx.specs.api" in MODULES and "tx.runner.api" in MODULES
    assert {_top(m) for m in MODULES} >= {"tx", "tx_scheduler_local", "tx_scheduler_slurm", "tx_torchx_compat"}


def test_no_import_cycle_anywhere():
    """Top-level and deferred imports alike: a cycle through a function body is still one."""
    cycles = list(_cycles())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_import_cycle_through_type_checking_imports():
    """An import under ``if TYPE_CHECKING:`` does not run, but a type checker and a reader
    follow it: a circle through one is still a circle in the design (tx.runner.sweep once
    imported tx.runner.api for its hints while the runner imports sweep)."""
    cycles = list(_cycles(TYPED_GRAPH))
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_type_checking_imports_keep_the_floors_and_the_plugin_rule():
    up = [
        f"{m} (floor {_floor(m)}) imports {t} (floor {_floor(t)}) for type checking"
        for m in sorted(MODULES) if _top(m) == "tx"
        for t in sorted(TYPED_GRAPH[m] - GRAPH[m]) if _top(t) == "tx" and _floor(t) > _floor(m)
    ]
    across = [(m, t) for m in MODULES for t in TYPED_GRAPH[m] if _top(t) != _top(m) and _top(t) != "tx"]
    assert up == [] and across == []


def test_every_core_module_has_a_floor():
    assert [m for m in MODULES if _top(m) == "tx" and _floor(m) < 0] == []


def test_core_floors_read_bottom_up():
    """The model (tx.specs) imports nothing above it, settings nothing above settings, ..."""
    bad = [
        f"{m} (floor {_floor(m)}) imports {t} (floor {_floor(t)})"
        for m in sorted(MODULES) if _top(m) == "tx"
        for t in sorted(GRAPH[m]) if _upward(m, t)
    ]
    assert bad == []


def test_lazy_aliases_import_only_their_module_inside_a_function_and_nothing_imports_them():
    for alias, target in LAZY_ALIASES.items():
        found = [(t, inside) for t, _, inside in _imports_of(alias) if t != "typing"]
        assert found == [(target, True)], (alias, found)
    users = [(m, t) for m in MODULES if _top(m) == "tx" for t in GRAPH[m] if t in LAZY_ALIASES]
    assert users == []


def test_the_model_imports_only_the_ground_floor():
    allowed = {"tx.errors", "tx.log", "tx.version"}
    bad = [(m, t) for m in MODULES if m.startswith("tx.specs")
           for t in GRAPH[m] if _top(t) == "tx" and not t.startswith("tx.specs") and t not in allowed
           and LAZY_ALIASES.get(m) != t]
    assert bad == []


def test_core_imports_no_plugin_and_no_plugin_imports_another():
    bad = [(m, t) for m in MODULES for t in GRAPH[m] if _top(t) != _top(m) and _top(t) != "tx"]
    # tx-torchx-compat's shim package is imported as `torchx` by projects, never by tx or a plugin
    assert bad == []


#: tx.runner's own floors, bottom up (docs/architecture.md, "The runner's floors"): handles,
#: options and the small helpers; the engine (one app on one scheduler); the peers that each
#: take the engine (the archive, failover, sweeps); the facade (Runner) and the programs that
#: run one. A runner module imports its own floor and those below, never one above.
RUNNER_FLOORS: List[Tuple[str, ...]] = [
    ("tx.runner.handles", "tx.runner.options", "tx.runner.events", "tx.runner._records"),
    ("tx.runner.engine", "tx.runner._checkpoints"),
    ("tx.runner.archive", "tx.runner.archiver", "tx.runner.failover", "tx.runner._runs", "tx.runner.sweep",
     "tx.runner._sweep_records", "tx.runner._sweep_views"),
    ("tx.runner", "tx.runner.api", "tx.runner._failover_watcher", "tx.runner._sweep_supervisor",
     "tx.runner._archive_copier"),
]
#: the peers above the engine: none imports another (what one needs of another arrives as an
#: argument from the facade)
RUNNER_PEERS: List[Set[str]] = [{"tx.runner.archive", "tx.runner.archiver"}, {"tx.runner.failover", "tx.runner._runs"},
                                {"tx.runner.sweep", "tx.runner._sweep_records", "tx.runner._sweep_views"}]


def _runner_floor(module: str) -> int:
    return next((i for i, names in enumerate(RUNNER_FLOORS) if module in names), -1)


def test_every_runner_module_has_a_runner_floor():
    assert [m for m in MODULES if m.startswith("tx.runner") and _runner_floor(m) < 0] == []


def test_the_runners_floors_read_bottom_up():
    """The engine never imports the archive, failover or sweeps; nothing under the facade
    imports it (type-checking imports included: a reader follows them too)."""
    bad = [f"{m} (runner floor {_runner_floor(m)}) imports {t} (runner floor {_runner_floor(t)})"
           for m in sorted(MODULES) if m.startswith("tx.runner")
           for t in sorted(TYPED_GRAPH[m]) if t.startswith("tx.runner") and _runner_floor(t) > _runner_floor(m)]
    assert bad == []


def test_the_runners_peers_import_none_of_each_other():
    bad = [f"{m} imports {t}" for i, group in enumerate(RUNNER_PEERS) for m in sorted(group)
           for t in sorted(TYPED_GRAPH[m]) for j, other in enumerate(RUNNER_PEERS) if j != i and t in other]
    assert bad == []


def test_the_runner_facade_stays_thin():
    """Runner composes the floors (docs/architecture.md): what it does itself fits in 400 lines."""
    assert len(MODULES["tx.runner.api"].read_text().splitlines()) <= 400


def test_the_architecture_page_shows_the_runners_floors_as_built():
    """docs/architecture.md's picture of the runner's floors names every runner module on the
    floor :data:`RUNNER_FLOORS` gives it (a module added, moved or left out is a failing test,
    not a page that describes another runner)."""
    import re

    text = (REPO / "docs" / "architecture.md").read_text().split("## The runner's floors", 1)[1]
    picture = text.split("```", 2)[1]
    labels = {"ground": 0, "engine": 1, "peers": 2, "facade": 3}
    shown: Dict[str, int] = {}
    floor = -1
    for line in picture.splitlines():
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        if word in labels:
            floor = labels[word]
        for module in re.findall(r"\btx\.runner(?:\.\w+)?\b", line):
            shown[module] = floor
    expected = {m: i for i, names in enumerate(RUNNER_FLOORS) for m in names}
    assert shown == expected


#: modules whose imports are being reworked in the same change (issue 23: the CLI as data,
#: TorchX shims leaving the Scheduler base); emptied when that lands
PENDING: set = set()


def _comment_near(lines: List[str], lineno: int) -> bool:
    """A comment on the import's line, or heading the group of imports it belongs to."""
    if "#" in lines[lineno - 1]:
        return True
    i = lineno - 2
    while i >= 0:
        text = lines[i].strip()
        if text.startswith("#"):
            return True
        if not (text == "" or text.startswith(("from ", "import ")) or text.endswith((",", "(")) or text == ")"):
            return False
        i -= 1
    return False


def _light_reason(module: str) -> Optional[str]:
    best = None
    for prefix in IMPORT_LIGHT:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _top(m) == "tx"))
def test_imports_inside_functions_only_in_the_import_light_set(module):
    deferred = [(t, line) for t, line, inside in _imports_of(module) if inside]
    if not deferred or any(module == p or module.startswith(p + ".") for p in PENDING):
        return
    assert module in LAZY_FACES or _light_reason(module) is not None, (
        f"{module} imports inside functions ({', '.join(f'{t} line {n}' for t, n in deferred)}): "
        "import at the top, or add the module to the import-light set with its reason"
    )
    lines = MODULES[module].read_text().splitlines()
    silent = [f"{t} (line {n})" for t, n in deferred if not _comment_near(lines, n)]
    assert silent == [], f"{module}: deferred imports without a comment saying why: {', '.join(silent)}"
