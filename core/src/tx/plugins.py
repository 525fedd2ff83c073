"""The plugin manager: finds plugins (entry point group ``tx``), calls their registration
hooks, and keeps the registries of schedulers, workspaces, named resources, trackers,
component namespaces and CLI commands. What a plugin registers (:class:`Registration`, the
``register`` objects) is defined in ``tx._registers``, the install hints in
``tx._install_hints``; both are public here.

* One broken plugin never breaks tx: its import or registration error is recorded and shown
  by ``tx plugins``; the rest load.
* Two plugins that register one name are a conflict; using that name raises
  :class:`PluginConflictError` naming both distributions.
* Factories are registered as dotted paths (``"pkg.module:function"``) and imported on first
  use (:meth:`Registration.load`).

Environment knobs (as tox and datasette have):

* ``TX_PLUGINS=a,b``: load only these entry points (by entry point name).
* ``TX_DISABLE_PLUGINS=a,b``: skip these entry points.
* ``TX_TRACE_PLUGINS=1``: trace every hook call on stderr (pluggy's tracing); the plugin
  snapshot cache is bypassed so that the registration hooks really run.
"""
from __future__ import annotations

import importlib
import importlib.util
import io
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple


from tx import _builtin_plugin
from tx._plugin_cache import (  # noqa: F401 - re-exported: the cache is part of the registry
    CACHE_LAYOUT,
    ENTRY_POINT_GROUP,
    _env_list,
    _fingerprint,
    _mtime,
    _read_snapshot,
    _snapshot_valid,
    _tracing,
    _write_snapshot,
    cached_entry_points,
    entry_points,
)
from tx._install_hints import KNOWN_PLUGINS_FILE, install_hint, known_plugins, not_installed_hint, pip_install
from tx._registers import (
    REGISTER_CLASSES, CommandRegister, ComponentRegister, NamedResourceRegister, PluginConflictError, PluginError,
    PluginInfo, Register, Registration, SchedulerRegister, TrackerRegister, WorkspaceRegister, import_object,
)
from tx.hooknames import EVENT_HOOK, HOOK_NAMES, KINDS, REGISTER_HOOKS  # noqa: F401 - HOOK_NAMES re-exported
from tx.log import get_logger
from tx.specs.named_resources import set_source as _set_named_resource_source
from tx.version import PLUGIN_API_VERSION, __version__

__all__ = [
    "CommandRegister", "ComponentRegister", "CORE_PLUGIN", "entry_points", "get_registry", "import_object",
    "install_hint", "known_plugins", "KNOWN_PLUGINS_FILE", "NamedResourceRegister",
    "not_installed_hint", "pip_install", "PluginConflictError", "PluginError", "PluginInfo", "PluginRegistry",
    "Register", "REGISTER_CLASSES", "Registration", "SchedulerRegister", "set_registry",
    "TrackerRegister", "WorkspaceRegister",
]

CORE_PLUGIN = "tx-core"


class _PluginExit(Exception):
    """A plugin called ``sys.exit`` (or argparse did, parsing ``sys.argv``) while tx
    imported it or ran its hook."""


def _guarded(fn: Callable[[], Any]) -> Any:
    """Run plugin code: ``SystemExit`` becomes :class:`_PluginExit` (a plugin never ends
    tx; what it wrote to stderr on the way out, such as argparse's usage, is dropped and
    its last line kept in the error), and ``sys.argv`` is restored if the plugin changed it."""

    argv, err = list(sys.argv), sys.stderr
    buf = sys.stderr = io.StringIO()
    try:
        result = fn()
    except SystemExit as e:
        said = buf.getvalue().strip().splitlines()
        why = f": {said[-1]}" if said else ""
        raise _PluginExit(
            f"the plugin called sys.exit({e.code!r}) while tx loaded it{why} (does it parse sys.argv at import?)"
        ) from None
    finally:
        sys.stderr = err
        sys.argv[:] = argv
    if buf.getvalue():
        err.write(buf.getvalue())  # a plugin's warnings are kept
    return result


def _import_plugin(module: str) -> Any:
    """Import an entry point's target: ``pkg.hooks`` or ``pkg.hooks:object``."""
    mod_name, _, attr = module.partition(":")
    mod = _guarded(lambda: importlib.import_module(mod_name))
    return getattr(mod, attr) if attr else mod


def _trace_writer(text: str) -> None:
    try:
        sys.stderr.write(f"tx-plugins: {text}")
    except (OSError, ValueError):  # a closed stderr (`... 2>&1 | head`) must not fail a hook
        pass


