"""The live status line of ``tx run`` on a terminal: the app's state, the time since it was
launched and, while it waits, why (``tx run: PENDING 12 s: Resources  (Ctrl-C cancels)``).

It is drawn on the terminal's last line (``\\r`` and erase-line, no cursor movement), only
while the app is pending or its replicas are quiet, and erased before any relayed line is
written (it shares the :class:`tx.cli._relay.Relay`'s lock), so that log lines are never
written into it. Nothing is drawn when stderr is not a terminal or ``TERM=dumb``.
"""
from __future__ import annotations

import os
import threading
import time
from typing import IO, Any, Optional

from tx.cli.command import terminal_columns

__all__ = ["LiveLine", "wanted"]

#: the line is drawn after this many seconds without relayed output
QUIET_S = 1.0
#: and redrawn this often (the elapsed time ticks)
TICK_S = 0.5


def wanted(stream: Any) -> bool:
    """Whether to draw a live line on ``stream``: a terminal, and not ``TERM=dumb``."""
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _first_line(text: Any) -> str:
    for ln in str(text or "").splitlines():
        if ln.strip() and ln.strip() != "<NONE>":
            return ln.strip()
    return ""


class LiveLine:
    """A status line on ``out`` (a terminal's binary stream), redrawn by a thread.

    Args:
        out: the terminal (``sys.stderr.buffer``).
        lock: the lock every writer to the terminal holds (the relay's).
        hint: what the line ends with (``Ctrl-C cancels``).
    """

    def __init__(self, out: IO[bytes], lock: Any, hint: str = "") -> None:
        self.out = out
        self.lock = lock
        self.hint = hint
        self.started = time.monotonic()
        self.state = "SUBMITTED"
        self.why = ""
        self.last_output = 0.0
        self.shown = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def update(self, status: Any) -> None:
        """Take the state and, while it waits, the reason from ``status`` (an AppStatus)."""
        self.state = status.state.name
        why = _first_line(status.msg) if self.state in ("SUBMITTED", "PENDING", "UNSUBMITTED") else ""
        # a scheduler's message that starts with the state itself (Slurm's "PENDING: Dependency: ...")
        self.why = why[len(self.state) + 2:] if why.startswith(f"{self.state}: ") else why

    def text(self) -> str:
        """The line: state, elapsed seconds, why it waits, the hint; cut to the terminal's width."""
        s = int(time.monotonic() - self.started)
        elapsed = f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"
        line = f"tx run: {self.state} {elapsed}"
        if self.why:
            line += f": {self.why}"
        if self.hint:
            line += f"  ({self.hint})"
        width = terminal_columns() - 1
        return line if len(line) <= width else line[: max(0, width - 3)] + "..."

    def clear(self) -> None:
        """Erase the line if it is shown; call with the lock held (the relay does)."""
        self.last_output = time.monotonic()
        if self.shown:
            self.out.write(b"\r\x1b[K")
            self.out.flush()  # before a write to stdout, the same terminal
            self.shown = False

    def draw(self) -> None:
        """Draw the line now unless output came in the last :data:`QUIET_S` seconds."""
        with self.lock:
            if self._stop.is_set() or time.monotonic() - self.last_output < QUIET_S:
                return
            try:
                self.out.write(b"\r\x1b[K" + self.text().encode("utf-8", "replace"))
                self.out.flush()
                self.shown = True
            except (OSError, ValueError):
                self._stop.set()

    def start(self) -> "LiveLine":
        def tick() -> None:
            while not self._stop.wait(TICK_S):
                self.draw()

        self._thread = threading.Thread(target=tick, name="tx-live-line", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop redrawing and erase the line (and what the terminal echoed on it: ``^C``).
        Writers leave the cursor at the start of a line, so the erase takes nothing else."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self.lock:
            try:
                self.out.write(b"\r\x1b[K")
                self.out.flush()
                self.shown = False
            except (OSError, ValueError):
                pass
