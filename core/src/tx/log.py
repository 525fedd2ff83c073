"""tx.log: library logging through structlog, configured lazily (public: plugins log through it).

Library code calls ``get_logger(__name__).info("event", key=value)``. structlog costs
about 100-150 ms to import (it pulls in asyncio), so the level check happens first, here,
without structlog: an event below the level costs a dict lookup, and structlog is imported
only when an event is actually rendered. The level comes from :func:`configure` (the CLI's
``--log_level``) or the ``LOGLEVEL`` environment variable, default WARNING.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, Optional

__all__ = ["configure", "get_logger", "level", "LEVELS", "parse_level"]

LEVELS: Dict[str, int] = {
    "CRITICAL": 50, "ERROR": 40, "WARNING": 30, "WARN": 30, "INFO": 20, "DEBUG": 10, "NOTSET": 0,
}
_METHOD_LEVEL = {
    "critical": 50, "fatal": 50, "error": 40, "exception": 40, "warning": 30, "warn": 30,
    "info": 20, "debug": 10, "msg": 20,
}
_state: Dict[str, Any] = {"level": None, "json": False, "structlog": False}


def parse_level(level: Optional[str]) -> int:
    """``"info"`` / ``"INFO"`` / ``"20"`` -> 20; None or ``""`` -> WARNING (30).

    Raises:
        ValueError: an unknown level name.
    """
    if level is None or str(level).strip() == "":
        return LEVELS["WARNING"]
    text = str(level).strip().upper()
    if text.isdigit():
        return int(text)
    if text not in LEVELS:
        raise ValueError(f"unknown log level {level!r}: use one of DEBUG, INFO, WARNING, ERROR")
    return LEVELS[text]


def level() -> int:
    """The current threshold (numeric, logging's scale)."""
    if _state["level"] is None:
        try:
            _state["level"] = parse_level(os.environ.get("LOGLEVEL"))
        except ValueError:
            _state["level"] = LEVELS["WARNING"]
    return int(_state["level"])


def configure(level_name: Optional[str] = None, json: bool = False) -> None:
    """Set the threshold (default: ``$LOGLEVEL`` or WARNING) and the rendering: readable
    lines on stderr, or JSON lines with ``json=True``. Cheap: structlog is set up when the
    first event at or above the threshold is logged.

    Raises:
        ValueError: an unknown level name.
    """
    _state["level"] = parse_level(level_name if level_name is not None else os.environ.get("LOGLEVEL"))
    _state["json"] = json
    _state["structlog"] = False


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of each write (a test's capture or
    a redirect set after the first event must not leave tx writing to a closed file)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _setup_structlog() -> None:
    import structlog  # deferred: structlog only when a log line is written

    processors: list = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="%H:%M:%S"),
    ]
    if _state["json"]:
        processors.append(structlog.processors.JSONRenderer())
    else:
        # colours only on a terminal, and never with NO_COLOR set (https://no-color.org)
        colors = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
        processors.append(structlog.dev.ConsoleRenderer(colors=colors, pad_event_to=0))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level()),
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr()),
        cache_logger_on_first_use=False,
    )
    _state["structlog"] = True


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


class _LazyLogger:
    """Proxy that drops events below the threshold without importing structlog."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, method: str) -> Callable[..., Any]:
        lvl = _METHOD_LEVEL.get(method)
        if lvl is not None and lvl < level():
            return _noop
        if not _state["structlog"]:
            _setup_structlog()
        import structlog  # deferred: structlog only when a log line is written

        return getattr(structlog.get_logger(), method)

    def is_enabled_for(self, method: str) -> bool:
        return _METHOD_LEVEL.get(method, 0) >= level()


def get_logger(name: str) -> Any:
    """A structlog logger for ``name``; events below the threshold cost nothing."""
    return _LazyLogger(name)
