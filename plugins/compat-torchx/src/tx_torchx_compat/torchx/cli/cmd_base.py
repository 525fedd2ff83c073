"""``torchx.cli.cmd_base``: ``SubCommand``, the base class TorchX 0.7.0 documents for a
``torchx`` subcommand (its built-in ones and those of the ``torchx.cli.cmds`` entry-point
group), and the adapter that gives each tx command that shape."""
import abc
import argparse
import sys
from typing import Any

__all__ = ["SubCommand"]


class SubCommand(abc.ABC):
    """A ``torchx`` subcommand: ``add_arguments`` fills its own subparser, ``run`` does the
    work with the parsed arguments (it ends with ``sys.exit(code)`` on failure, as TorchX's
    commands do)."""

    @abc.abstractmethod
    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """Add the command's arguments to ``subparser``."""

    @abc.abstractmethod
    def run(self, args: argparse.Namespace) -> None:
        """Run the command with the parsed ``args``."""


class TxSubCommand(SubCommand):
    """A tx command (:mod:`tx.cli.command`) as a TorchX ``SubCommand``: the class attribute
    ``tx_command`` names it (``"run"``, ``"status"``, ...). ``run`` returns None when the
    command succeeds; a failure is reported as tx reports it (one line on stderr) and ends
    with ``SystemExit`` carrying tx's exit code."""

    tx_command: str = ""

    def _command(self) -> Any:
        from tx.cli.main import builtin_commands  # deferred: the CLI only when a command is used

        load, _help = builtin_commands()[self.tx_command]
        return load()

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """Add tx's arguments of the command to ``subparser``."""
        self._command().add_arguments(subparser)

    def run(self, args: argparse.Namespace) -> None:
        """Run tx's command; SystemExit(code) when it fails."""
        from tx_torchx_compat.torchx.cli.main import _report  # deferred: main imports this module

        for name, value in (("log_level", None), ("log_json", False), ("command", self.tx_command)):
            if not hasattr(args, name):
                setattr(args, name, value)
        try:
            code = self._command().run(args)
        except (SystemExit, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - a user error is one line, as under `tx`
            code = _report(e, self.tx_command, traceback=False)
        if code:
            sys.exit(code)
