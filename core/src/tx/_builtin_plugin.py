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


#: tx's own commands: name -> (command class, one-line help), registered through
#: ``tx_register_commands`` exactly as a plugin registers its commands
COMMANDS = {
    "run": ("tx.cli.cmd_run:RunCommand", "run a component or an AppDef file on a scheduler"),
    "builtins": ("tx.cli.cmd_builtins:BuiltinsCommand", "list the components tx can find"),
    "runopts": ("tx.cli.cmd_runopts:RunoptsCommand", "show a scheduler's run options"),
    "status": ("tx.cli.cmd_status:StatusCommand", "show an app's status"),
    "describe": ("tx.cli.cmd_describe:DescribeCommand", "show an app's definition"),
    "log": ("tx.cli.cmd_log:LogCommand", "print or follow an app's logs"),
    "list": ("tx.cli.cmd_list:ListCommand", "list the apps a scheduler knows"),
    "cancel": ("tx.cli.cmd_cancel:CancelCommand", "cancel an app"),
    "gc": ("tx.cli.cmd_gc:GcCommand", "delete the state and logs of apps that finished long ago"),
    "configure": ("tx.cli.cmd_configure:ConfigureCommand", "write a .txconfig with the schedulers' run options"),
    "plugins": ("tx.cli.cmd_plugins:PluginsCommand", "list installed plugins and what they registered"),
    "completion": ("tx.cli.cmd_completion:CompletionCommand", "print a bash or zsh completion script"),
    "lint": ("tx.cli.cmd_lint:LintCommand", "check component functions in a Python file"),
    "tracker": ("tx.cli.cmd_tracker:TrackerCommand",
                "list runs, metadata, artifacts and lineage that trackers recorded"),
}


def tx_register_commands(register: Callable[..., None]) -> None:
    for name, (command, help_text) in COMMANDS.items():
        register(name, command, help=help_text)


def as_pluggy_plugin() -> Any:
    """This module's hooks as a pluggy plugin object (imports pluggy)."""

    from tx.hookspecs import hookimpl  # pluggy: only when hook calls are traced

    plugin = types.ModuleType(__name__)
    for name in REGISTER_HOOKS.values():
        if name in globals():
            setattr(plugin, name, hookimpl(specname=name)(globals()[name]))
    return plugin
