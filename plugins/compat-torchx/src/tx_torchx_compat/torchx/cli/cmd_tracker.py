"""``torchx.cli.cmd_tracker``: TorchX 0.7.0's ``CmdTracker``, tx's ``tracker`` command as a
:class:`~torchx.cli.cmd_base.SubCommand`."""
from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdTracker"]


class CmdTracker(TxSubCommand):
    """``torchx tracker`` (tx's ``tracker``)."""

    tx_command = "tracker"
