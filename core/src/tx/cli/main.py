"""The ``tx`` command.

``tx --version`` and ``tx --help`` load no plugin. Each subcommand lives in its own module
and imports what it needs when it runs. Every user error (unknown scheduler or component,
bad ``-cfg``, missing component argument, malformed handle, unreadable AppDef file) ends as
one line on stderr and a non-zero exit, without a traceback.
"""
from __future__ import annotations

import atexit
import os
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional

# tx's own commands, name -> (command class as "module:Class", one-line help); they are
# registered through the ``tx_register_commands`` hook as plugin commands are (see
# :mod:`tx._builtin_plugin`), and a command is a class with ``add_arguments(parser)`` and
# ``run(args) -> int`` either way
from tx._builtin_plugin import COMMANDS
from tx.cli import errors
from tx.cli.errors import EXIT_FAILURE, EXIT_USAGE

if TYPE_CHECKING:
    from typing import NoReturn


def _version() -> str:
    from tx.version import __version__

    return f"tx {__version__}"


def _parser_class() -> Any:
    import argparse

    class OneLineErrorParser(argparse.ArgumentParser):
        """Usage errors as one line (``tx run: error: ... (see `tx run --help`)``), exit 2;
        no abbreviated options (``--log`` must never be taken for ``--log_level``)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("allow_abbrev", False)
            super().__init__(*args, **kwargs)

        def error(self, message: str) -> "NoReturn":  # type: ignore[override]
            self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    return OneLineErrorParser


def build_parser(plugin_commands: Optional[Dict[str, Any]] = None, command: Optional[str] = None) -> Any:
    """The ``tx`` parser.

    ``command`` (what argv names, see :func:`_command_of`) keeps start-up small: for a
    built-in command only that subcommand's parser is made; with none (``tx --help``) no
    subparser is made and the commands are listed in the help text; otherwise (an unknown
    or plugin command) every subcommand is made, so argparse can list the choices.
    """
    import argparse

    commands_text = "commands:\n" + "".join(
        f"  {name:<12}{help_text}\n" for name, (_m, help_text) in COMMANDS.items()
    )
    description = "tx: run PyTorch apps on the schedulers of the installed plugins"
    if command == "":  # `tx --help`: say what is installed (plugin snapshot; no plugin import)
        description += f" ({_installed_schedulers()})"
    parser = _parser_class()(
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_parser_class())
    for name, (target, help_text) in COMMANDS.items():
        if command in COMMANDS and name != command:
            continue  # only the command that runs needs a parser
        _add_command(sub, name, _load_command(target), help_text)
    for name, reg in (plugin_commands or {}).items():
        if name not in COMMANDS:  # a plugin cannot replace a built-in (`tx plugins` shows the clash)
            _add_command(sub, name, reg.load(), reg.description)
    return parser


def _load_command(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(_import(module), attr)


def _add_command(sub: Any, name: str, command: Any, help_text: str) -> None:
    """A subparser for ``command`` (a class, or an object, with ``add_arguments(parser)``
    and ``run(args)``), which ``_main`` runs."""
    cmd = command() if isinstance(command, type) else command
    p = sub.add_parser(name, prog=f"tx {name}", help=help_text, description=help_text)
    cmd.add_arguments(p)
    p.set_defaults(_command=cmd)


def _installed_schedulers() -> str:
    """``installed: local_cwd, local_dir, slurm`` or how to install one; never raises."""
    try:
        from tx._plugin_cache import snapshot_names

        names = snapshot_names("schedulers")  # no attrs, pluggy or plugin import
        if names is None:
            from tx.plugins import get_registry

            names = get_registry().names("schedulers")
    except Exception as e:  # noqa: BLE001 - help must print even with a broken plugin
        return f"plugins could not be listed: {type(e).__name__}; see `tx plugins`"
    if names:
        return f"installed: {', '.join(names)}"
    from tx.plugins import install_hint

    return install_hint()


def _import(module: str) -> Any:
    import importlib

    return importlib.import_module(module)


def _command_of(argv: List[str]) -> Optional[str]:
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


def _plugin_commands(argv: List[str]) -> Dict[str, Any]:
    """Plugin commands, loaded only when argv names a command tx does not have."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first is None or first in COMMANDS:
        return {}
    from tx.plugins import get_registry

    reg = get_registry()
    return {n: reg.get("commands", n) for n in reg.names("commands") if n not in COMMANDS}


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
        rc = errors.report(e)
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
    try:
        parser = build_parser(_plugin_commands(argv), _command_of(argv))
    except Exception as e:  # noqa: BLE001 - a broken plugin command must not break tx
        print(f"tx: error: {errors.describe_error(e)}", file=sys.stderr)
        return EXIT_FAILURE
    args = parser.parse_args(argv)
    from tx import log as _log

    try:
        _log.configure(args.log_level, json=args.log_json)
    except ValueError as e:
        parser.error(str(e))
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    os.environ.setdefault("TX_CONTEXT_NAME", f"cli_{args.command}")
    try:
        return int(args._command.run(args) or 0)
    except (SystemExit, BrokenPipeError):
        raise
    except Exception as e:  # noqa: BLE001 - user errors become one line, never a traceback
        return errors.report(e, args.command, traceback=_log.level() <= 10)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
