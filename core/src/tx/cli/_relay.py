"""Relay the logs of many replicas to one stream, each line prefixed ``role/replica``.

Each replica gets a thread that reads byte blocks (:meth:`tx.runner.Runner.log_blocks`)
and writes their whole lines, prefixed, with one ``write`` under a lock: lines of different
replicas never interleave mid-line and each replica's lines keep their order. A block's
unfinished last line (a log archive's block, a progress line of ``\\r`` updates) waits for
the rest of its line; a replica's last line without ``\\n`` is written, ended, when its
stream ends.
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
    """Relays several replicas' logs to ``out`` (a binary stream), or each to a stream of
    its own (``tx run``: the replicas' stdout to stdout, their stderr to stderr).

    Args:
        out: where to write by default (``sys.stderr.buffer`` if None).
        color: color the prefixes (default: for each stream, when it is a terminal and
            ``NO_COLOR`` is not set; :func:`tx.cli._text.use_color`).

    Attributes:
        lock: held around every write; a live status line (:mod:`tx.cli._live`) that
            shares the terminal takes it too, so that no line is written into it.
        before_write: called under ``lock`` before each write (the live line clears itself).
        muted: when set, what arrives is dropped (``tx run`` after Ctrl-C: the replicas'
            dying output stays in their logs, out of the terminal).
    """

    def __init__(self, out: Optional[IO[bytes]] = None, color: Optional[bool] = None) -> None:
        self.out = out if out is not None else sys.stderr.buffer
        self.color = color
        self.lock = threading.Lock()
        self.threads: List[threading.Thread] = []
        self.errors: List[BaseException] = []
        self.before_write: Optional[Callable[[], None]] = None
        self.muted = threading.Event()

    def _prefix(self, label: str, i: int, out: IO[bytes]) -> bytes:
        text = label.encode() + b" "
        color = self.color
        if color is None:
            from tx.cli._text import use_color  # its regexes cost ~0.6 ms: only without `color`

            color = use_color(out)
        if color:
            return _COLORS[i % len(_COLORS)] + text + _RESET
        return text

    def _write(self, out: IO[bytes], data: bytes) -> None:
        with self.lock:
            if self.muted.is_set():
                return
            if self.before_write is not None:
                self.before_write()
            out.write(data)
            out.flush()

    def add(self, label: str, blocks: Callable[[], Iterable[bytes]], out: Optional[IO[bytes]] = None,
            index: Optional[int] = None) -> None:
        """Start relaying ``blocks()`` (called in the thread) with prefix ``label`` to
        ``out`` (default: the relay's); ``index`` picks the prefix's color (default: one
        per call), so that a replica's stdout and stderr share one."""
        dest = out if out is not None else self.out
        prefix = self._prefix(label, len(self.threads) if index is None else index, dest)

        def pump() -> None:
            part = b""  # the unfinished line: written with its end, never alone (another
            try:        # replica's line would land in the middle of it)
                for block in blocks():
                    cut = block.rfind(b"\n") + 1
                    if not cut:
                        part += block
                        continue
                    self._write(dest, prefix_block(part + block[:cut], prefix, True)[0])
                    part = block[cut:]
                if part:
                    self._write(dest, prefix + part + b"\n")
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
