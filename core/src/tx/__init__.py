"""tx: a universal job launcher for PyTorch.

Describe a distributed app once (:class:`tx.specs.AppDef`) and run it on any backend a
plugin provides. Plugin authors write::
    from tx import hookimpl

    @hookimpl
    def tx_register_schedulers(register):
        register("mysched", "my_pkg.scheduler:create_scheduler")

``hookimpl`` is resolved lazily so that ``import tx`` stays free of pluggy.
"""
from tx.version import PLUGIN_API_VERSION, __version__

__all__ = ["__version__", "PLUGIN_API_VERSION", "hookimpl", "hookspec"]


def __getattr__(name: str) -> object:
    if name in ("hookimpl", "hookspec"):
        from tx import hookspecs  # deferred: pluggy only when tx.hookimpl is used

        return getattr(hookspecs, name)
    raise AttributeError(f"module 'tx' has no attribute {name!r}")
