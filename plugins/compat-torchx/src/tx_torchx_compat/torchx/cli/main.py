"""``torchx.cli.main``: the ``torchx`` command of tx-torchx-compat (TorchX 0.7.0's CLI, run
by tx).

The console script ``torchx`` (:func:`console`), ``python -m torchx.cli.main`` and
``torchx.cli.main.main(argv)`` run tx's commands with TorchX 0.7.0's surface:

* the verbs of TorchX (``builtins cancel configure describe list log run runopts status
  tracker``) and tx's others; commands of TorchX's ``torchx.cli.cmds`` entry-point group
  (a class with ``add_arguments(parser)`` and ``run(args)``) are added and, as in TorchX,
  win over a built-in command of the same name;
* ``torchx --version`` prints ``torchx-0.7.0``; ``torchx`` alone prints the help on stdout
  and exits 1;
* ``torchx run`` without ``-s`` and without ``[cli:run] scheduler`` uses the first
  installed scheduler in TorchX 0.7.0's order (``local_docker``, ``local_cwd``, ``slurm``,
  ...), as TorchX does; an unknown ``-cfg`` key is a warning naming it (TorchX drops it
  silently; ``tx`` rejects it);
* exit codes: 0, 1 for a failed command or app, 2 for a usage error (argparse's).

Errors stay tx's one line, never a traceback. Where a real TorchX is installed,
:func:`console` hands over to it.
"""
import os
import sys
from typing import Any, List, Optional

#: TorchX 0.7.0's built-in schedulers, in its registration order: the first installed one
#: is ``torchx run``'s default scheduler
TORCHX_SCHEDULER_ORDER = (
    "local_docker", "local_cwd", "slurm", "kubernetes", "kubernetes_mcad", "aws_batch",
    "aws_sagemaker", "gcp_batch", "ray", "lsf",
)

__all__ = ["TORCHX_SCHEDULER_ORDER", "console", "get_default_sub_cmds", "get_sub_cmds", "load_group", "main",
           "run_main"]

#: TorchX 0.7.0's built-in subcommands: name -> (module, class) of tx-torchx-compat
_SUB_CMDS = {
    "builtins": ("cmd_run", "CmdBuiltins"), "cancel": ("cmd_cancel", "CmdCancel"),
    "configure": ("cmd_configure", "CmdConfigure"), "describe": ("cmd_describe", "CmdDescribe"),
    "list": ("cmd_list", "CmdList"), "log": ("cmd_log", "CmdLog"), "run": ("cmd_run", "CmdRun"),
    "runopts": ("cmd_runopts", "CmdRunopts"), "status": ("cmd_status", "CmdStatus"),
    "tracker": ("cmd_tracker", "CmdTracker"),
}


def load_group(group: str, default: Optional[Any] = None) -> Any:
    """:func:`torchx.util.entrypoints.load_group` (TorchX's ``main`` has it under this name,
    where :func:`get_sub_cmds` looks it up)."""
    from tx_torchx_compat.torchx.util.entrypoints import load_group as _load_group  # deferred: main stays import-light

    return _load_group(group, default)


def get_default_sub_cmds() -> Any:
    """``{name: SubCommand instance}`` of TorchX 0.7.0's built-in commands (tx's, as
    :class:`~torchx.cli.cmd_base.SubCommand`)."""
    import importlib  # deferred: main stays import-light for the console script

    return {name: getattr(importlib.import_module(f"tx_torchx_compat.torchx.cli.{module}"), cls)()
            for name, (module, cls) in _SUB_CMDS.items()}


def get_sub_cmds() -> Any:
    """:func:`get_default_sub_cmds` updated with the ``torchx.cli.cmds`` entry points (read
    by :func:`load_group`; each is instantiated, and wins over a built-in of the same name,
    as in TorchX)."""
    cmds = get_default_sub_cmds()
    for name, cls in (load_group("torchx.cli.cmds", default={}) or {}).items():
        cmds[name] = cls()
    return cmds


def _torchx_cli_commands() -> Any:
    """``{name: (loader, help)}`` of TorchX's ``torchx.cli.cmds`` entry points."""
    from tx_torchx_compat.hooks import torchx_entry_points

    out = {}
    for name, value, dist, version in torchx_entry_points("torchx.cli.cmds"):
        target = value.split("[", 1)[0].strip()

        def load(target: str = target) -> Any:
            import importlib

            module, _, attr = target.partition(":")
            return getattr(importlib.import_module(module), attr)

        out[name] = (load, f"{dist} {version}, TorchX entry point torchx.cli.cmds")
    return out


def _default_scheduler(runner: Any) -> Optional[str]:
    """The first installed scheduler in TorchX's order, else tx's default; None when
    ``[cli:run] scheduler`` is set (tx reads it)."""
    from tx.config import get_config

    if get_config("cli", "run", "scheduler"):
        return None
    installed = set(runner.scheduler_backends())
    for name in TORCHX_SCHEDULER_ORDER:
        if name in installed:
            return name
    return None


