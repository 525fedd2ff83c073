"""Replica logs of ``lsf``: the files ``<app id>-<role>-<k>.{out,err}`` that each replica's
script writes in the job directory as the program runs, read once or followed until the
app ends. :class:`LogFiles` is the log half of :class:`tx_scheduler_lsf.scheduler.LsfScheduler`.
"""
from __future__ import annotations

import datetime as _dt
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from tx import get_logger
from tx.schedulers import DescribeAppResponse, SchedulerError, Stream, filter_regex, follow_file, split_lines
from tx.specs import AppState, is_terminal

from tx_scheduler_lsf._client import LsfError
from tx_scheduler_lsf.request import replica_file

log = get_logger(__name__)

#: seconds between bjobs calls while following a log whose app has not ended
FOLLOW_CHECK_S = 5.0


class LogFiles:
    """``log_iter`` and ``log_iter_blocks`` of the ``lsf`` scheduler, over the scheduler
    class's ``describe`` and ``_job_dir``."""

    if TYPE_CHECKING:
        def describe(self, app_id: str) -> Optional[DescribeAppResponse]: ...
        def _job_dir(self, app_id: str) -> str: ...

    def _log_path(self, app_id: str, role_name: str, k: int, streams: Optional[Any]) -> str:
        stream = Stream(streams) if streams is not None else Stream.STDOUT
        if stream == Stream.COMBINED:
            raise ValueError(
                "the lsf scheduler keeps stdout and stderr in separate files: use streams=stdout or streams=stderr")
        job_dir = self._job_dir(app_id)
        if not job_dir:
            raise SchedulerError(f"lsf: app {app_id} is not known here (no job directory recorded, bjobs knows no job)")
        ext = "out" if stream == Stream.STDOUT else "err"
        path = os.path.join(job_dir, replica_file(app_id, role_name, k, ext))
        if not os.path.exists(path):
            desc = self.describe(app_id)
            if desc is not None and not any(rs.role == role_name and any(r.id == k for r in rs.replicas)
                                            for rs in desc.roles_statuses):
                known = ", ".join(f"{rs.role}/{r.id}" for rs in desc.roles_statuses for r in rs.replicas)
                raise ValueError(f"app {app_id} has no replica {role_name}/{k}; replicas: {known}")
        return path

    def _done(self, app_id: str) -> Callable[[], bool]:
        last = {"asked": 0.0}

        def done() -> bool:
            now = time.monotonic()
            if now - last["asked"] < FOLLOW_CHECK_S and last["asked"]:
                return False
            last["asked"] = now
            try:
                desc = self.describe(app_id)
            except LsfError as e:
                log.warning(f"lsf: cannot tell whether app {app_id} ended ({e}); following its log on")
                return False
            if desc is None:
                return True
            # a failed app's other replicas are being killed: follow them to their end
            return all(is_terminal(r.state) for rs in desc.roles_statuses for r in rs.replicas) \
                or desc.state == AppState.UNKNOWN and not desc.roles_statuses

        return done

    def log_iter_blocks(self, app_id: str, role_name: str, k: int = 0, should_tail: bool = False,
                        streams: Optional[Any] = None) -> Iterable[bytes]:
        """The replica's log file as byte blocks of whole lines; with ``should_tail``,
        followed until every replica of the app ended.

        Raises:
            ValueError: ``streams`` is ``combined``, or the app has no such replica.
            SchedulerError: the app is unknown here.
        """
        path = self._log_path(app_id, role_name, k, streams)
        return follow_file(path, self._done(app_id) if should_tail else None)

    def log_iter(self, app_id: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                 since: Optional[_dt.datetime] = None, until: Optional[_dt.datetime] = None,
                 should_tail: bool = False, streams: Optional[Any] = None) -> Iterable[str]:
        """Lines (each with its ``\\n``) of ``<app id>-<role>-<k>.out`` (or ``.err``).

        Args:
            regex: keep only lines where it is found.
            since, until: ignored: the files carry no times.
            should_tail: follow the file until the app ended.
            streams: ``stdout`` (default) or ``stderr``; ``combined`` is not kept.

        Raises:
            ValueError: ``streams`` is ``combined``, or the app has no such replica.
        """
        if since or until:
            log.debug("lsf_log_times_ignored", app_id=app_id)
        blocks = self.log_iter_blocks(app_id, role_name, k, should_tail, streams)
        return filter_regex(regex, (line for block in blocks for line in split_lines(block.decode("utf-8", "replace"))))
