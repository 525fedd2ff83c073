"""tx-core's own registrations, made through the same hooks as any plugin."""
from typing import Callable

from tx.hookspecs import hookimpl


@hookimpl
def tx_register_named_resources(register: Callable[..., None]) -> None:
    from tx.specs.named_resources import GENERIC, generic_factory, null_resource

    for name in GENERIC:
        register(name, generic_factory(name))
    register("NULL", null_resource)
    register("MISSING", null_resource)


@hookimpl
def tx_register_components(register: Callable[..., None]) -> None:
    register("", "tx.components", description="built-in components")


@hookimpl
def tx_register_workspaces(register: Callable[..., None]) -> None:
    register("dir", "tx.workspace.dir_workspace:DirWorkspace", description="copy into a job directory")
