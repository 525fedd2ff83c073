"""Finds components by name (TorchX's ``torchx.specs.finder``).

A component name is one of:

1. ``module.fn`` relative to a registered component namespace. tx-core registers the
   namespace ``""`` -> ``tx.components`` (so ``utils.echo``, ``dist.ddp``); a plugin
   registering ``"foo" -> "foo_pkg.components"`` through ``tx_register_components`` adds
   ``foo.<submodule...>.<fn>``. Namespace modules are walked recursively (subpackages
   with an ``__init__.py``; modules and functions starting with ``_`` are skipped).
2. ``path/to/file.py:fn``: the file is loaded as a real module under a unique name, with
   its directory importable (sibling imports work) and ``__file__`` set.
3. ``pkg.module:fn``: the module is imported (the current directory is importable).

Every candidate function is checked by :mod:`tx.components.system.file_linter`; only valid ones are
listed by :func:`get_components`, and :func:`get_component` explains why one is not valid.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
import threading
from types import ModuleType
from typing import Any, Callable, Dict, Iterator, List, Optional

import attrs

from tx.components.system._custom_components import is_file_target, load_file_component, load_module_component
from tx.components.system._source import function_source
from tx.components.system.errors import (
    ComponentError,
    ComponentNotFoundException,
    ComponentValidationException,
    one_line,
)
from tx.components.system.file_linter import ERROR, get_fn_docstring, validate, validate_module
from tx.log import get_logger
from tx.plugins import PluginConflictError, get_registry

__all__ = [
    "Component",
    "ComponentError",
    "ComponentNotFoundException",
    "ComponentValidationException",
    "get_builtin_source",
    "get_component",
    "get_components",
]


@attrs.define
class Component:
    """A component function and what the finder knows about it.

    Attributes:
        name: the name it is run by (``dist.ddp``, ``path/to/file.py:fn``, ``pkg.mod:fn``).
        description: the docstring's description (a tip when there is no docstring).
        fn_name: the function's name.
        fn: the function; :func:`tx.components.system.builders.materialize_appdef` calls it.
        validation_errors: linter errors; a component with any cannot be run.
        source: the module (registered components) or file (file components) it comes from.
        distribution: the distribution that registered its namespace (``tx-core`` for
            built-ins; empty for file and module components).
    """

    name: str
    description: str
    fn_name: str
    fn: Callable[..., Any]
    validation_errors: List[str] = attrs.field(factory=list)
    source: str = ""
    distribution: str = ""


@attrs.define
class _Index:
    registry: Any
    components: Dict[str, Component] = attrs.field(factory=dict)
    duplicates: Dict[str, List[Component]] = attrs.field(factory=dict)
    errors: Dict[str, str] = attrs.field(factory=dict)

    def add(self, comp: Component) -> None:
        if comp.name in self.duplicates:
            self.duplicates[comp.name].append(comp)
        elif comp.name in self.components:
            self.duplicates[comp.name] = [self.components.pop(comp.name), comp]
        else:
            self.components[comp.name] = comp


_lock = threading.RLock()
_index: Optional[_Index] = None


def _log() -> Any:

    return get_logger(__name__)


#: this package, which lives inside the built-in namespace's package but holds no components
_SYSTEM_PACKAGE = __name__.rpartition(".")[0]


def _walk(base: ModuleType, index: _Index, namespace: str) -> Iterator[ModuleType]:
    yield base
    if not hasattr(base, "__path__"):
        return
    for info in pkgutil.iter_modules(base.__path__, prefix=f"{base.__name__}."):
        if info.name.rpartition(".")[2].startswith("_") or info.name == _SYSTEM_PACKAGE:
            continue
        try:
            mod = importlib.import_module(info.name)
        except Exception as e:  # noqa: BLE001 - one broken module must not hide the rest
            index.errors[f"{namespace}|{info.name}"] = f"cannot import {info.name}: {type(e).__name__}: {one_line(e)}"
            _log().warning("component_module_import_failed", module=info.name, error=str(e))
            continue
        if info.ispkg:
            yield from _walk(mod, index, namespace)
        else:
            yield mod


def _module_components(base: ModuleType, namespace: str, distribution: str, index: _Index) -> None:

    for mod in _walk(base, index, namespace):
        path = getattr(mod, "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        rel = mod.__name__[len(base.__name__) + 1 :] if mod is not base else ""
        for fn_name, msgs in validate_module(path).items():
            fn = getattr(mod, fn_name, None)
            if not inspect.isfunction(fn) or fn.__module__ != mod.__name__:
                continue
            index.add(
                Component(
                    name=".".join(p for p in (namespace, rel, fn_name) if p),
                    description=get_fn_docstring(fn)[0],
                    fn_name=fn_name,
                    fn=fn,
                    validation_errors=[m.description for m in msgs if m.severity == ERROR],
                    source=mod.__name__,
                    distribution=distribution,
                )
            )


def _load_index() -> _Index:
    global _index

    registry = get_registry()
    with _lock:
        if _index is not None and _index.registry is registry:
            return _index
        index = _Index(registry)
        for namespace in registry.names("components"):
            for reg in _registrations(registry, namespace):
                try:
                    target = reg.target
                    base = importlib.import_module(target) if isinstance(target, str) else target
                    _module_components(base, namespace, reg.distribution, index)
                except Exception as e:  # noqa: BLE001 - one broken plugin must not hide the rest
                    index.errors[f"{namespace}|{reg.plugin}"] = (
                        f"components of {reg.distribution} cannot be loaded: {type(e).__name__}: {one_line(e)}"
                    )
                    _log().warning("component_namespace_failed", namespace=namespace, error=str(e))
        _index = index
        return index


def _registrations(registry: Any, namespace: str) -> List[Any]:
    """The registrations of ``namespace``. Several plugins may share a namespace (even
    ``""``): their components are merged, and only component names they both define are
    refused (see :func:`get_component`)."""

    try:
        reg = registry.get("components", namespace)
    except PluginConflictError:
        return list(registry.conflicts["components"].get(namespace, []))
    return [reg] if reg is not None else []


def get_components() -> Dict[str, Component]:
    """All valid components of the registered namespaces, by name (sorted).

    Built once per process (and again if the plugin registry is replaced). Invalid
    components, and names that two namespaces both define, are left out.
    """
    index = _load_index()
    return {
        name: comp
        for name, comp in sorted(index.components.items())
        if not comp.validation_errors
    }


def _not_found(name: str, index: _Index) -> ComponentNotFoundException:
    valid = [n for n, c in index.components.items() if not c.validation_errors]
    msg = f"component {name!r} not found"
    close = difflib.get_close_matches(name, valid, n=3, cutoff=0.6)
    if close:
        msg += f" (did you mean {', '.join(close)}?)"
    for key, err in index.errors.items():
        namespace = key.partition("|")[0]
        if not namespace or name.startswith(namespace + "."):
            msg += f"; note: {err}"
    if name.endswith(".py"):
        msg += "; a file component is named path/to/file.py:FUNCTION"
    return ComponentNotFoundException(
        msg + "; run `tx builtins` to list components, or name one as path/to/file.py:fn or pkg.module:fn"
    )


def _custom_component(name: str) -> Component:

    target, _, fn_name = name.rpartition(":")
    if not target or not fn_name.isidentifier():
        raise ComponentNotFoundException(
            f"malformed component name {name!r}: use path/to/file.py:FUNCTION or pkg.module:FUNCTION"
        )
    if is_file_target(target):
        fn, errors, source = load_file_component(target, fn_name, name)
    else:
        fn, errors, source = load_module_component(target, fn_name, name)
    return Component(name, get_fn_docstring(fn)[0], fn_name, fn, errors, source)


def _first_paragraph(fn: Callable[..., Any]) -> str:
    doc = inspect.cleandoc(fn.__doc__ or "")
    return doc.split("\n\n", 1)[0].strip()


def _direct_component(name: str) -> Optional[Component]:
    """Resolve ``namespace.module.fn`` by importing just that module and linting just that
    function, without walking every namespace (what ``tx run`` needs; ~30 ms less than
    building the whole index). None when the name does not resolve to exactly one
    function, so that the full index gives the error or finds the duplicate."""

    registry = get_registry()
    found: List[Component] = []
    for namespace in registry.names("components"):
        prefix = f"{namespace}." if namespace else ""
        if not name.startswith(prefix):
            continue
        try:
            reg = registry.get("components", namespace)
        except PluginConflictError:
            return None
        if reg is None or not isinstance(reg.target, str):
            return None
        rel_module, _, fn_name = name[len(prefix):].rpartition(".")
        if not rel_module or rel_module.split(".")[-1].startswith("_") or fn_name.startswith("_"):
            continue
        try:
            mod = importlib.import_module(f"{reg.target}.{rel_module}")
        except ImportError:
            continue
        fn = getattr(mod, fn_name, None)
        path = getattr(mod, "__file__", None)
        if not inspect.isfunction(fn) or fn.__module__ != mod.__name__ or not path:
            continue

        errors = [m.description for m in validate(path, fn_name, docs=False) if m.severity == ERROR]
        found.append(Component(name, _first_paragraph(fn), fn_name, fn, errors, mod.__name__,
                               reg.distribution))
    return found[0] if len(found) == 1 else None


def get_component(name: str) -> Component:
    """The component called ``name`` (any of the three name forms).

    Raises:
        ComponentNotFoundException: no such component; the one-line message suggests
            close names and ``tx builtins``.
        ComponentValidationException: it breaks the component rules (the linter's
            errors, in one line), two namespaces define it, or its file/module raised
            while loading.
    """
    name = name.strip()
    if ":" in name:
        comp = _custom_component(name)
    elif _index is None and (direct := _direct_component(name)) is not None:
        comp = direct
    else:
        index = _load_index()
        if name in index.duplicates:
            where = " and ".join(f"{c.source} ({c.distribution})" for c in index.duplicates[name])
            raise ComponentValidationException(
                f"component {name} is defined by both {where}; uninstall one, or skip one "
                "with TX_DISABLE_PLUGINS=<plugin>"
            )
        found = index.components.get(name)
        if found is None:
            raise _not_found(name, index)
        comp = found
    if comp.validation_errors:
        raise ComponentValidationException(
            f"component {name} is invalid: {'; '.join(one_line(e) for e in comp.validation_errors)}"
        )
    return comp


def get_builtin_source(name: str) -> str:
    """Source of component ``name`` for ``tx builtins --print``: its module's imports,
    the module-level helpers it uses, and the function, runnable as a file of its own.

    Raises:
        ComponentNotFoundException: no such component.
        ComponentValidationException: the component is invalid, or its source is not
            available.
    """

    comp = get_component(name)
    try:
        return function_source(comp.fn)
    except (OSError, TypeError) as e:
        raise ComponentValidationException(f"no source for component {name}: {one_line(e)}") from None
