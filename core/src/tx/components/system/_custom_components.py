"""Loading of ``path/to/file.py:fn`` and ``pkg.module:fn`` components (see
:mod:`tx.components.system.finder`)."""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import re
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Dict, List, Tuple

from tx.components.system.errors import (
    ComponentNotFoundException,
    ComponentValidationException,
    one_line,
)
from tx.components.system.file_linter import ERROR, NOT_FOUND, SYNTAX_ERROR, validate, validate_module

_lock = threading.Lock()
#: (absolute path, mtime_ns, size) -> loaded module
_file_modules: Dict[Tuple[str, int, int], ModuleType] = {}


def is_file_target(target: str) -> bool:
    """Whether the part before ``:`` names a file (rather than a dotted module)."""
    return target.endswith(".py") or "/" in target or os.sep in target or os.path.isfile(target)


def _errors(msgs: List[Any]) -> List[str]:

    return [f"{m.description} (line {m.line})" if m.line else m.description for m in msgs if m.severity == ERROR]


def _suggest(name: str, candidates: List[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=3)
    if close:
        return f"; did you mean {', '.join(close)}?"
    if candidates:
        return f"; it defines {', '.join(sorted(candidates))}"
    return ""


def _exec_file(abspath: str) -> ModuleType:
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(abspath))[0])
    import hashlib  # deferred: hashlib (~5 ms with OpenSSL) only for a component file

    digest = hashlib.sha1(abspath.encode("utf-8")).hexdigest()[:10]
    modname = f"_tx_component_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(modname, abspath)
    if spec is None or spec.loader is None:
        raise ComponentValidationException(f"cannot load {abspath} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    siblings = _SiblingFinder(abspath)
    sys.meta_path.append(siblings)
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - SystemExit in a user file must not exit tx
        sys.modules.pop(modname, None)
        raise ComponentValidationException(
            f"cannot load component file {abspath}: {type(e).__name__}: {one_line(e)}"
        ) from None
    finally:
        sys.meta_path.remove(siblings)
    return module


class _SiblingFinder:
    """While a component file runs, the top-level modules beside it that nothing else
    provides (``import helpers`` of ``helpers.py`` next to the file): last on
    ``sys.meta_path``, so a sibling never shadows an installed module (a component file
    ``torchx.py`` or a ``yaml.py`` beside one), and the file itself is never imported
    again under its own name. ``sys.path`` is not changed (TorchX executes the file
    without touching it)."""

    def __init__(self, abspath: str) -> None:
        self.directory = os.path.dirname(abspath)
        self.own_name = os.path.splitext(os.path.basename(abspath))[0]

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if path is not None or "." in fullname or fullname == self.own_name:
            return None
        from importlib.machinery import PathFinder  # the loader of .py files and packages

        return PathFinder.find_spec(fullname, [self.directory])


def load_file_component(path: str, fn_name: str, name: str) -> Tuple[Callable[..., Any], List[str], str]:
    """Load ``fn_name`` from the file ``path`` as a real module (unique module name,
    ``__file__`` set; modules beside the file importable while it loads, ``sys.path``
    unchanged).

    Returns:
        ``(function, linter error descriptions, absolute path)``.

    Raises:
        ComponentNotFoundException: no such file or function.
        ComponentValidationException: a syntax error, or the file raised while loading.
    """

    if not os.path.isfile(path):
        raise ComponentNotFoundException(f"component {name!r} not found: no such file {path}")
    abspath = os.path.abspath(path)
    msgs = validate(abspath, fn_name)
    if any(m.name == SYNTAX_ERROR for m in msgs):
        raise ComponentValidationException(f"component {name} is invalid: {'; '.join(_errors(msgs))}")
    if any(m.name == NOT_FOUND for m in msgs):
        raise ComponentNotFoundException(
            f"component {name!r} not found: {path} has no function {fn_name!r}"
            + _suggest(fn_name, list(validate_module(abspath)))
        )
    st = os.stat(abspath)
    key = (abspath, st.st_mtime_ns, st.st_size)
    with _lock:
        module = _file_modules.get(key)
        if module is None:
            module = _exec_file(abspath)
            _file_modules[key] = module
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise ComponentNotFoundException(f"component {name!r} not found: {fn_name!r} is not defined when {path} is loaded")
    return fn, _errors(msgs), abspath


def load_module_component(modname: str, fn_name: str, name: str) -> Tuple[Callable[..., Any], List[str], str]:
    """Import ``modname`` (the current directory is importable too) and lint ``fn_name``
    in the file that defines it.

    Returns:
        ``(function, linter error descriptions, defining source file)``.

    Raises:
        ComponentNotFoundException: no such module or function.
        ComponentValidationException: the module raised while importing, or the function
            has no Python source.
    """

    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        module = importlib.import_module(modname)
    except ModuleNotFoundError as e:
        if e.name and (modname == e.name or modname.startswith(e.name + ".")):
            raise ComponentNotFoundException(f"component {name!r} not found: no module named {e.name!r}") from None
        raise ComponentValidationException(f"cannot import {modname}: {one_line(e)}") from None
    except BaseException as e:  # noqa: BLE001
        raise ComponentValidationException(f"cannot import {modname}: {type(e).__name__}: {one_line(e)}") from None
    fn = getattr(module, fn_name, None)
    if fn is None:
        mod_file = getattr(module, "__file__", None)
        candidates = list(validate_module(mod_file)) if mod_file and mod_file.endswith(".py") else []
        raise ComponentNotFoundException(
            f"component {name!r} not found: module {modname} has no function {fn_name!r}"
            + _suggest(fn_name, candidates)
        )
    if not inspect.isfunction(inspect.unwrap(fn)):
        raise ComponentValidationException(f"component {name} is invalid: {fn_name!r} is not a function")
    src = inspect.getsourcefile(inspect.unwrap(fn))
    if not src or not os.path.isfile(src):
        raise ComponentValidationException(
            f"component {name} is invalid: no Python source file to validate it ({modname} has no __file__)"
        )
    return fn, _errors(validate(src, inspect.unwrap(fn).__name__)), src
