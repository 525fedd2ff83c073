"""tx-core's own registrations: an ordinary plugin, with the same hooks and register objects
as any other. The registry calls these functions directly (no pluggy needed), or registers
:func:`as_pluggy_plugin` with pluggy when hook calls are traced."""
from typing import Any, Callable


def tx_register_named_resources(register: Callable[..., None]) -> None:
    from tx.specs._generic_resources import GENERIC, generic_factory, null_resource

    for name in GENERIC:
        register(name, generic_factory(name))
    register("NULL", null_resource)
    register("MISSING", null_resource)


def tx_register_components(register: Callable[..., None]) -> None:
    register("", "tx.components", description="built-in components")


def tx_register_workspaces(register: Callable[..., None]) -> None:
    register("dir", "tx.workspace.dir_workspace:DirWorkspace", description="copy into a job directory")


def tx_register_trackers(register: Callable[..., None]) -> None:
    register("file", "tx.tracker.backend.fsspec:create",
             description="runs as JSON files in a directory or an fsspec URL (config: the location)")


def as_pluggy_plugin() -> Any:
    """This module's hooks as a pluggy plugin object (imports pluggy)."""
    import types

    from tx import hookimpl
    from tx.plugins import REGISTER_HOOKS

    plugin = types.ModuleType(__name__)
    for name in REGISTER_HOOKS.values():
        if name in globals():
            setattr(plugin, name, hookimpl(specname=name)(globals()[name]))
    return plugin
