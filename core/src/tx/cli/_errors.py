"""Turning exceptions into the one-line messages the CLI prints."""
from __future__ import annotations

from tx.errors import UserError

#: exception class names whose message is written for users, besides :class:`UserError`
#: subclasses (TorchX's exception names, raised by code written against TorchX)
_USER_ERRORS = {
    "MalformedAppHandleException", "UnknownSchedulerException", "UnknownAppException",
    "InvalidRunConfigException", "AppDefFormatError", "ComponentNotFoundException",
    "ComponentValidationException", "ComponentArgumentError", "PluginError",
    "PluginConflictError", "ConfigError", "AppStatusError", "SchedulerError",
}
_HINTS = {
    "InvalidRunConfigException": " (see `tx runopts <scheduler>`)",
    "ComponentNotFoundException": "",
}


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
    """One line describing ``e``: the message alone for user errors, the message with the
    exception type for others (a ValueError from a component, an OSError ...)."""
    name = type(e).__name__
    if isinstance(e, KeyError) and e.args:
        msg = str(e.args[0])
    else:
        msg = str(e)
    msg = escape_controls(msg)
    if isinstance(e, UserError) or any(c.__name__ in _USER_ERRORS for c in type(e).__mro__):
        return msg + _HINTS.get(name, "")
    if isinstance(e, (ValueError, TypeError, KeyError, FileNotFoundError, PermissionError,
                      NotADirectoryError, IsADirectoryError, FileExistsError)):
        return msg or name
    if isinstance(e, OSError):
        return f"{e.strerror or msg}{': ' + str(e.filename) if e.filename else ''}"
    return f"{name}: {msg} (unexpected; rerun with --log_level DEBUG for a traceback)"
