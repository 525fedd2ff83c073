"""``torchx.cli.cmd_cancel``: TorchX 0.7.0's ``CmdCancel``, tx's ``cancel`` command as a
:class:`~torchx.cli.cmd_base.SubCommand`."""
from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdCancel"]


class CmdCancel(TxSubCommand):
    """``torchx cancel`` (tx's ``cancel``)."""

    tx_command = "cancel"
