"""``torchx.runner.events``: TorchX 0.7.0's event API over :mod:`tx.runner.events`.

``TorchxEvent`` is tx's :class:`~tx.runner.events.TxEvent`. ``log_event`` is TorchX's
context manager (``log_event(api, scheduler=None, app_id=None, app_image=None,
runcfg=None, workspace=None)``, the event as ``ctx._torchx_event``), used by code that
subclasses TorchX's ``Runner`` (NeMo-Run's runner times its ``dryrun``/``run``/``schedule``
with it); the event goes to tx's ``tx_on_event`` hooks, as the events of tx's own Runner
do. ``record(event)`` sends one event there.
"""
import os
import time
import traceback
from types import TracebackType
from typing import Any, Optional, Type

from tx.runner.events import TxEvent as TorchxEvent

__all__ = ["SourceType", "TorchxEvent", "log_event", "record"]


class SourceType:
    """TorchX's event sources (``TorchxEvent.source``): tx records the caller's
    ``$TX_CONTEXT_NAME`` (``cli_<command>``) or ``api``."""

    UNKNOWN = "unknown"
    EXTERNAL = "external"


def record(event: TorchxEvent, destination: str = "null") -> None:
    """Send ``event`` to the ``tx_on_event`` hooks of the installed plugins (TorchX's
    ``destination`` names a logging handler; tx has none, so it is ignored)."""
    from tx.plugins import get_registry  # deferred: the registry only when an event is recorded

    registry = get_registry()
    if registry.has_event_hooks:
        registry.call_event(event)


class log_event:
    """Time the ``with`` body as one event and :func:`record` it at the end, with the
    exception when the body raised. The body may fill ``ctx._torchx_event`` (its
    ``app_id``, ``scheduler``, ``app_image``)."""

    def __init__(
        self,
        api: str,
        scheduler: Optional[str] = None,
        app_id: Optional[str] = None,
        app_image: Optional[str] = None,
        runcfg: Optional[Any] = None,
        workspace: Optional[str] = None,
    ) -> None:
        self._torchx_event: TorchxEvent = TorchxEvent(
            session=app_id or "", scheduler=scheduler or "", api=api, app_id=app_id, app_image=app_image,
            runcfg=runcfg, workspace=workspace, source=os.environ.get("TX_CONTEXT_NAME", "api"),
        )
        self._wall = self._cpu = 0.0

    def __enter__(self) -> "log_event":
        self._torchx_event.start_epoch_time_usec = int(time.time() * 1e6)
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        ev = self._torchx_event
        ev.wall_time_usec = int((time.perf_counter() - self._wall) * 1e6)
        ev.cpu_time_usec = int((time.process_time() - self._cpu) * 1e6)
        if exc_type is not None:
            ev.exception_type = exc_type.__name__
            ev.raw_exception = "".join(traceback.format_exception(exc_type, exc, tb))
        record(ev)
