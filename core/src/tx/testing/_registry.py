"""Isolated plugin registries and temporary plugin registration, for tests."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Tuple

import attrs

from tx import hookimpl
from tx.plugins import PluginError, PluginInfo, PluginRegistry, Registration, get_registry, set_registry
from tx.workspace import Workspace


@contextlib.contextmanager
def isolated_registry(builtins: bool = True) -> Iterator[PluginRegistry]:
    """Install a registry that loads no installed plugin (only tx-core's own registrations
    when ``builtins``) as the process registry; restore the previous one on exit."""
    reg = PluginRegistry(entry_points=[], builtins=builtins)
    old = set_registry(reg)
    try:
        yield reg
    finally:
        set_registry(old)


@contextlib.contextmanager
def register_plugin(
    obj: Any,
    name: str = "test-plugin",
    *,
    distribution: str = "test",
    version: str = "0",
    strict: bool = True,
) -> Iterator[PluginInfo]:
    """Register ``obj`` (a module, class or instance with ``@tx.hookimpl`` functions) in the
    current registry (:func:`tx.plugins.get_registry`) for the duration of the block, as if
    a distribution ``distribution`` had installed it under entry point ``name``; everything
    it registered is removed afterwards.

    Args:
        strict: raise if the plugin failed to register (a misspelt hook, a hook that
            raised); with ``strict=False`` the error is left in the yielded
            :class:`tx.plugins.PluginInfo` (``info.error``) for the test to inspect.

    Raises:
        tx.plugins.PluginError: ``name`` is already a plugin of the registry, or (strict)
            the plugin's registration failed.
    """
    reg = get_registry()
    regs: Dict[str, Dict[str, Registration]] = {k: dict(v) for k, v in reg.registrations.items()}
    conflicts: Dict[str, Dict[str, List[Registration]]] = {
        k: {n: list(c) for n, c in v.items()} for k, v in reg.conflicts.items()
    }
    info = reg.add_plugin(obj, name, distribution, version)
    try:
        if strict and info.error:
            raise PluginError(f"plugin {name!r} failed to register: {info.error}")
        yield info
    finally:
        reg.remove_plugin(name)
        for kind, table in regs.items():
            reg.registrations[kind].clear()
            reg.registrations[kind].update(table)
        for kind, table2 in conflicts.items():
            reg.conflicts[kind].clear()
            reg.conflicts[kind].update(table2)


@contextlib.contextmanager
def recording_workspace(kind: str = "docker") -> Iterator[List[Tuple[str, Dict[str, Any]]]]:
    """Register, for the block, a workspace kind ``kind`` (use an isolated registry where a
    plugin installs that kind already: ``tx_registry``, :func:`isolated_registry`) that
    builds nothing: it records each ``build`` call as ``(workspace, cfg)`` in the yielded
    list and returns the role with image ``<cfg["image_repo"]>:ws``. For testing what a
    scheduler hands its workspace kind (``image_repo_required``, the user's run options).

    Raises:
        tx.plugins.PluginError: as :func:`register_plugin`.
    """


    calls: List[Tuple[str, Dict[str, Any]]] = []

    class RecordingKind(Workspace):
        def build(self, role: Any, workspace: str, cfg: Any) -> Any:
            calls.append((workspace, dict(cfg)))
            return attrs.evolve(role, image=f"{cfg.get('image_repo')}:ws")

    RecordingKind.kind = kind

    class Plugin:
        @staticmethod
        @hookimpl
        def tx_register_workspaces(register: Any) -> None:
            register(kind, RecordingKind)

    with register_plugin(Plugin, name=f"recording-{kind}"):
        yield calls
