"""``torchx.cli.cmd_describe``: TorchX 0.7.0's ``CmdDescribe``, tx's ``describe`` command as a
:class:`~torchx.cli.cmd_base.SubCommand`."""
from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdDescribe"]


class CmdDescribe(TxSubCommand):
    """``torchx describe`` (tx's ``describe``)."""

    tx_command = "describe"
