"""``torchx.cli.cmd_run``: TorchX 0.7.0's ``CmdRun``, tx's ``run`` command as a
:class:`~torchx.cli.cmd_base.SubCommand`."""
from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdRun"]


class CmdRun(TxSubCommand):
    """``torchx run`` (tx's ``run``)."""

    tx_command = "run"


class CmdBuiltins(TxSubCommand):
    """``torchx builtins`` (tx's ``builtins``)."""

    tx_command = "builtins"


__all__ += ["CmdBuiltins", "SubCommand"]
