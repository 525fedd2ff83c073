"""The module graph has no cycles where layers meet: the AppDef model never imports its
own serializers, and the plugin registry never reaches back into the specs that use it."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _imports(module: str) -> Set[str]:
    """Every tx module ``module`` imports, at top level or inside functions."""
    path = SRC / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = SRC / module.replace(".", "/") / "__init__.py"
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tx"):
            found.add(node.module)
            for alias in node.names:  # `from tx import log` imports the module tx.log
                if (SRC / node.module.replace(".", "/") / f"{alias.name}.py").exists():
                    found.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tx"))
    return found


def _reachable(start: str) -> Set[str]:
    seen: Dict[str, Set[str]] = {}
    todo = [start]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen[m] = _imports(m) if (SRC / (m.replace(".", "/") + ".py")).exists() or (
            SRC / m.replace(".", "/") / "__init__.py").exists() else set()
        todo.extend(seen[m])
    return set(seen) - {start}


@pytest.mark.parametrize("model,serializer", [
    ("tx.specs.api", "tx.specs.files"),
    ("tx.specs.api", "tx.specs._convert"),
    ("tx.plugins", "tx.specs.named_resources"),
    ("tx._builtin_plugin", "tx.specs.named_resources"),
])
def test_no_import_back_into_the_layer_above(model, serializer):
    assert serializer not in _reachable(model), f"{model} reaches {serializer}: an import cycle"
    assert model in _reachable(serializer) or model == "tx._builtin_plugin"
