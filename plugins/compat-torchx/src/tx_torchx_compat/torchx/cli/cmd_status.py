"""``torchx.cli.cmd_status``: TorchX 0.7.0's ``CmdStatus``, tx's ``status`` command as a
:class:`~torchx.cli.cmd_base.SubCommand`."""
from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdStatus"]


class CmdStatus(TxSubCommand):
    """``torchx status`` (tx's ``status``)."""

    tx_command = "status"
