"""tx: a universal job launcher for PyTorch.

Describe a distributed app once (:class:`tx.specs.AppDef`) and run it on any backend a
plugin provides. Plugin authors write::
    from tx import hookimpl

    @hookimpl
    def tx_register_schedulers(register):
        register("mysched", "my_pkg.scheduler:create_scheduler")

This package is the face plugin authors import from (docs/api.md): ``hookimpl`` and
``hookspec``, the library's errors and logger, the plugin registry (:func:`get_registry`, :class:`PluginRegistry`), and what a ``tx``
subcommand is made of (:class:`Command`, :class:`Argument`, :class:`CLIError`). Every name
but the version is resolved on first access, so that ``import tx`` stays free of pluggy
and of the modules it names.
"""
from tx.version import PLUGIN_API_VERSION, __version__

#: the names of this face loaded from their modules on first access
_LAZY = {
    "hookimpl": "tx.hookspecs",
    "hookspec": "tx.hookspecs",
    "UserError": "tx.errors",
    "get_logger": "tx.log",
    "PluginRegistry": "tx.plugins",
    "get_registry": "tx.plugins",
    "install_hint": "tx.plugins",
    "Argument": "tx.cli.command",
    "Command": "tx.cli.command",
    "CLIError": "tx.cli.errors",
}

__all__ = ["__version__", "PLUGIN_API_VERSION", *sorted(_LAZY)]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tx' has no attribute {name!r}")
    import importlib  # deferred: pluggy only when tx.hookimpl is used, each module on first access

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(list(globals()) + list(_LAZY))
