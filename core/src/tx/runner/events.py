"""Runner lifecycle events, delivered to every ``tx_on_event`` hook implementation.

An event is built only when some plugin implements ``tx_on_event``, so apps without
listeners pay nothing for it (``Runner.status`` is on hot paths).
"""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional

import attrs

__all__ = ["log_event", "TxEvent"]


@attrs.define
class TxEvent:
    """One runner API call.

    Attributes:
        session: the runner's session name.
        scheduler: the scheduler name.
        api: the Runner method (``run``, ``dryrun``, ``schedule``, ``status``, ``wait``,
            ``cancel``, ``describe``, ``log_lines``, ``list``).
        app_id: the app id, once known.
        app_image: the first role's image, when an AppDef is involved.
        runcfg: the run config as JSON-ready values.
        workspace: the workspace given to ``run``.
        source: who called: ``$TX_CONTEXT_NAME`` (the CLI sets ``cli_<command>``) or ``api``.
        start_epoch_time_usec: when the call started, microseconds since the epoch.
        wall_time_usec, cpu_time_usec: duration of the call, microseconds.
        exception_type, raw_exception: set when the call raised.
    """

    session: str
    scheduler: str
    api: str
    app_id: Optional[str] = None
    app_image: Optional[str] = None
    runcfg: Optional[Dict[str, Any]] = None
    workspace: Optional[str] = None
    source: str = "api"
    start_epoch_time_usec: int = 0
    wall_time_usec: int = 0
    cpu_time_usec: int = 0
    exception_type: Optional[str] = None
    raw_exception: Optional[str] = None

    def serialize(self) -> str:

        return json.dumps(attrs.asdict(self), default=str)


@contextmanager
def log_event(registry: Any, **fields: Any) -> Iterator[Optional[TxEvent]]:
    """Time the body and send a :class:`TxEvent` to the ``tx_on_event`` hooks.

    Yields the event (the body may set ``app_id``) or None when no plugin listens.
    """
    if registry is None or not registry.has_event_hooks:
        yield None
        return
    ev = TxEvent(source=os.environ.get("TX_CONTEXT_NAME", "api"), **fields)
    ev.start_epoch_time_usec = int(time.time() * 1e6)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield ev
    except BaseException as e:
        ev.exception_type = type(e).__name__
        ev.raw_exception = str(e)
        raise
    finally:
        ev.wall_time_usec = int((time.perf_counter() - wall) * 1e6)
        ev.cpu_time_usec = int((time.process_time() - cpu) * 1e6)
        registry.call_event(ev)
