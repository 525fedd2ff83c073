"""tx-core's own registrations: the same hooks as any plugin's, called directly by the
registry (no pluggy needed for them)."""
from typing import Callable, Dict


def tx_register_named_resources(register: Callable[..., None]) -> None:
    from tx.specs.named_resources import GENERIC, generic_factory, null_resource

    for name in GENERIC:
        register(name, generic_factory(name))
    register("NULL", null_resource)
    register("MISSING", null_resource)


def tx_register_components(register: Callable[..., None]) -> None:
    register("", "tx.components", description="built-in components")


def tx_register_workspaces(register: Callable[..., None]) -> None:
    register("dir", "tx.workspace.dir_workspace:DirWorkspace", description="copy into a job directory")


#: kind -> registration hook, as the registry calls them
REGISTER_HOOKS: Dict[str, Callable[..., None]] = {
    "named_resources": tx_register_named_resources,
    "components": tx_register_components,
    "workspaces": tx_register_workspaces,
}
