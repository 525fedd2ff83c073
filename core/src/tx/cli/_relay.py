"""Relay the logs of many replicas to one stream, each line prefixed ``role/replica``.

Each replica gets a thread that reads byte blocks of whole lines
(:meth:`tx.runner.Runner.log_blocks`) and writes them, prefixed, with one ``write`` under a
lock: lines of different replicas never interleave mid-line and each replica's lines keep
their order. A replica's last line without ``\\n`` is written when its stream ends.
"""
from __future__ import annotations

import sys
import threading
from typing import IO, Callable, Iterable, List, Optional, Tuple

_COLORS = [b"\x1b[32m", b"\x1b[34m", b"\x1b[35m", b"\x1b[36m", b"\x1b[33m", b"\x1b[31m"]
_RESET = b"\x1b[0m"


def prefix_block(block: bytes, prefix: bytes, at_line_start: bool) -> Tuple[bytes, bool]:
    """Insert ``prefix`` at the start of every line of ``block``.

    ``at_line_start`` says whether ``block`` begins a line; returns the prefixed bytes and
    whether the next block begins a line. ``\\r`` stays inside its line.
    """
    if not block:
        return block, at_line_start
    ends_nl = block.endswith(b"\n")
    body = block[:-1] if ends_nl else block
    out = body.replace(b"\n", b"\n" + prefix)
    if at_line_start:
        out = prefix + out
    if ends_nl:
        out += b"\n"
    return out, ends_nl


class Relay:
    """Relays several replicas' logs to ``out`` (a binary stream).

    Args:
        out: where to write (``sys.stderr.buffer`` for ``tx run``, stdout for ``tx log``).
        color: color the prefixes (default: when ``out`` is a terminal and ``NO_COLOR``
            is not set; :func:`tx.cli._text.use_color`).
    """

    def __init__(self, out: Optional[IO[bytes]] = None, color: Optional[bool] = None) -> None:
        self.out = out if out is not None else sys.stderr.buffer
        if color is None:
            from tx.cli._text import use_color  # its regexes cost ~0.6 ms: only without `color`

            color = use_color(self.out)
        self.color = color
        self.lock = threading.Lock()
        self.threads: List[threading.Thread] = []
        self.errors: List[BaseException] = []

    def _prefix(self, label: str, i: int) -> bytes:
        text = label.encode() + b" "
        if self.color:
            return _COLORS[i % len(_COLORS)] + text + _RESET
        return text

    def add(self, label: str, blocks: Callable[[], Iterable[bytes]]) -> None:
        """Start relaying ``blocks()`` (called in the thread) with prefix ``label``."""
        prefix = self._prefix(label, len(self.threads))

        def pump() -> None:
            at_start = True
            try:
                for block in blocks():
                    data, at_start = prefix_block(block, prefix, at_start)
                    with self.lock:
                        self.out.write(data)
                        self.out.flush()
                if not at_start:
                    with self.lock:
                        self.out.write(b"\n")
                        self.out.flush()
            except BrokenPipeError:
                pass
            except BaseException as e:  # noqa: BLE001 - reported by join()
                self.errors.append(e)

        t = threading.Thread(target=pump, name=f"relay-{label}", daemon=True)
        self.threads.append(t)
        t.start()

    def join(self, timeout: Optional[float] = None) -> None:
        """Wait for every relay to end; re-raise the first error one of them hit."""
        for t in self.threads:
            t.join(timeout)
        if self.errors:
            raise self.errors[0]
