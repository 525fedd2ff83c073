"""The plugin manager: finds plugins (entry point group ``tx``), calls their registration
hooks, and keeps the registries of schedulers, workspaces, named resources, trackers,
component namespaces and CLI commands.

* One broken plugin never breaks tx: its import or registration error is recorded and shown
  by ``tx plugins``; the rest load.
* Two plugins that register one name are a conflict; using that name raises
  :class:`PluginConflictError` naming both distributions.
* Factories are registered as dotted paths (``"pkg.module:function"``) and imported on first
  use (:meth:`Registration.load`).

Environment knobs (as tox and datasette have):

* ``TX_PLUGINS=a,b``: load only these entry points (by entry point name).
* ``TX_DISABLE_PLUGINS=a,b``: skip these entry points.
"""
from __future__ import annotations

import importlib
import os
import sys
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import attrs

from tx.version import PLUGIN_API_VERSION, __version__

ENTRY_POINT_GROUP = "tx"
KINDS = ("schedulers", "workspaces", "named_resources", "trackers", "components", "commands")
_HOOK_OF_KIND = {kind: f"tx_register_{kind}" for kind in KINDS}
CORE_PLUGIN = "tx-core"


class PluginError(Exception):
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
            hint = self.install or f"pip install {self.distribution}"
            raise PluginError(
                f"{self.kind[:-1]} {self.name!r} from {self.distribution} cannot be loaded: {e}; "
                f"fix: {hint}"
            ) from None
        self.target = obj
        return obj

    def missing_requirements(self) -> List[str]:
        """The entries of ``requires`` that cannot be imported here (no import is done)."""
        import importlib.util

        return [m for m in self.requires if importlib.util.find_spec(m) is None]


@attrs.define
class PluginInfo:
    """A plugin as ``tx plugins`` shows it."""

    name: str
    module: str
    distribution: str
    version: str
    registered: Dict[str, List[str]] = attrs.field(factory=dict)
    error: Optional[str] = None


def _iter_entry_points() -> Iterator[Tuple[str, str, str, str]]:
    """Yield ``(name, module, distribution, version)`` for each ``tx`` entry point."""
    from importlib.metadata import entry_points

    eps = entry_points()
    selected = eps.select(group=ENTRY_POINT_GROUP) if hasattr(eps, "select") else eps.get(ENTRY_POINT_GROUP, [])
    seen = set()
    for ep in selected:
        dist = getattr(ep, "dist", None)
        key = (ep.name, ep.value)
        if key in seen:  # the same distribution on sys.path twice
            continue
        seen.add(key)
        yield (
            ep.name,
            ep.value,
            dist.metadata["Name"] if dist is not None else "?",
            dist.version if dist is not None else "?",
        )


def _cache_path(key: str) -> str:
    """One cache file per fingerprint, so venvs and interpreters do not evict each other."""
    import zlib

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tx", f"entry-points-{zlib.crc32(key.encode()):08x}.json")


def _fingerprint() -> str:
    """Changes whenever a distribution is installed or removed on sys.path (the
    directories' mtimes change) or the interpreter or tx-core changes. The working
    directory is left out."""
    parts = [sys.version, __version__]
    cwd = os.getcwd()
    for p in sys.path:
        if p in ("", ".", cwd):  # the working directory changes all the time; no dists live there
            continue
        try:
            parts.append(f"{p}:{os.stat(p or '.').st_mtime_ns}")
        except OSError:
            parts.append(f"{p}:-")
    return "|".join(parts)


def cached_entry_points() -> List[Tuple[str, str, str, str]]:
    """The ``tx`` entry points, from a cache keyed by :func:`_fingerprint` when it is
    current (skips importing importlib.metadata and scanning every distribution, ~50 ms),
    else scanned and cached. ``TX_NO_CACHE=1`` always scans."""
    import json

    key = _fingerprint()
    path = _cache_path(key)
    if not os.environ.get("TX_NO_CACHE"):
        try:
            with open(path) as f:
                data = json.load(f)
            if data.get("key") == key:
                return [tuple(ep) for ep in data["entry_points"]]  # type: ignore[misc]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    eps = list(_iter_entry_points())
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"key": key, "entry_points": eps}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: scan every time
    return eps


def _env_list(name: str) -> Optional[List[str]]:
    val = os.environ.get(name)
    if val is None:
        return None
    return [v.strip() for v in val.split(",") if v.strip()]


