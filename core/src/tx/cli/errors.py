"""How the CLI turns exceptions into one line on stderr and an exit code; the only place
that does.

* :class:`CLIError` (a command's own user error): ``tx CMD: error: <message>``, exit
  ``code`` (1, or 2 for a usage error).
* Any other :class:`tx.errors.UserError` (an unknown scheduler, a bad ``-cfg``, a malformed
  handle, ...): the message alone, exit 1; 2 for a component's argument error.
* ``ValueError``, ``KeyError``, ``OSError`` and kin: the message (an ``OSError``'s
  ``strerror: filename``), exit 1.
* Anything else is unexpected: ``Type: message (unexpected; rerun with --log_level DEBUG
  for a traceback)``, exit 1, and the traceback at ``--log_level DEBUG``.
* ``KeyboardInterrupt``: ``tx: interrupted``, exit 130.

Standard library and :mod:`tx.errors` only at import: ``tx --help`` imports this module.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

from tx.errors import UserError

__all__ = [
    "EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_USAGE", "CLIError", "describe_error",
    "escape_controls", "exit_code", "report", "unknown_app",
]

#: exit code of a failed command
EXIT_FAILURE = 1
#: exit code of a usage error (bad arguments), as argparse uses
EXIT_USAGE = 2
#: exit code after Ctrl-C (128 + SIGINT)
EXIT_INTERRUPTED = 130


class CLIError(UserError):
    """A command's user error: printed as ``tx CMD: error: <message>``, exit ``code``.

    Args:
        message: one line, written for users.
        code: the exit code (:data:`EXIT_FAILURE`, or :data:`EXIT_USAGE` for bad arguments).
    """

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def unknown_app(handle: str, runner: Any = None) -> CLIError:
    """The error of a command given the handle of an app its scheduler does not know.
    Given the command's ``runner`` (:class:`tx.runner.Runner`), the message also says where
    tx's log archive holds logs of the app (a Ray head that restarted, a purged Slurm job);
    an archive that cannot be read changes nothing."""
    where = ""
    if runner is not None:
        try:
            if runner.archived_replicas(handle):
                where = f"; tx's log archive has its logs: tx log {handle}"
        except Exception:  # the archive is only a hint here: the error stays the unknown app
            pass
    return CLIError(f"app {handle} does not exist (or its scheduler no longer keeps it){where}")


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """``text`` with control characters escaped (``\\n``, ``\\r``, ``\\t``, ``\\x1b`` ...):
    text that tx echoes (a handle, a name, a path) cannot forge lines in its output or
    send terminal escape sequences. Other characters (``日本語``) are kept."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c == " " else _ESCAPES.get(c, f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}")
        for c in text
    )


def describe_error(e: BaseException) -> str:
    """One line describing ``e``: the message alone for user errors (with a hint where one
    helps), the message with the exception type for others (a ValueError from a
    component, an OSError ...)."""
    name = type(e).__name__
    if isinstance(e, KeyError) and e.args:
        msg = str(e.args[0])
    else:
        msg = str(e)
    msg = escape_controls(msg)
    if isinstance(e, UserError):
        # tx.specs is heavy: imported only once an error is reported (`tx --help` never is)
        from tx.specs.api import InvalidRunConfigException

        return msg + (" (see `tx runopts <scheduler>`)" if isinstance(e, InvalidRunConfigException) else "")
    if isinstance(e, (ValueError, TypeError, KeyError, FileNotFoundError, PermissionError,
                      NotADirectoryError, IsADirectoryError, FileExistsError)):
        return msg or name
    if isinstance(e, OSError):
        return f"{e.strerror or msg}{': ' + str(e.filename) if e.filename else ''}"
    return f"{name}: {msg} (unexpected; rerun with --log_level DEBUG for a traceback)"


def exit_code(e: BaseException) -> int:
    """The exit code of a command that raised ``e``: a :class:`CLIError`'s own code,
    :data:`EXIT_USAGE` for a component's argument error (as argparse exits), else
    :data:`EXIT_FAILURE`."""
    if isinstance(e, CLIError):
        return e.code
    if isinstance(e, UserError):
        # the component system is heavy: imported only once an error is reported
        from tx.components.system.errors import ComponentArgumentError

        if isinstance(e, ComponentArgumentError):
            return EXIT_USAGE
    return EXIT_FAILURE


def report(e: BaseException, command: Optional[str] = None, traceback: bool = False) -> int:
    """Print the one line for ``e`` (``tx COMMAND: error: ...``, or ``tx: error: ...``
    without a command) on stderr and return the exit code (:func:`exit_code`); with
    ``traceback``, an unexpected error's traceback follows the line."""
    if isinstance(e, KeyboardInterrupt):
        print("tx: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    prefix = f"tx {command}" if command else "tx"
    text = escape_controls(str(e)) if isinstance(e, CLIError) else describe_error(e)
    print(f"{prefix}: error: {text}", file=sys.stderr)
    code = exit_code(e)
    if traceback and code == EXIT_FAILURE and not isinstance(e, CLIError):
        import traceback as tb  # only at --log_level DEBUG

        tb.print_exception(type(e), e, e.__traceback__)
    return code
