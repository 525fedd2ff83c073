"""``torchx.cli.cmd_configure``: TorchX 0.7.0's ``CmdConfigure``, tx's ``configure`` command as a
:class:`~torchx.cli.cmd_base.SubCommand`."""
from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdConfigure"]


class CmdConfigure(TxSubCommand):
    """``torchx configure`` (tx's ``configure``)."""

    tx_command = "configure"
