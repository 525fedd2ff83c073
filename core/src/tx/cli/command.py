"""A ``tx`` subcommand as data: what it accepts and the function that runs it.

A command is registered through the ``tx_register_commands`` hook, by tx-core for its own
commands exactly as by a plugin: ``register(name, "pkg.module:COMMAND", help="one line")``.
The name and the help are given to ``register`` (so ``tx --help`` and ``tx plugins`` know
them without importing the command); the :class:`Command` record the dotted path names
holds the rest::

    from tx.cli.command import Argument, Command

    def _quota(args):
        print(f"quota of {args.who}: 42 GPU hours")
        return 0

    COMMAND = Command(run=_quota, arguments=(Argument("--who", required=True),))

Standard library and :mod:`tx.cli.errors` only: building a command's parser imports nothing heavy.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Dict, NoReturn, Optional, Sequence, Tuple

from tx.cli.errors import EXIT_USAGE

__all__ = ["Argument", "ArgumentParser", "Command", "terminal_columns"]


def terminal_columns(fallback: int = 80) -> int:
    """The terminal's width in columns, as :func:`shutil.get_terminal_size` gives it
    (``$COLUMNS``, else the size of stdout's terminal, else ``fallback``), without importing
    :mod:`shutil` (which loads zlib, bz2 and lzma: about 3 ms on every ``tx`` command)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or fallback


class ArgumentParser(argparse.ArgumentParser):
    """The parser of ``tx`` and of each of its commands: a usage error is one line
    (``tx run: error: ... (see `tx run --help`)``), exit 2; options are never abbreviated
    (``--log`` must never be taken for ``--log_level``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every add_argument; its own width comes from
        # shutil.get_terminal_size, and importing shutil costs more than building the parser
        try:
            return self.formatter_class(prog=self.prog, width=terminal_columns() - 2)  # type: ignore[call-arg]
        except TypeError:  # a formatter class without ``width``
            return super()._get_formatter()

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line on stderr and exit 2."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class Argument:
    """One ``parser.add_argument(*flags, **options)`` call, as data.

    Args:
        flags: the option strings (``"-s", "--scheduler"``) or the name of a positional.
        options: ``argparse``'s keyword arguments (``help``, ``default``, ``action`` ...).
    """

    __slots__ = ("flags", "options")

    def __init__(self, *flags: str, **options: Any) -> None:
        self.flags: Tuple[str, ...] = flags
        self.options: Dict[str, Any] = options

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """Add this argument to ``parser``."""
        parser.add_argument(*self.flags, **self.options)

    def __repr__(self) -> str:
        args = [repr(f) for f in self.flags] + [f"{k}={v!r}" for k, v in self.options.items()]
        return f"Argument({', '.join(args)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Argument) and (self.flags, self.options) == (other.flags, other.options)

    __hash__ = None  # type: ignore[assignment]  # options is a mutable mapping


class Command:
    """A ``tx`` subcommand.

    Args:
        run: ``run(args: argparse.Namespace) -> int | None``, the exit code (None: 0). A
            user error is raised as :class:`tx.cli.errors.CLIError` (or any
            :class:`tx.errors.UserError`) and printed as one line.
        arguments: the command's arguments, added to its parser in order.
        configure: ``configure(parser: argparse.ArgumentParser) -> None``, called after
            ``arguments`` are added, for what plain arguments cannot say (subcommands,
            argument groups); None for none.
    """

    # a plain class: typing.NamedTuple or dataclasses would cost 1-5 ms at start-up
    __slots__ = ("run", "arguments", "configure")

    def __init__(
        self,
        run: Callable[[argparse.Namespace], Optional[int]],
        arguments: Sequence[Argument] = (),
        configure: Optional[Callable[[argparse.ArgumentParser], None]] = None,
    ) -> None:
        self.run = run
        self.arguments: Tuple[Argument, ...] = tuple(arguments)
        self.configure = configure

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's arguments to ``parser`` (its own subparser)."""
        for argument in self.arguments:
            argument.add_to(parser)
        if self.configure is not None:
            self.configure(parser)

    def __repr__(self) -> str:
        return f"Command(run={self.run!r}, arguments={self.arguments!r}, configure={self.configure!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Command) and (self.run, self.arguments, self.configure) == (
            other.run, other.arguments, other.configure)

    __hash__ = None  # type: ignore[assignment]  # like its arguments
