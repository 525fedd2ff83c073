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
        torchx_args(args)
        super().run(args)


def torchx_args(args: Any) -> None:
    """Make tx's parsed ``configure`` arguments TorchX's: the file is ``./.torchxconfig``,
    overwritten where it exists. Writing ``./.txconfig`` instead would hide the project's
    ``.torchxconfig`` from every later run (tx reads ``.torchxconfig`` files only where no
    ``.txconfig`` is found)."""
    if getattr(args, "from_torchx", None) is None:
        args.config_file = ".torchxconfig"
        args.force = True
