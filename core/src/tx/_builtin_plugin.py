"""tx-core's own registrations: an ordinary plugin, with the same hooks and register objects
as any other. The registry calls these functions directly (no pluggy needed), or registers
:func:`as_pluggy_plugin` with pluggy when hook calls are traced."""
import types
from typing import Any, Callable

from tx.hooknames import REGISTER_HOOKS


def tx_register_named_resources(register: Callable[..., None]) -> None:
    from tx.specs._generic_resources import (  # deferred: the model only when resources are registered
        GENERIC,
        generic_factory,
        null_resource,
    )

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


def tx_register_commands(register: Callable[..., None]) -> None:
    """tx's own commands, registered exactly as a plugin registers its commands: each a
    :class:`tx.cli.command.Command` named by dotted path (imported only when it runs).
    ``tx --help`` lists them in this order."""
    register("run", "tx.cli.cmd_run:COMMAND", help="run a component or an AppDef file on a scheduler")
    register("builtins", "tx.cli.cmd_builtins:COMMAND", help="list the components tx can find")
    register("runopts", "tx.cli.cmd_runopts:COMMAND", help="show a scheduler's run options")
    register("status", "tx.cli.cmd_status:COMMAND", help="show an app's status")
    register("describe", "tx.cli.cmd_describe:COMMAND", help="show an app's definition")
    register("log", "tx.cli.cmd_log:COMMAND", help="print or follow an app's logs")
    register("list", "tx.cli.cmd_list:COMMAND", help="list the apps a scheduler knows")
    register("cancel", "tx.cli.cmd_cancel:COMMAND", help="cancel an app")
    register("sweep", "tx.cli.cmd_sweep:COMMAND", help="run an app over a parameter grid or random draws, as one sweep")
    register("gc", "tx.cli.cmd_gc:COMMAND", help="delete the state and logs of apps that finished long ago")
    register("configure", "tx.cli.cmd_configure:COMMAND", help="write a .txconfig with the schedulers' run options")
    register("plugins", "tx.cli.cmd_plugins:COMMAND", help="list installed plugins and what they registered")
    register("completion", "tx.cli.cmd_completion:COMMAND", help="print a bash or zsh completion script")
    register("lint", "tx.cli.cmd_lint:COMMAND", help="check component functions in a Python file")
    register("tracker", "tx.cli.cmd_tracker:COMMAND",
             help="list runs, metadata, artifacts and lineage that trackers recorded")


def as_pluggy_plugin() -> Any:
    """This module's hooks as a pluggy plugin object (imports pluggy)."""

    from tx.hookspecs import hookimpl  # pluggy: only when hook calls are traced

    plugin = types.ModuleType(__name__)
    for name in REGISTER_HOOKS.values():
        if name in globals():
            setattr(plugin, name, hookimpl(specname=name)(globals()[name]))
    return plugin
