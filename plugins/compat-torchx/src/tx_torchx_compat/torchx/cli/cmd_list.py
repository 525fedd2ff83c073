"""``torchx.cli.cmd_list``: TorchX 0.7.0's ``CmdList``, tx's ``list`` command as a
:class:`~torchx.cli.cmd_base.SubCommand`."""
from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdList"]


class CmdList(TxSubCommand):
    """``torchx list`` (tx's ``list``)."""

    tx_command = "list"