def _command_of(argv: List[str]) -> str:
    """The command argv names: its first word that is not an option or the value of
    ``--log_level``; "" if there is none."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--log_level", "--log-level"):
            skip = True
        elif not a.startswith("-"):
            return a
    return ""


def run_main(argv: List[str]) -> int:
    """Run the ``torchx`` command on ``argv``; returns the exit code.

    Raises:
        SystemExit: ``--help`` or ``--version`` (0) or a usage error (2), as argparse does.
    """
    from tx.cli import errors
    from tx.cli.main import build_parser, builtin_commands, plugin_commands

    if argv and argv[0] == "--version":
        import torchx

        print(f"torchx-{torchx.__version__}")
        raise SystemExit(0)  # as argparse's version action (TorchX's) does
    command = _command_of(argv)
    try:
        commands = builtin_commands()
        extra = _torchx_cli_commands()
        if command and command not in commands and command not in extra:
            commands.update(plugin_commands())
        commands.update(extra)
        parser = build_parser(commands, None if command in extra else command)
    except Exception as e:  # noqa: BLE001 - a broken plugin command must not break the CLI
        print(f"torchx: error: {errors.describe_error(e)}", file=sys.stderr)
        return errors.EXIT_FAILURE
    parser.prog = "torchx"
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        for name, sub in getattr(action, "choices", {}).items():
            sub.prog = f"torchx {name}"  # usage errors: `torchx run: error: ...`
    parser.usage = None
    parser.description = "torchx CLI (tx-torchx-compat: TorchX 0.7.0's commands, run by tx)"
    if command == "":
        # build_parser made no subparsers for `--help`: list the commands in the help text
        parser.epilog = "commands: " + ", ".join(sorted(set(commands))) + "\nEach command has its own --help."
    args = parser.parse_args(argv)
    from tx import log as _log

    try:
        _log.configure(args.log_level, json=args.log_json)
    except ValueError as e:
        parser.error(str(e))
    if getattr(args, "command", None) is None:
        parser.print_help()  # TorchX: the help on stdout, exit 1
        return errors.EXIT_FAILURE
    import os

    os.environ.setdefault("TX_CONTEXT_NAME", f"cli_{args.command}")
    os.environ.setdefault("TORCHX_CONTEXT_NAME", f"cli_{args.command}")
    try:
        if args.command == "run" and command not in extra:
            return _run(args)
        if args.command == "configure" and command not in extra:
            _configure_args(args)
        return int(args._command.run(args) or 0)
    except (SystemExit, BrokenPipeError):
        raise
    except Exception as e:  # noqa: BLE001 - user errors become one line, never a traceback
        return _report(e, args.command, traceback=_log.level() <= 10)


def _report(e: BaseException, command: str, traceback: bool) -> int:
    """:func:`tx.cli.errors.report`, the line starting ``torchx COMMAND: error:``."""
    import contextlib
    import io

    from tx.cli import errors

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        code = errors.report(e, command, traceback=traceback)
    text = buf.getvalue()
    if text.startswith(f"tx {command}: "):
        text = "torchx" + text[2:]
    sys.stderr.write(text)
    return code


def _configure_args(args: Any) -> None:
    """Make tx's parsed ``configure`` arguments TorchX's: the file is ``./.torchxconfig``,
    overwritten where it exists. Writing ``./.txconfig`` instead would hide the project's
    ``.torchxconfig`` from every later run (tx reads ``.torchxconfig`` files only where no
    ``.txconfig`` is found). ``--from-torchx`` (tx's) still writes ``./.txconfig``."""
    if getattr(args, "from_torchx", None) is None:
        args.config_file = ".torchxconfig"
        args.force = True


def _run(args: Any) -> int:
    """``torchx run``: tx's ``run`` with TorchX's default scheduler, unknown ``-cfg``
    keys a warning, mounts on a scheduler that supports none a warning (then dropped), and
    the replicas' output relayed to stderr (TorchX's streams)."""
    from tx.cli import cmd_run

    if args.scheduler is None:
        from tx.runner import Runner

        with Runner() as runner:
            args.scheduler = _default_scheduler(runner)
    # TorchX drops unknown -cfg keys and ignores mounts where a scheduler has none, and relays
    # the replicas' logs to stderr (stdout: the handle): arguments of this call, never tx's
    # module globals (tx's defaults stay tx's)
    return int(cmd_run.run(args, unknown_cfg_keys="warn", relay_stdout="stderr", unsupported_mounts="warn") or 0)


def main(argv: Optional[List[str]] = None) -> None:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) as TorchX's ``main`` does:
    return None when the command succeeds, raise SystemExit with the exit code when it
    fails (TorchX's commands call ``sys.exit``).

    Raises:
        SystemExit: the command failed (code 1, or 2 for a usage error), or ``--help``.
    """
    rc = run_main(list(sys.argv[1:] if argv is None else argv))
    if rc:
        raise SystemExit(rc)


def console() -> int:
    """The ``torchx`` console script: a real TorchX, where one is installed, runs instead
    (its ``torchx.cli.main.main``); otherwise :func:`main`. Returns the exit code."""
    from tx_torchx_compat.hooks import real_torchx

    if real_torchx() is not None:
        import importlib

        importlib.import_module("torchx.cli.main").main()
        return 0
    try:
        try:
            main()
        finally:
            if sys.stdout is not None:
                sys.stdout.flush()  # a reader that left shows here when the output was buffered
    except BrokenPipeError:  # `torchx builtins | head -1`: the reader had enough, as under `tx`
        _drop_stdout()
        return 0
    except SystemExit as e:  # the status Python gives SystemExit(code)
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    return 0


def _drop_stdout() -> None:
    """Send what is left of stdout to /dev/null, so that Python's own flush at exit does not
    meet the closed pipe again (and print ``Exception ignored ... BrokenPipeError``)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # no real stdout: nothing will flush to it
        pass
    finally:
        os.close(devnull)


if __name__ == "__main__":  # python -m torchx.cli.main
    sys.exit(console())
