"""The ``tx`` command.

Every command, tx's own and a plugin's, is registered through the ``tx_register_commands``
hook as a name, a one-line help and a :class:`tx.cli.command.Command` (or a class with
``add_arguments(parser)`` and ``run(args)``, the older form). tx-core's hook is read
directly (:func:`builtin_commands`), so that ``tx --version``, ``tx --help`` and a built-in
command start without the plugin registry; the registry is built only for a command tx-core
does not have. Every user error ends as one line on stderr and a non-zero exit, without a
traceback (:mod:`tx.cli.errors`).
"""
from __future__ import annotations

import atexit
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from tx import _builtin_plugin
from tx.version import __version__

if TYPE_CHECKING:
    import argparse

    #: name -> (a zero-argument function that loads the command, its one-line help)
    Commands = Dict[str, Tuple[Callable[[], Any], str]]

__all__ = ["build_parser", "builtin_commands", "main", "plugin_commands"]


def _import_target(target: Any) -> Any:
    """The object a dotted path ``"pkg.module:attr"`` names (or ``target`` itself)."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def builtin_commands() -> Commands:
    """tx-core's commands, as its ``tx_register_commands`` hook registers them (the hook
    that also fills the plugin registry), read without building the registry."""
    found: Commands = {}

    def register(name: str, command: Any, *, help: str = "", description: str = "", **_: Any) -> None:
        found[name] = (lambda: _import_target(command), description or help)

    _builtin_plugin.tx_register_commands(register)
    return found


def plugin_commands() -> Commands:
    """The commands of installed plugins that tx-core does not have (builds the plugin
    registry). A plugin cannot replace a built-in command: ``tx plugins`` shows the clash.

    Raises:
        tx.plugins.PluginConflictError: two plugins registered one command name.
    """
    # the plugin registry (attrs, pluggy) is built only for a command tx-core does not have
    from tx.plugins import get_registry

    builtins = builtin_commands()
    reg = get_registry()
    found: Commands = {}
    for name in reg.names("commands"):
        if name not in builtins:
            r = reg.get("commands", name)
            if r is not None:
                found[name] = (r.load, r.description)
    return found


def build_parser(commands: Optional[Commands] = None, command: Optional[str] = None) -> "argparse.ArgumentParser":
    """The ``tx`` parser, with a subparser for each of ``commands`` (default: the built-in
    ones, :func:`builtin_commands`).

    ``command`` (what argv names, see :func:`_command_of`) keeps start-up small: for a
    built-in command only that subparser is made; with "" (``tx --help``) no subparser is
    made and the built-in commands are listed in the help text; otherwise (None, an unknown
    or a plugin command) every subcommand is made, so argparse can list the choices.
    """
    # argparse (and so the parser class) is not needed by `tx --version`
    import argparse

    from tx.cli.command import ArgumentParser

    builtins = builtin_commands()
    commands = builtins if commands is None else commands
    commands_text = "commands:\n" + "".join(f"  {name:<12}{help_text}\n" for name, (_l, help_text) in builtins.items())
    description = "tx: run PyTorch apps on the schedulers of the installed plugins"
    if command == "":  # `tx --help`: say what is installed (plugin snapshot; no plugin import)
        description += f" ({_installed_schedulers()})"
    parser = ArgumentParser(
        prog="tx",
        usage="tx [-h] [--version] [--log_level LOG_LEVEL] [--log_json] COMMAND ...",
        description=description,
        epilog=commands_text + "\nSchedulers and extra commands come from plugins: see `tx plugins`.\n"
        "Each command has its own --help (`tx run --help`, `tx run dist.ddp --help`).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument(
        "--log_level", "--log-level", dest="log_level", default=None,
        help="level of tx's own log events on stderr: DEBUG, INFO, WARNING (default: $LOGLEVEL or WARNING)",
    )
    parser.add_argument("--log_json", "--log-json", dest="log_json", action="store_true",
                        help="log events as JSON lines")
    if command == "":
        parser.set_defaults(command=None)
        return parser
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name, (load, help_text) in commands.items():
        if command in builtins and name != command:
            continue  # only the command that runs needs a parser
        _add_command(sub, name, load(), help_text)
    return parser


def _add_command(sub: Any, name: str, command: Any, help_text: str) -> None:
    """A subparser for ``command`` (a :class:`tx.cli.command.Command`, or a class or an
    object with ``add_arguments(parser)`` and ``run(args)``), which ``_main`` runs."""
    cmd = command() if isinstance(command, type) else command
    p = sub.add_parser(name, prog=f"tx {name}", help=help_text, description=help_text)
    cmd.add_arguments(p)
    p.set_defaults(_command=cmd)


def _version() -> str:
    return f"tx {__version__}"


def _installed_schedulers() -> str:
    """``installed: local_cwd, local_dir, slurm`` or how to install one; never raises."""
    try:
        # the snapshot reader (json, the cache files) is needed only by `tx --help`
        from tx._plugin_cache import snapshot_names

        names = snapshot_names("schedulers")  # no attrs, pluggy or plugin import
        if names is None:
            from tx.plugins import get_registry  # no current snapshot: build the registry

            names = get_registry().names("schedulers")
    except Exception as e:  # noqa: BLE001 - help must print even with a broken plugin
        return f"plugins could not be listed: {type(e).__name__}; see `tx plugins`"
    if names:
        return f"installed: {', '.join(names)}"
    from tx.plugins import install_hint  # the hint's home; reached only with no scheduler

    return install_hint()


def _command_of(argv: List[str]) -> str:
    """The subcommand named in argv: the first word that is not an option or the value of
    ``--log_level`` (e.g. ``run`` in ``tx --log_level INFO run ...``); "" if there is none."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--log_level", "--log-level"):
            skip = True
        elif not a.startswith("-"):
            return a
    return ""


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``tx`` console script; returns the exit code.

    Called with ``argv`` (a list), a usage error or ``--help`` raises ``SystemExit`` as
    argparse does. Called without (the console script, ``python -m tx.cli``), it returns
    that exit code instead and arranges a fast exit (:func:`_exit_fast`).
    """
    console = argv is None
    if console:
        _exit_fast()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # the fastest path: no argparse
        print(_version())
        return 0
    try:
        rc = _main(argv)
    except BrokenPipeError:  # `tx log ... | head`
        sys.stdout = None  # type: ignore[assignment]
        rc = 0
    except KeyboardInterrupt as e:
        from tx.cli.errors import report  # see _main

        rc = report(e)
    except SystemExit as e:  # argparse (--help, a usage error), `tx run` on a signal
        if not console:
            raise
        rc = _status_of(e)
    global _exit_code
    _exit_code = rc
    return rc


def _status_of(e: SystemExit) -> int:
    """The exit status Python gives ``SystemExit(code)``: None is 0, an int is itself,
    anything else is printed on stderr and is 1."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


