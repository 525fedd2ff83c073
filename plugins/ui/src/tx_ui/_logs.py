"""A replica's log as server-sent events: every line, in order, as ``tx log`` reads it.

A thread reads :meth:`tx.runner.Runner.log_blocks` (blocks of whole lines) and hands batches
of lines to the event stream through a bounded queue (a slow browser slows the reader;
nothing is dropped). Each ``lines`` event carries a JSON list of lines (``\\r``, control
characters and all) and, as its id, the number of lines sent so far: a browser that
reconnects sends it back as ``Last-Event-ID`` and the stream goes on after that line. The
stream ends with an ``end`` event (the number of lines), or a ``problem`` event (one line).
"""
from __future__ import annotations

import asyncio
import json
import queue
import threading
from typing import Any, AsyncIterator, Dict, List, Optional

from tx.runner import Runner

__all__ = ["BATCH_LINES", "log_events"]

#: at most this many lines in one event
BATCH_LINES = 2000
#: batches the reader may be ahead of the browser
_QUEUE_BATCHES = 64
_END = object()


class _Problem:
    def __init__(self, text: str) -> None:
        self.text = text


def _read(runner_factory: Any, handle: str, role: str, replica: int, follow: bool, streams: Optional[str],
          out: "queue.Queue[Any]", stop: threading.Event) -> None:
    """The reader thread: puts lists of lines (str, each with its ``\\n`` where it had one),
    then ``_END`` or a :class:`_Problem`."""

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    try:
        with runner_factory() as runner:
            status = runner.status(handle)
            if status is None:
                put(_Problem(f"no app {handle}"))
                return
            # only the app's own replicas: a role or index from the request never names a path
            roles = {rs.role: len(rs.replicas) for rs in status.roles}
            if role not in roles:
                app = runner.describe(handle)
                roles.update({r.name: r.num_replicas for r in (app.roles if app is not None else [])})
            if role not in roles or not 0 <= replica < max(roles[role], 1):
                put(_Problem(f"app {handle} has no replica {role}/{replica} (replicas: "
                             f"{', '.join(f'{r}/0-{n - 1}' for r, n in roles.items()) or 'none'})"))
                return
            carry = b""
            for block in runner.log_blocks(handle, role, replica, should_tail=follow, streams=streams):
                if stop.is_set():
                    return
                data = carry + block
                cut = data.rfind(b"\n") + 1
                carry = data[cut:]
                if cut and not put(_lines(data[:cut])):
                    return
            if carry:
                put([carry.decode("utf-8", "replace")])
    except Exception as e:  # noqa: BLE001 - the page shows why the log cannot be read, one line
        put(_Problem(f"cannot read the log of {role}/{replica}: {' '.join(str(e).split()) or type(e).__name__}"))
        return
    put(_END)


async def log_events(handle: str, role: str, replica: int, *, follow: bool, streams: Optional[str],
                     skip: int = 0, runner_factory: Any = Runner) -> AsyncIterator[Dict[str, Any]]:
    """Server-sent events (dicts for ``sse_starlette``) of replica ``replica`` of ``role``.

    Args:
        follow: go on until the app ends (``tx log -f``), else stop at the end of the log.
        streams: ``stdout``, ``stderr``, ``combined`` or None (the scheduler's default).
        skip: lines the browser already has (its ``Last-Event-ID``).
        runner_factory: makes the reader thread's runner (a context manager).
    """
    out: "queue.Queue[Any]" = queue.Queue(maxsize=_QUEUE_BATCHES)
    stop = threading.Event()
    reader = threading.Thread(target=_read, name=f"tx-ui-log {handle} {role}/{replica}", daemon=True,
                              args=(runner_factory, handle, role, replica, follow, streams, out, stop))
    reader.start()
    sent = 0
    try:
        while True:
            item = await asyncio.to_thread(_get, out)
            if item is None:
                continue
            batch: List[str] = []
            while isinstance(item, list):
                batch.extend(item)
                if len(batch) >= BATCH_LINES:
                    break
                try:
                    item = out.get_nowait()
                except queue.Empty:
                    item = None
            # what the browser has already: the first ``skip`` lines
            if sent < skip:
                drop = min(skip - sent, len(batch))
                sent += drop
                batch = batch[drop:]
            while batch:
                chunk, batch = batch[:BATCH_LINES], batch[BATCH_LINES:]
                sent += len(chunk)
                yield {"event": "lines", "id": str(sent), "data": json.dumps(chunk)}
            if item is _END:
                yield {"event": "end", "data": json.dumps({"lines": sent})}
                return
            if isinstance(item, _Problem):
                yield {"event": "problem", "data": item.text}
                return
    finally:
        stop.set()


def _lines(data: bytes) -> List[str]:
    """``data`` (whole lines, each ending in ``\n``) as lines; split at ``\n`` only (a
    ``\r`` or a form feed stays inside its line, as ``tx log`` writes it)."""
    parts = data.decode("utf-8", "replace").split("\n")
    return [p + "\n" for p in parts[:-1]]


def _get(out: "queue.Queue[Any]") -> Any:
    """The next item, or None after a second without one (so a closed stream is noticed)."""
    try:
        return out.get(timeout=1.0)
    except queue.Empty:
        return None