class PluginRegistry:
    """Plugins and what they registered.

    Args:
        entry_points: ``(name, module, distribution, version)`` tuples to load instead of
            scanning the installed ones (tests pass ``[]`` for an isolated registry).
        builtins: also register tx-core's own named resources and components.
    """

    def __init__(
        self,
        entry_points: Optional[Sequence[Tuple[str, str, str, str]]] = None,
        builtins: bool = True,
    ) -> None:
        import pluggy

        from tx import hookspecs

        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: Dict[str, PluginInfo] = {}
        self.registrations: Dict[str, Dict[str, Registration]] = {k: {} for k in KINDS}
        self.conflicts: Dict[str, Dict[str, List[Registration]]] = {k: {} for k in KINDS}
        if builtins:
            from tx import _builtin_plugin

            self.add_plugin(_builtin_plugin, CORE_PLUGIN, CORE_PLUGIN, __version__)
        only = _env_list("TX_PLUGINS")
        disabled = set(_env_list("TX_DISABLE_PLUGINS") or [])
        eps = cached_entry_points() if entry_points is None else list(entry_points)
        for name, module, dist, version in eps:
            if (only is not None and name not in only) or name in disabled:
                continue
            try:
                mod = importlib.import_module(module.partition(":")[0])
                if ":" in module:
                    mod = getattr(mod, module.partition(":")[2])
            except Exception as e:  # noqa: BLE001 - a broken plugin must not break tx
                self.plugins[name] = PluginInfo(
                    name, module, dist, version, error=f"{type(e).__name__}: {e}"
                )
                continue
            self.add_plugin(mod, name, dist, version)

    # -- loading -----------------------------------------------------------------------
    def add_plugin(self, obj: Any, name: str, distribution: str = "?", version: str = "?") -> PluginInfo:
        """Register a plugin object (a module or any object with ``@hookimpl`` functions)
        and run its registration hooks. Used for entry points and, in tests, for plugins
        that are not installed.

        Raises:
            PluginError: ``name`` is already a plugin of this registry.
        """
        if name in self.plugins:
            raise PluginError(f"a plugin named {name!r} is already registered")
        info = PluginInfo(name, getattr(obj, "__name__", repr(obj)), distribution, version)
        self.plugins[name] = info
        api = getattr(obj, "TX_PLUGIN_API", PLUGIN_API_VERSION)
        if isinstance(api, int) and api > PLUGIN_API_VERSION:
            info.error = (
                f"needs plugin API {api}, tx-core {__version__} offers {PLUGIN_API_VERSION}: "
                "pip install -U tx-core"
            )
            return info
        try:
            self.pm.register(obj, name=name)
            self.pm.check_pending()
        except Exception as e:  # noqa: BLE001 - e.g. a misspelt hook name
            info.error = f"{type(e).__name__}: {e}"
            if self.pm.is_registered(obj):
                self.pm.unregister(obj)
            return info
        for kind, hook in _HOOK_OF_KIND.items():
            for impl in getattr(self.pm.hook, hook).get_hookimpls():
                if impl.plugin_name != name:
                    continue
                try:
                    impl.function(register=self._register_callback(kind, info))
                except Exception as e:  # noqa: BLE001
                    info.error = f"{hook} failed: {type(e).__name__}: {e}"
        return info

    def _register_callback(self, kind: str, info: PluginInfo) -> Callable[..., None]:
        def register(
            name: str,
            target: Any,
            *,
            description: str = "",
            help: str = "",
            requires: Sequence[str] = (),
            install: str = "",
        ) -> None:
            if not isinstance(name, str) or (not name and kind != "components"):
                raise ValueError(f"{kind} names must be non-empty strings, got {name!r}")
            reg = Registration(
                kind, name, target, info.name, info.distribution, info.version,
                description or help, tuple(requires), install,
            )
            table = self.registrations[kind]
            if name in table or name in self.conflicts[kind]:
                clash = self.conflicts[kind].setdefault(name, [table.pop(name)] if name in table else [])
                clash.append(reg)
            else:
                table[name] = reg
            info.registered.setdefault(kind, []).append(name)

        return register

    # -- lookups -----------------------------------------------------------------------
    def names(self, kind: str) -> List[str]:
        """Registered names of ``kind``, conflicting ones included, in registration order."""
        return list(self.registrations[kind]) + list(self.conflicts[kind])

    def get(self, kind: str, name: str) -> Optional[Registration]:
        """The registration of ``name``, or None.

        Raises:
            PluginConflictError: two plugins registered ``name``.
        """
        clash = self.conflicts[kind].get(name)
        if clash:
            who = " and ".join(f"{r.distribution} {r.version} (plugin {r.plugin!r})" for r in clash)
            raise PluginConflictError(
                f"{kind[:-1].replace('_', ' ')} {name!r} is registered by both {who}; "
                "uninstall one, or skip one with TX_DISABLE_PLUGINS=<plugin>"
            )
        return self.registrations[kind].get(name)

    def call_event(self, event: Any) -> None:
        """Call every ``tx_on_event`` implementation; one that raises is logged and skipped."""
        for impl in self.pm.hook.tx_on_event.get_hookimpls():
            try:
                impl.function(event=event)
            except Exception as e:  # noqa: BLE001
                from tx._log import get_logger

                get_logger(__name__).warning("event_hook_failed", plugin=impl.plugin_name, error=str(e))

    @property
    def has_event_hooks(self) -> bool:
        return bool(self.pm.hook.tx_on_event.get_hookimpls())


_lock = threading.Lock()
_registry: Optional[PluginRegistry] = None


def get_registry() -> PluginRegistry:
    """The process-wide registry, built on first use (scans the ``tx`` entry points)."""
    global _registry
    if _registry is None:
        with _lock:
            if _registry is None:
                _registry = PluginRegistry()
    return _registry


def set_registry(registry: Optional[PluginRegistry]) -> Optional[PluginRegistry]:
    """Replace the process-wide registry (None: rebuild on next use); returns the old one."""
    global _registry
    with _lock:
        old, _registry = _registry, registry
    return old


def install_hint() -> str:
    """The one-line hint printed when no scheduler is installed."""
    return "no scheduler is installed; install one, e.g.: pip install tx-scheduler-local"

