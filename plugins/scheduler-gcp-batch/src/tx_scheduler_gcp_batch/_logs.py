"""Replica logs of ``gcp_batch``: Cloud Logging ``entries.list`` of the log
``batch_task_logs``, by job uid and task (stdout entries have severity INFO, stderr ERROR),
polled while the job runs. :class:`TaskLogs` is the log half of
:class:`tx_scheduler_gcp_batch.scheduler.GcpBatchScheduler`.
"""
from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING, Any, Iterable, Iterator, List, Optional

from tx.schedulers import Stream, env as envc, filter_regex
from tx.specs import AppState, is_terminal

from tx_scheduler_gcp_batch._states import JOB_STATES
from tx_scheduler_gcp_batch._sweep import parse_trial_id, trial_env
from tx_scheduler_gcp_batch.request import task_layout

__all__ = ["LOG_NAME", "TaskLogs"]

LOG_NAME = "batch_task_logs"
_EPOCH = "1970-01-01T00:00:00Z"
_TAIL_POLL_S = 2.0


class TaskLogs:
    """``log_iter`` of ``gcp_batch`` over what the scheduler class provides: its Cloud
    Logging client (``_logging_client``), its calls with errors translated (``_call``) and
    its jobs (``_get_job``; a sweep's job as read during the current look, ``_sweep_job``)."""

    if TYPE_CHECKING:  # the scheduler class defines them
        def _logging_client(self, project: str) -> Any: ...

        def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any: ...

        def _get_job(self, app_id: str) -> Optional[Any]: ...

        def _sweep_job(self, job_app_id: str) -> Optional[Any]: ...

    def _log_filter(
        self, job: Any, task_index: int, stream: Stream, since: Optional[str], until: Optional[str]
    ) -> str:
        project = job.name.split("/")[1]
        parts = [
            f'logName="projects/{project}/logs/{LOG_NAME}"',
            f'labels.job_uid="{job.uid}"',
            f'labels.task_id:"task/{job.uid}-group0-{task_index}/"',
            f'timestamp>="{since or _EPOCH}"',
        ]
        if until:
            parts.append(f'timestamp<="{until}"')
        if stream == Stream.STDOUT:
            parts.append("severity<ERROR")
        elif stream == Stream.STDERR:
            parts.append("severity>=ERROR")
        return " AND ".join(parts)

    def _entries(self, job: Any, filter_: str, descending: bool = False, page_size: int = 1000) -> Iterator[Any]:
        from google.cloud import logging as gcl

        project = job.name.split("/")[1]
        client = self._logging_client(project)
        order = gcl.DESCENDING if descending else gcl.ASCENDING
        it = self._call(f"read logs of {job.name}", client.list_entries,
                        resource_names=[f"projects/{project}"], filter_=filter_, order_by=order, page_size=page_size)
        while True:
            try:
                entry = self._call(f"read logs of {job.name}", next, it)
            except StopIteration:
                return
            yield entry

    def _last_lines(self, job: Any, task_index: int, n: int) -> List[str]:
        entries = self._entries(job, self._log_filter(job, task_index, Stream.STDERR, None, None), descending=True, page_size=n)
        out = []
        for e in entries:
            out.append(_payload(e))
            if len(out) >= n:
                break
        return list(reversed(out))

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[_dt.datetime] = None,
        until: Optional[_dt.datetime] = None,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name`` from Cloud Logging, each ending in ``\\n``.

        ``streams``: stdout (severity below ERROR), stderr (ERROR and above) or combined
        (default); ``since``/``until`` filter on the entries' timestamps; ``regex`` keeps
        lines where ``re.search`` finds it; ``should_tail`` polls until the job ends.

        Raises:
            ValueError: unknown app, role or replica.
            SchedulerError: Cloud Logging refused the request or cannot be reached.
        """
        stream = Stream(streams) if streams else Stream.COMBINED
        trial = parse_trial_id(app_id)
        if trial is not None:  # a sweep's trial: task `index` of the sweep's job, replica 0
            job = self._sweep_job(trial[0])
            if job is None:
                raise ValueError(f"gcp_batch: unknown app {app_id!r}")
            env = trial_env(job, trial[1])
            if (role_name, k) != (env.get(envc.ROLE_NAME), 0):
                raise ValueError(f"gcp_batch: app {app_id!r} has no replica {role_name}/{k}")
            lines = self._iter_lines(trial[0], job, trial[1], stream, _ts(since), _ts(until), should_tail)
            return filter_regex(regex, lines) if regex else lines
        job = self._get_job(app_id)
        if job is None:
            raise ValueError(f"gcp_batch: unknown app {app_id!r}")
        task = next((t for t in task_layout(job) if t.role == role_name and t.replica_id == k), None)
        if task is None:
            raise ValueError(f"gcp_batch: app {app_id!r} has no replica {role_name}/{k}")
        lines = self._iter_lines(app_id, job, task.index, stream, _ts(since), _ts(until), should_tail)
        return filter_regex(regex, lines) if regex else lines

    def _iter_lines(
        self, app_id: str, job: Any, index: int, stream: Stream, since: Optional[str], until: Optional[str], tail: bool
    ) -> Iterator[str]:
        seen: set = set()
        last_ts = since
        while True:
            ended = not tail or is_terminal(JOB_STATES.get(self._state_name(app_id), AppState.UNKNOWN))
            for entry in self._entries(job, self._log_filter(job, index, stream, last_ts, until)):
                key = entry.insert_id or (entry.timestamp, _payload(entry))
                if key in seen:
                    continue
                seen.add(key)
                if entry.timestamp is not None:
                    last_ts = _ts(entry.timestamp)
                yield _payload(entry)
            if ended:
                return
            time.sleep(_TAIL_POLL_S)

    def _state_name(self, app_id: str) -> str:
        job = self._get_job(app_id)
        return job.status.state.name if job is not None else "CANCELLED"


def _payload(entry: Any) -> str:
    payload = entry.payload
    text = payload if isinstance(payload, str) else str(payload)
    return text if text.endswith("\n") else text + "\n"


def _ts(value: Optional[_dt.datetime]) -> Optional[str]:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.astimezone()
    return value.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

