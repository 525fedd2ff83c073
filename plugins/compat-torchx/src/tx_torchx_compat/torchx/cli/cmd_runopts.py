"""``torchx.cli.cmd_runopts``: TorchX 0.7.0's ``CmdRunopts``, tx's ``runopts`` command as a
:class:`~torchx.cli.cmd_base.SubCommand`."""
from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdRunopts"]


class CmdRunopts(TxSubCommand):
    """``torchx runopts`` (tx's ``runopts``)."""

    tx_command = "runopts"
