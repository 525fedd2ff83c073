"""What a plugin registers: :class:`Registration` (one name of one kind), the ``register``
objects its ``tx_register_*`` hooks receive (:class:`Register` and one subclass per kind)
and :class:`PluginInfo`. Public through :mod:`tx.plugins`, which keeps the registries.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import attrs

from tx._install_hints import pip_install
from tx.errors import UserError

__all__ = [
    "CommandRegister", "ComponentRegister", "import_object", "NamedResourceRegister", "PluginConflictError",
    "PluginError", "PluginInfo", "Register", "REGISTER_CLASSES", "Registration", "SchedulerRegister",
    "TrackerRegister", "WorkspaceRegister",
]


class PluginError(UserError):
    """A plugin could not be loaded or used."""


class PluginConflictError(PluginError):
    """Two plugins registered the same name of the same kind."""


def import_object(path: str) -> Any:
    """Import ``"pkg.module:attr"`` (or ``"pkg.module.attr"``) and return the attribute.

    Raises:
        ImportError: the module or attribute does not exist.
    """
    mod_name, sep, attr = path.partition(":")
    if not sep:
        mod_name, _, attr = path.rpartition(".")
    module = importlib.import_module(mod_name)
    try:
        obj: Any = module
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj
    except AttributeError:
        raise ImportError(f"{mod_name!r} has no attribute {attr!r}") from None


@attrs.define
class Registration:
    """One name registered by a plugin.

    Attributes:
        kind: one of :data:`KINDS`.
        name: the registered name (scheduler name, resource name, namespace ...).
        target: a dotted path ``"pkg.module:attr"`` or the object itself.
        plugin: the entry point name of the plugin that registered it.
        distribution: the distribution that provides the plugin (``tx-core`` for built-ins).
        version: that distribution's version.
        description: one line shown by ``tx plugins`` and ``tx runopts``.
        requires: import names of the backend SDKs the target needs (checked lazily).
        install: the ``pip install`` text that provides what ``requires`` names.
    """

    kind: str
    name: str
    target: Any
    plugin: str
    distribution: str
    version: str
    description: str = ""
    requires: Tuple[str, ...] = ()
    install: str = ""

    def load(self) -> Any:
        """Return the registered object, importing a dotted path on first use.

        Raises:
            PluginError: the target cannot be imported; the message says what to install.
        """
        if not isinstance(self.target, str):
            return self.target
        try:
            obj = import_object(self.target)
        except ImportError as e:
            hint = self.install or pip_install(self.distribution)
            raise PluginError(
                f"{self.kind[:-1]} {self.name!r} from {self.distribution} cannot be loaded: {e}; "
                f"fix: {hint}"
            ) from None
        self.target = obj
        return obj

    def missing_requirements(self) -> List[str]:
        """The entries of ``requires`` that cannot be imported here (no import is done)."""

        return [m for m in self.requires if importlib.util.find_spec(m) is None]


def _dotted_path(obj: Any) -> Optional[str]:
    """``"module:qualname"`` of a module-level function or class that can be imported
    back as the same object, else None (lambdas, local functions, instances)."""
    mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(mod, str) or not isinstance(qual, str) or "<" in qual:
        return None
    found: Any = sys.modules.get(mod)
    for part in qual.split("."):
        found = getattr(found, part, None)
    return f"{mod}:{qual}" if found is obj else None


class Register:
    """The ``register`` object a ``tx_register_*`` hook receives (as tox's
    ``ToxEnvRegister``): call it once per name. The subclasses document, per hook, what
    ``factory`` must be.

    A factory is given as a dotted path ``"pkg.module:attr"`` (imported on first use) or as
    the object itself. A module-level function or class is recorded by its dotted path, so
    the plugin snapshot cache keeps working; other objects (lambdas, local functions) are
    supported too, but make tx import that plugin in every process.
    """

    kind: str = ""

    def __init__(self, add: Callable[["Registration"], None], plugin: "PluginInfo") -> None:
        self._add = add
        self._plugin = plugin

    def _register(self, name: str, target: Any, description: str, requires: Sequence[str], install: str) -> None:
        if not isinstance(name, str) or (not name and self.kind != "components"):
            raise ValueError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if not isinstance(target, str):
            if target is None:
                raise ValueError(f"{self.kind[:-1].replace('_', ' ')} {name!r}: the factory is None")
            target = _dotted_path(target) or target
        if isinstance(requires, str):
            requires = (requires,)
        info = self._plugin
        self._add(Registration(
            self.kind, name, target, info.name, info.distribution, info.version,
            description, tuple(requires), install,
        ))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of plugin {self._plugin.name!r}>"

    def __call__(self, name: str, factory: Any, *, description: str = "", requires: Sequence[str] = (),
                 install: str = "", help: str = "") -> None:
        """Register ``name``; see the subclass of the hook for what ``factory`` is."""
        self._register(name, factory, description or help, requires, install)


class SchedulerRegister(Register):
    """``register(name, factory, *, description="", requires=(), install="")`` in
    ``tx_register_schedulers``.

    Args:
        name: the scheduler name (``-s NAME``; ``NAME://session/app_id`` handles).
        factory: dotted path (preferred) of ``(session_name: str, **kwargs) -> Scheduler``.
        description: one line for ``tx plugins`` and ``tx runopts``.
        requires: import names of the backend SDKs the factory needs (``("boto3",)``),
            checked before the factory is imported.
        install: what fixes a missing requirement (``"pip install tx-scheduler-ray"``).
    """

    kind = "schedulers"


class WorkspaceRegister(Register):
    """``register(kind, factory, *, description="", requires=(), install="")`` in
    ``tx_register_workspaces``: ``factory`` is a zero-argument callable (usually a class)
    returning a :class:`tx.workspace.Workspace`."""

    kind = "workspaces"


class NamedResourceRegister(Register):
    """``register(name, factory, *, description="")`` in ``tx_register_named_resources``:
    ``factory`` is a zero-argument callable returning a fresh :class:`tx.specs.Resource`."""

    kind = "named_resources"


class TrackerRegister(Register):
    """``register(name, factory, *, description="", requires=(), install="")`` in
    ``tx_register_trackers``: ``factory`` is called as ``factory(config: Optional[str])``
    and returns a ``tx.tracker.TrackerBase``."""

    kind = "trackers"


class ComponentRegister(Register):
    """``register(namespace, module, *, description="")`` in ``tx_register_components``:
    every component function of ``module`` (a dotted module path) and its submodules
    becomes ``namespace.<submodule>.<fn>``; an empty namespace means top level."""

    kind = "components"


class CommandRegister(Register):
    """``register(name, command, *, help="")`` in ``tx_register_commands``: ``command`` is
    a :class:`tx.cli.command.Command` (or its dotted path), or a class or an object with
    ``add_arguments(parser)`` and ``run(args) -> int`` (the older form)."""

    kind = "commands"


#: registry kind -> the register class its hook receives
REGISTER_CLASSES: Dict[str, type] = {
    cls.kind: cls
    for cls in (SchedulerRegister, WorkspaceRegister, NamedResourceRegister, TrackerRegister,
                ComponentRegister, CommandRegister)
}


@attrs.define
class PluginInfo:
    """A plugin as ``tx plugins`` shows it."""

    name: str
    module: str
    distribution: str
    version: str
    registered: Dict[str, List[str]] = attrs.field(factory=dict)
    error: Optional[str] = None
