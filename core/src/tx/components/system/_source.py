"""The printable source of a component function (``tx builtins --print NAME``): the
module's top-level imports it needs, the module-level helpers and constants it uses
(transitively), then the function itself, so that the text runs on its own as a file."""
from __future__ import annotations

import ast
import inspect
from typing import Any, Callable, Dict, List, Set


def _defined_names(node: ast.stmt) -> List[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _used_names(node: ast.AST) -> Set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _imports_used(node: ast.stmt, used: Set[str]) -> bool:
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        return True
    names = getattr(node, "names", [])
    return any((a.asname or a.name.split(".")[0]) in used for a in names)


def function_source(fn: Callable[..., Any]) -> str:
    """Source text of ``fn`` with the imports and module-level definitions it needs
    (imports whose names are not used are left out).

    Raises:
        OSError: the source of ``fn`` is not available.
        TypeError: ``fn`` is not a Python function.
    """
    fn = inspect.unwrap(fn)
    path = inspect.getsourcefile(fn)
    if not path:
        raise OSError(f"no source file for {fn.__qualname__}")
    with open(path, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source, filename=path)
    defs: Dict[str, ast.stmt] = {}
    for node in tree.body:
        for name in _defined_names(node):
            defs[name] = node
    target = defs.get(fn.__name__)
    if target is None:
        return inspect.getsource(fn)
    needed: Set[int] = {id(target)}
    todo = [target]
    while todo:
        node = todo.pop()
        for name in _used_names(node):
            dep = defs.get(name)
            if dep is not None and id(dep) not in needed:
                needed.add(id(dep))
                todo.append(dep)
    used: Set[str] = set()
    for node in tree.body:
        if id(node) in needed:
            used |= _used_names(node)
    parts: List[str] = []
    for node in tree.body:
        if (isinstance(node, (ast.Import, ast.ImportFrom)) and _imports_used(node, used)) or id(node) in needed:
            start = node.lineno
            decorators = getattr(node, "decorator_list", [])
            if decorators:
                start = min(d.lineno for d in decorators)
            lines = source.splitlines()[start - 1 : node.end_lineno]
            parts.append("\n".join(lines))
    out: List[str] = []
    for i, text in enumerate(parts):
        if i and not (text.startswith(("import ", "from ")) and parts[i - 1].startswith(("import ", "from "))):
            out.append("\n")
        out.append(text)
    return "\n".join(out) + "\n"
