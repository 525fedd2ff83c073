"""``torchx.cli.cmd_configure``: TorchX 0.7.0's ``CmdConfigure``, tx's ``configure`` command as a
:class:`~torchx.cli.cmd_base.SubCommand`."""
from typing import Any

from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdConfigure"]


class CmdConfigure(TxSubCommand):
    """``torchx configure`` (tx's ``configure``) writing ``./.torchxconfig`` as TorchX 0.7.0
    does, replacing one that exists (``--from-torchx`` still writes ``./.txconfig``)."""

    tx_command = "configure"

    def run(self, args: Any) -> None:
        """Write the template to ``./.torchxconfig`` (``--print``: to stdout); SystemExit(code)
        when it fails."""
        from tx_torchx_compat.torchx.cli.main import _configure_args  # deferred: main imports this module

        _configure_args(args)
        super().run(args)

