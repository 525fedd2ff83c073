"""tx-core's public API is defined (``__all__`` in every public module, docs/api.md lists it)
and the plugins in this repository use only it."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "core" / "src"


def _public_modules() -> List[str]:
    out = []
    for path in sorted((CORE / "tx").rglob("*.py")):
        parts = list(path.relative_to(CORE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any(p.startswith("_") for p in parts):
            continue
        out.append(".".join(parts))
    return out


PUBLIC = _public_modules()


def _is_public_module(name: str) -> bool:
    return name in PUBLIC


def _exports(module: str) -> List[str]:
    return list(getattr(importlib.import_module(module), "__all__", ["<no __all__>"]))


@pytest.mark.parametrize("module", PUBLIC)
def test_every_public_module_says_what_it_exports(module):
    path = CORE / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = CORE / module.replace(".", "/") / "__init__.py"
    tree = ast.parse(path.read_text())
    assert any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in n.targets)
               for n in tree.body), f"{module} has no __all__"
    mod = importlib.import_module(module)
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert missing == [], f"{module}.__all__ names what it does not have: {missing}"


def _plugin_imports() -> Iterator[Tuple[str, int, str, str]]:
    """``(file, line, module, name)`` for every ``from tx... import name`` / ``import tx...``
    in the plugins' source (their tests may reach into their own plugin, not into tx)."""
    for path in sorted((REPO / "plugins").glob("*/src/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and (node.module == "tx" or node.module.startswith("tx.")):
                for alias in node.names:
                    yield str(path.relative_to(REPO)), node.lineno, node.module, alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "tx" or alias.name.startswith("tx."):
                        yield str(path.relative_to(REPO)), node.lineno, alias.name, ""


def test_plugins_import_only_public_names():
    bad = []
    for where, line, module, name in _plugin_imports():
        sub = f"{module}.{name}"
        if name == "__all__" or (name and _is_public_module(sub)):
            continue  # `from tx.config import environ`: a public module
        if not _is_public_module(module):
            bad.append(f"{where}:{line}: {module} is private")
        elif name and name != "*" and name not in _exports(module):
            bad.append(f"{where}:{line}: {module}.{name} is not in its __all__")
    assert bad == [], "\n".join(bad)


def _documented() -> dict:
    """docs/api.md as ``{module: [names]}`` (``## `module` `` headings, ``- `name` `` items)."""
    out: dict = {}
    current = None
    for line in (REPO / "docs" / "api.md").read_text().splitlines():
        m = re.match(r"^## `(tx[\w.]*)`", line)
        if m:
            current = out.setdefault(m.group(1), [])
            continue
        m = re.match(r"^- `(\w+)`", line)
        if m and current is not None:
            current.append(m.group(1))
    return out


def test_docs_api_lists_every_public_module_and_name():
    documented = _documented()
    assert set(documented) == set(PUBLIC), (sorted(set(PUBLIC) - set(documented)),
                                            sorted(set(documented) - set(PUBLIC)))
    for module in PUBLIC:
        assert sorted(documented[module]) == sorted(_exports(module)), module