class PluginRegistry:
    """Plugins and what they registered.

    Args:
        entry_points: ``(name, module, distribution, version)`` tuples to load instead of
            scanning the installed ones (tests pass ``[]`` for an isolated registry).
        builtins: also register tx-core's own named resources and components.

    With the installed entry points, what the plugins registered is cached beside the
    entry points (:func:`cached_entry_points`) and reused while no distribution changed and
    no plugin's hooks module was edited: the plugins' modules and pluggy are then imported
    only when needed (a factory is loaded, or a plugin listens to ``tx_on_event``).
    """

    def __init__(
        self,
        entry_points: Optional[Sequence[Tuple[str, str, str, str]]] = None,
        builtins: bool = True,
    ) -> None:
        self._pm: Any = None
        self._objects: Dict[str, Any] = {}  # plugin name -> object, or its module path (not imported yet)
        self._event_plugins: List[str] = []
        self.plugins: Dict[str, PluginInfo] = {}
        self.registrations: Dict[str, Dict[str, Registration]] = {k: {} for k in KINDS}
        self.conflicts: Dict[str, Dict[str, List[Registration]]] = {k: {} for k in KINDS}
        if builtins:
            self._add_builtins()
        only = _env_list("TX_PLUGINS")
        disabled = set(_env_list("TX_DISABLE_PLUGINS") or [])

        def selected(eps: Sequence[Tuple[str, str, str, str]]) -> List[Tuple[str, str, str, str]]:
            return [ep for ep in eps if (only is None or ep[0] in only) and ep[0] not in disabled]

        if entry_points is not None:
            for ep in selected(entry_points):
                self._load_entry_point(*ep)
            return
        key = _fingerprint()
        eps = selected(cached_entry_points(key))
        snapshot = None if _tracing() else _read_snapshot(key, KINDS)
        if snapshot is not None and _snapshot_valid(snapshot, eps):
            self._load_snapshot(snapshot)
            return
        for ep in eps:
            self._load_entry_point(*ep)
        if not _tracing():  # a traced run may fail in the tracer (a closed stderr): cache nothing
            _write_snapshot(key, self._snapshot(eps))

    # -- loading -----------------------------------------------------------------------
    @property
    def pm(self) -> Any:
        """The pluggy PluginManager, made (and given every plugin) on first use."""
        if self._pm is None:
            import pluggy  # deferred: pluggy (~25 ms) only for plugins not in the snapshot

            from tx import hookspecs  # deferred: pluggy (~25 ms) only for plugins not in the snapshot

            self._pm = pluggy.PluginManager(hookspecs.PROJECT)
            self._pm.add_hookspecs(hookspecs)
            if _tracing():
                self._pm.trace.root.setwriter(_trace_writer)
                self._pm.enable_tracing()
        for name, obj in list(self._objects.items()):
            if self._pm.has_plugin(name):
                continue
            if isinstance(obj, str):
                try:
                    obj = self._objects[name] = _import_plugin(obj)
                except Exception as e:  # noqa: BLE001 - it imported when the cache was made
                    self.plugins[name].error = f"{type(e).__name__}: {e}"
                    del self._objects[name]
                    continue
            self._pm.register(obj, name=name)
        return self._pm

    def _add_builtins(self) -> None:
        """tx-core's own registrations (:mod:`tx._builtin_plugin`): an ordinary plugin with
        the same hooks and register objects as any other. Its hooks are called directly
        (pluggy costs ~25 ms to import and a normal run never needs it), or through pluggy
        when hook calls are traced (``TX_TRACE_PLUGINS=1``)."""

        if _tracing():
            self.add_plugin(_builtin_plugin.as_pluggy_plugin(), CORE_PLUGIN, CORE_PLUGIN, __version__)
            return
        info = PluginInfo(CORE_PLUGIN, _builtin_plugin.__name__, CORE_PLUGIN, __version__)
        self.plugins[CORE_PLUGIN] = info
        for kind, hook in REGISTER_HOOKS.items():
            fn = getattr(_builtin_plugin, hook, None)
            if fn is not None:
                fn(register=self._register_callback(kind, info))

    def _load_entry_point(self, name: str, module: str, dist: str, version: str) -> None:
        try:
            mod = _import_plugin(module)
        except Exception as e:  # noqa: BLE001 - a broken plugin must not break tx
            self.plugins[name] = PluginInfo(name, module, dist, version, error=f"{type(e).__name__}: {e}")
            return
        self.add_plugin(mod, name, dist, version)

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
        pm = self.pm
        try:
            pm.register(obj, name=name)
            pm.check_pending()
        except Exception as e:  # noqa: BLE001 - e.g. a misspelt hook name
            info.error = f"{type(e).__name__}: {e}"
            if pm.is_registered(obj):
                pm.unregister(obj)
            return info
        self._objects[name] = obj
        others = [p for p in pm.get_plugins() if p is not obj]
        for kind, hook in REGISTER_HOOKS.items():
            if not any(impl.plugin_name == name for impl in getattr(pm.hook, hook).get_hookimpls()):
                continue
            # through pluggy (wrappers, ordering and tracing apply), for this plugin only, so
            # that what it registers is recorded as its own
            caller = pm.subset_hook_caller(hook, remove_plugins=others)
            register = self._register_callback(kind, info)
            try:
                _guarded(lambda: caller(register=register))
            except Exception as e:  # noqa: BLE001
                info.error = f"{hook} failed: {type(e).__name__}: {e}"
        if any(impl.plugin_name == name for impl in getattr(pm.hook, EVENT_HOOK).get_hookimpls()):
            self._event_plugins.append(name)
        return info

    def remove_plugin(self, name: str) -> None:
        """Forget plugin ``name``: its hooks and its entry in :attr:`plugins` (what it
        registered is the caller's to restore; see :func:`tx.testing.register_plugin`)."""
        self._objects.pop(name, None)
        if name in self._event_plugins:
            self._event_plugins.remove(name)
        if self._pm is not None and self._pm.get_plugin(name) is not None:
            self._pm.unregister(name=name)
        self.plugins.pop(name, None)

    # -- the snapshot cache -----------------------------------------------------------
    def _snapshot(self, eps: Sequence[Tuple[str, str, str, str]]) -> Optional[Dict[str, Any]]:
        """What the entry-point plugins registered, as JSON; None when a registration is
        not a dotted path (an object cannot be cached)."""
        plugins = []
        for name, module, _dist, _version in eps:
            info = self.plugins.get(name)
            if info is None or info.error is not None:
                # a broken plugin may be fixed without any file tx watches changing (an
                # editable install, a transient error): load it again next time rather
                # than cache the failure
                return None
            regs = []
            live = False  # registered an object that has no dotted path: run its hooks every time
            for kind, names in info.registered.items():
                for n in names:
                    for r in [self.registrations[kind].get(n), *self.conflicts[kind].get(n, [])]:
                        if r is None or r.plugin != name:
                            continue
                        if not isinstance(r.target, str):
                            live = True
                            continue
                        regs.append([r.kind, r.name, r.target, r.description, list(r.requires), r.install])
            obj = self._objects.get(name)
            path = getattr(obj, "__file__", None) if obj is not None else None
            plugins.append({
                "name": name, "module": module, "distribution": info.distribution,
                "version": info.version, "error": info.error, "registrations": regs,
                "events": name in self._event_plugins, "file": path, "mtime": _mtime(path),
                "live": live,
            })
        return {"selected": [ep[0] for ep in eps], "plugins": plugins}

    def _load_snapshot(self, snapshot: Dict[str, Any]) -> None:
        for p in snapshot["plugins"]:
            if p.get("live"):
                self._load_entry_point(p["name"], p["module"], p["distribution"], p["version"])
                continue
            info = PluginInfo(p["name"], p["module"], p["distribution"], p["version"], error=p["error"])
            self.plugins[info.name] = info
            if p["error"] is None or p["file"]:
                self._objects[info.name] = p["module"]
            for kind, n, target, description, requires, install in p["registrations"]:
                self._register_callback(kind, info)(
                    n, target, description=description, requires=requires, install=install
                )
            if p["events"]:
                self._event_plugins.append(info.name)

    def _register_callback(self, kind: str, info: PluginInfo) -> Register:
        """The typed ``register`` object (:data:`REGISTER_CLASSES`) for ``info``'s hook of ``kind``."""

        def add(reg: Registration) -> None:
            table = self.registrations[kind]
            name = reg.name
            if name in table or name in self.conflicts[kind]:
                clash = self.conflicts[kind].setdefault(name, [table.pop(name)] if name in table else [])
                clash.append(reg)
            else:
                table[name] = reg
            info.registered.setdefault(kind, []).append(name)

        return REGISTER_CLASSES[kind](add, info)

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
        for impl in getattr(self.pm.hook, EVENT_HOOK).get_hookimpls():
            try:
                impl.function(event=event)
            except Exception as e:  # noqa: BLE001

                get_logger(__name__).warning("event_hook_failed", plugin=impl.plugin_name, error=str(e))

    @property
    def has_event_hooks(self) -> bool:
        """True if some plugin implements ``tx_on_event`` (known without importing it)."""
        return bool(self._event_plugins)


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


class _RegistrySource:
    """The process-wide registry as the source of :data:`tx.specs.named_resources`."""

    def names(self) -> List[str]:
        return get_registry().names("named_resources")

    def factory(self, name: str) -> Optional[Callable[[], Any]]:
        reg = get_registry().get("named_resources", name)
        return reg.load() if reg is not None else None


# the model knows no plugin manager: named resources are looked up here once it is loaded
_set_named_resource_source(_RegistrySource())


def __getattr__(name: str) -> Any:
    if name == "KNOWN_PLUGINS":  # the table's old name, kept: now read from the data file
        return known_plugins()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