#: the exit code :func:`_exit_fast` ends the process with (set by :func:`main`)
_exit_code = 0


def _exit_fast() -> None:
    """Let the console process end without the interpreter's teardown (freeing every
    module: ~4 ms after ``tx --help``, ~12 ms after ``tx run``).

    The console script ends with ``sys.exit(main())``, a normal exit: Python waits for
    non-daemon threads and calls the ``atexit`` handlers (a plugin's, logging's flush,
    multiprocessing's clean-up, a tracker's buffered writes) in the reverse order of their
    registration. The handler registered here, before tx imports anything that registers
    one, is therefore called last: it flushes stdout and stderr and ends the process with
    ``os._exit`` and :func:`main`'s exit code, skipping only the teardown. (A handler
    registered before :func:`main` runs, by a module imported at interpreter start-up,
    would be skipped; tx's own modules register none.)
    """
    atexit.register(_end_process)


def _end_process() -> None:
    """The last ``atexit`` handler of the console process: flush, then ``os._exit``."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
    os._exit(_exit_code)


def _main(argv: List[str]) -> int:
    # error reporting is not needed by `tx --version` (the parser imports it anyway)
    from tx.cli import errors

    command = _command_of(argv)
    try:
        commands = builtin_commands()
        if command and command not in commands:  # a plugin's command, or an unknown one
            commands.update(plugin_commands())
        parser = build_parser(commands, command)
    except Exception as e:  # noqa: BLE001 - a broken plugin command must not break tx
        print(f"tx: error: {errors.describe_error(e)}", file=sys.stderr)
        return errors.EXIT_FAILURE
    args = parser.parse_args(argv)
    # tx.log is not needed by `tx --version`
    from tx import log as _log

    try:
        _log.configure(args.log_level, json=args.log_json)
    except ValueError as e:
        parser.error(str(e))
    if args.command is None:
        parser.print_help(sys.stderr)
        return errors.EXIT_USAGE
    os.environ.setdefault("TX_CONTEXT_NAME", f"cli_{args.command}")
    try:
        return int(args._command.run(args) or 0)
    except (SystemExit, BrokenPipeError):
        raise
    except Exception as e:  # noqa: BLE001 - user errors become one line, never a traceback
        return errors.report(e, args.command, traceback=_log.level() <= 10)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
