"""Library logging through structlog, configured lazily.

Library code calls ``get_logger(__name__).info("event", key=value)``. Nothing is imported
until the first log call (structlog costs ~100 ms to import), so fast paths that log
nothing pay nothing. The CLI calls :func:`configure` with the user's level.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional

_LEVELS = {"CRITICAL": 50, "ERROR": 40, "WARNING": 30, "WARN": 30, "INFO": 20, "DEBUG": 10, "NOTSET": 0}
_state = {"configured": False, "level": None}


def parse_level(level: Optional[str]) -> int:
    """``"info"`` / ``"INFO"`` / ``"20"`` -> 20.

    Raises:
        ValueError: an unknown level name.
    """
    if level is None or level == "":
        return _LEVELS["WARNING"]
    text = str(level).strip().upper()
    if text.isdigit():
        return int(text)
    if text not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}: use one of DEBUG, INFO, WARNING, ERROR")
    return _LEVELS[text]


def configure(level: Optional[str] = None, json: bool = False) -> None:
    """Render library events readably on stderr at ``level`` (default: ``$LOGLEVEL`` or
    WARNING for the library, INFO in the CLI), or as JSON lines with ``json=True``."""
    import structlog

    lvl = parse_level(level if level is not None else os.environ.get("LOGLEVEL"))
    processors: list = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="%H:%M:%S"),
    ]
    if json:
        processors.append(structlog.processors.JSONRenderer())
    else:
        processors.append(
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(), pad_event_to=0)
        )
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    _state["configured"] = True
    _state["level"] = lvl


class _LazyLogger:
    __slots__ = ("_name", "_log")

    def __init__(self, name: str) -> None:
        self._name = name
        self._log: Any = None

    def _get(self) -> Any:
        if not _state["configured"]:
            configure()
        import structlog

        return structlog.get_logger(self._name)

    def __getattr__(self, method: str) -> Any:
        return getattr(self._get(), method)


def get_logger(name: str) -> Any:
    """A structlog logger for ``name`` that imports structlog on first use."""
    return _LazyLogger(name)
