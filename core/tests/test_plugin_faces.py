"""Plugins import tx from its package faces only (docs/api.md, docs/architecture.md): the
stability promise sits on the faces, so a plugin that reaches into a module behind one
(``from tx.schedulers.batch import ...``) depends on what tx may change at any release.

Every plugin's sources are parsed (imports inside functions and under ``if TYPE_CHECKING:``
included); each failure names the file and line."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
#: every plugin's sources: this repository's, and the third-party example docs/hooks.md walks through
PLUGIN_SRCS = [*sorted(p for p in (REPO / "plugins").glob("*/src") if p.is_dir()), REPO / "tests/example_plugin/src"]

#: the package faces: where tx's stable names live (docs/api.md)
FACES = ("tx", "tx.specs", "tx.runner", "tx.schedulers", "tx.config", "tx.tracker", "tx.workspace", "tx.testing",
         "tx.distributed")
#: component libraries: a component's module path is its public name (``dist.ddp`` is
#: ``tx.components.dist:ddp``), and tx.apps holds the programs components run
LIBRARIES = ("tx.components", "tx.apps")

#: plugin packages allowed to import tx's modules behind the faces, and why
ALLOWED: Dict[str, str] = {
    "tx_torchx_compat": "tx-torchx-compat mirrors TorchX 0.7.0's module paths (torchx.schedulers.api, "
                        "torchx.specs.api, ...): each of its modules re-exports the tx module of the same "
                        "role (often its __all__ by star import), which is the package's purpose",
}


def _is_face_or_library(module: str) -> bool:
    return module in FACES or any(module == lib or module.startswith(lib + ".") for lib in LIBRARIES)


def _tx_imports(path: Path) -> Iterator[Tuple[int, str, List[str]]]:
    """(line, module, names) of every absolute import of tx in ``path``; names is empty for
    ``import tx.x``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "tx" or node.module.startswith("tx."):
                yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tx" or alias.name.startswith("tx."):
                    yield node.lineno, alias.name, []


def _plugin_files() -> Iterator[Tuple[str, Path]]:
    for src in PLUGIN_SRCS:
        for path in sorted(src.rglob("*.py")):
            yield path.relative_to(src).parts[0], path


def _behind_the_faces() -> List[str]:
    return [f"{path.relative_to(REPO)}:{line}: {module}"
            for package, path in _plugin_files() if package not in ALLOWED
            for line, module, _ in _tx_imports(path) if not _is_face_or_library(module)]


def test_the_scan_sees_every_plugin():
    packages = {package for package, _ in _plugin_files()}
    assert {"tx_scheduler_local", "tx_scheduler_slurm", "tx_ui", "tx_torchx_compat", "tx_scheduler_procs"} <= packages
    assert set(ALLOWED) <= packages  # an allow-list entry names a package that exists


def test_plugins_import_tx_only_from_its_faces():
    bad = _behind_the_faces()
    assert bad == [], "plugins import tx modules behind the faces (import the name from its face):\n" + "\n".join(bad)


def test_the_check_catches_an_import_behind_a_face(tmp_path, monkeypatch):
    """Positive control: a plugin source importing from tx.schedulers.batch is reported."""
    src = tmp_path / "plugins" / "x" / "src"
    (src / "tx_x").mkdir(parents=True)
    (src / "tx_x" / "m.py").write_text("from tx.specs import AppDef\n\ndef f():\n    from tx.schedulers.batch import Client\n")
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    monkeypatch.setattr(f"{__name__}.PLUGIN_SRCS", [src])
    assert _behind_the_faces() == ["plugins/x/src/tx_x/m.py:4: tx.schedulers.batch"]


@pytest.mark.parametrize("face", FACES)
def test_every_name_plugins_import_from_a_face_is_exported_there(face):
    """What a plugin imports from a face is in the face's ``__all__`` (the promise) and is there."""
    module = importlib.import_module(face)
    missing = []
    for package, path in _plugin_files():
        for line, imported, names in _tx_imports(path):
            if imported != face or package in ALLOWED:
                continue
            for name in names:
                if name not in module.__all__ or not hasattr(module, name):
                    missing.append(f"{path.relative_to(REPO)}:{line}: {name}")
    assert missing == []


@pytest.mark.parametrize("face", ["tx", "tx.specs", "tx.runner", "tx.schedulers"])
def test_a_lazy_face_gives_the_very_object_of_the_module_behind_it(face):
    """``tx.runner.load_run`` is ``tx.runner.failover.load_record``, ``tx.schedulers.BatchClient``
    is ``tx.schedulers.batch.Client``: a face renames, it never wraps or copies."""
    module = importlib.import_module(face)
    table = getattr(module, "_LAZY", None) or getattr(module, "_NAMES")
    for name, target in table.items():
        source, _, attr = target.partition(":")
        assert getattr(module, name) is getattr(importlib.import_module(source), attr or name), name


#: the names the faces give where the modules behind them say the same word for different
#: things: each is the public module's object, whichever private module holds it
RENAMED = [
    ("tx.runner", "list_runs", "tx.runner.failover", "list_records"),
    ("tx.runner", "load_run", "tx.runner.failover", "load_record"),
    ("tx.runner", "collapse_runs", "tx.runner.failover", "collapse_listed"),
    ("tx.runner", "run_record_path", "tx.runner.failover", "record_path"),
    ("tx.runner", "RunRecord", "tx.runner.failover", "RunRecord"),
    ("tx.runner", "UnknownRunError", "tx.runner.failover", "UnknownRunError"),
    ("tx.runner", "list_sweeps", "tx.runner.sweep", "list_records"),
    ("tx.runner", "load_sweep", "tx.runner.sweep", "load_record"),
    ("tx.runner", "collapse_sweeps", "tx.runner.sweep", "collapse_listed"),
    ("tx.runner", "UnknownSweepError", "tx.runner.sweep", "UnknownSweepError"),
    ("tx.runner", "parse_handle", "tx.runner.handles", "parse"),
    ("tx.runner", "run_summary", "tx.views", "run_summary"),
    ("tx.schedulers", "BatchClient", "tx.schedulers.batch", "Client"),
]


@pytest.mark.parametrize("face,name,module,attr", RENAMED)
def test_a_renamed_export_is_the_public_modules_object(face, name, module, attr):
    assert getattr(importlib.import_module(face), name) is getattr(importlib.import_module(module), attr)
