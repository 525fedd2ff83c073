"""``torchx.specs.finder``: :mod:`tx.components.system.finder` at TorchX 0.7's path, plus
TorchX's finder classes (``ComponentsFinder``, ``ModuleComponentsFinder``,
``CustomComponentsFinder``) and ``module_relname``, which list components as tx's
:class:`~tx.components.system.finder.Component` (validation errors: the linter's errors,
not its warnings, as tx's finder)."""
import abc
import importlib
import importlib.util
import inspect
import os
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Iterator, List, Union

from tx.specs.api import AppDef  # noqa: F401
from tx.components.system.file_linter import ERROR, get_fn_docstring, validate  # noqa: F401
from tx.components.system.finder import *  # noqa: F401,F403
from tx.components.system.finder import __all__ as _tx_all
from tx.components.system.finder import (Component, ComponentNotFoundException, ComponentValidationException,
                                         get_component)

__all__ = [*_tx_all, "ComponentsFinder", "CustomComponentsFinder", "ModuleComponentsFinder", "module_relname"]


def module_relname(module: ModuleType, relative_to: ModuleType) -> str:
    """``module``'s dotted name relative to ``relative_to`` (``""`` for the module itself).

    Raises:
        ValueError: ``module`` is not ``relative_to`` nor one of its submodules.
    """
    if module.__name__ == relative_to.__name__:
        return ""
    if not module.__name__.startswith(relative_to.__name__ + "."):
        raise ValueError(f"`{module.__name__}` is not a submodule of `{relative_to.__name__}`")
    return module.__name__[len(relative_to.__name__) + 1:]


def _errors(path: str, fn_name: str) -> List[str]:
    return [m.description for m in validate(path, fn_name) if m.severity == ERROR]


class ComponentsFinder(abc.ABC):
    """TorchX's base class of component finders."""

    @abc.abstractmethod
    def find(self) -> List[Component]:
        """The components found."""


class ModuleComponentsFinder(ComponentsFinder):
    """The functions of ``module`` and its submodules (recursively) as components named
    ``[group.]<submodule>.<function>`` (TorchX's naming: ``group`` replaces the module's name;
    ``""``: no prefix).

    Raises:
        ImportError: ``module`` (a dotted name) cannot be imported.
    """

    def __init__(self, module: Union[str, ModuleType], group: str) -> None:
        self.base_module = importlib.import_module(module) if isinstance(module, str) else module
        self.group = group

    def _modules(self, module: ModuleType) -> Iterator[ModuleType]:
        if getattr(module, "__file__", None):  # not a namespace package
            yield module
        if hasattr(module, "__path__"):
            for info in pkgutil.iter_modules(module.__path__, prefix=f"{module.__name__}."):
                sub = importlib.import_module(info.name)
                if info.ispkg:
                    yield from self._modules(sub)
                else:
                    yield sub

    def find(self) -> List[Component]:
        """Every function of the modules, with its linter errors."""
        out = []
        for mod in self._modules(self.base_module):
            path = os.path.abspath(str(mod.__file__))
            rel = module_relname(mod, relative_to=self.base_module)
            for fn_name, fn in inspect.getmembers(mod, inspect.isfunction):
                name = ".".join(p for p in (self.group, rel, fn_name) if p)
                out.append(Component(name, get_fn_docstring(fn)[0], fn_name, fn, _errors(path, fn_name),
                                     mod.__name__))
        return out


class CustomComponentsFinder(ComponentsFinder):
    """Function ``function_name`` of file ``filepath`` as the component
    ``<filepath>:<function_name>``."""

    def __init__(self, filepath: str, function_name: str) -> None:
        self._filepath = filepath
        self._function_name = function_name

    def find(self) -> List[Component]:
        """The one component, with its linter errors.

        Raises:
            ComponentNotFoundException: no such file or function.
            Exception: what the file raises while loading (a syntax error, ...).
        """
        if not Path(self._filepath).is_file():
            raise ComponentNotFoundException(f"no file {self._filepath!r}")
        name = f"{self._filepath}:{self._function_name}"
        try:
            return [get_component(name)]
        except ComponentValidationException:  # invalid: listed with its errors, as TorchX does
            spec = importlib.util.spec_from_file_location(f"_tx_torchx_finder_{abs(hash(name))}", self._filepath)
            assert spec is not None and spec.loader is not None  # a .py file that exists
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            fn = getattr(module, self._function_name)
            return [Component(name, get_fn_docstring(fn)[0], self._function_name, fn,
                              _errors(os.path.abspath(self._filepath), self._function_name), self._filepath)]
