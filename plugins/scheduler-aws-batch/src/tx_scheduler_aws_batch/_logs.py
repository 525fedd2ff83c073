"""Replica logs of ``aws_batch``: CloudWatch Logs, the log streams of node ``role start + k``
(every attempt's, oldest first), polled while the job runs. :class:`CloudWatchLogs` is the
log half of :class:`tx_scheduler_aws_batch.scheduler.AwsBatchScheduler`.
"""
from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING, Any, Dict, Generator, Iterable, Iterator, List, Optional

from tx.schedulers import Stream, filter_regex
from tx.specs import is_terminal

from tx_scheduler_aws_batch._client import AwsClients, call, error_code, explain
from tx_scheduler_aws_batch._states import appstate_from_batch
from tx_scheduler_aws_batch._status import CAUSE_TAIL_LINES, role_ranges
from tx_scheduler_aws_batch.request import DEFAULT_LOG_GROUP

__all__ = ["CloudWatchLogs"]


def _ms(t: Optional[_dt.datetime]) -> Optional[int]:
    """Milliseconds since the epoch (CloudWatch's unit); naive datetimes are local time."""
    if t is None:
        return None
    return int(t.timestamp() * 1000)


class CloudWatchLogs:
    """``log_iter`` of ``aws_batch`` and the log reads ``describe`` quotes, over what the
    scheduler class provides: its clients (``_aws``), its jobs (``_find_job``) and
    ``poll_interval``."""

    _aws: AwsClients
    poll_interval: float

    if TYPE_CHECKING:  # the scheduler class defines it
        def _find_job(self, app_id: str) -> Optional[Dict[str, Any]]: ...

    def _cause_lines(self, job: Dict[str, Any], node: Optional[int]) -> List[str]:
        """The last :data:`CAUSE_TAIL_LINES` lines of node ``node``'s log (None: the job's)."""
        stream = self._node_stream_quiet(job, node) if node is not None else self._stream_of(job)
        return self._last_lines(job, stream, CAUSE_TAIL_LINES)

    def _node_stream_quiet(self, job: Dict[str, Any], index: int) -> str:
        try:
            return self._node_stream(job, index)
        except Exception:  # noqa: BLE001 - a hint only: the job's stream instead
            return self._stream_of(job)

    def _last_lines(self, job: Dict[str, Any], stream: str, n: int) -> List[str]:
        """The last ``n`` (at most 10000) log events of ``stream``, oldest first; [] when it
        cannot be read (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_GetLogEvents.html)."""
        if not stream:
            return []
        try:
            ev = self._aws.logs.get_log_events(
                logGroupName=self._log_group(job), logStreamName=stream, startFromHead=False, limit=n
            )["events"]
        except Exception:  # noqa: BLE001 - a hint only
            return []
        return [str(e.get("message", "")).rstrip("\n") for e in ev[-n:]]


    @staticmethod
    def _log_group(job: Dict[str, Any]) -> str:
        opts = ((job.get("container") or {}).get("logConfiguration") or {}).get("options") or {}
        if not job.get("nodeProperties") and opts.get("awslogs-group"):
            return str(opts["awslogs-group"])
        for rng in job.get("nodeProperties", {}).get("nodeRangeProperties", []):
            opts = (rng.get("container", {}).get("logConfiguration") or {}).get("options") or {}
            if opts.get("awslogs-group"):
                return str(opts["awslogs-group"])
        return DEFAULT_LOG_GROUP

    @staticmethod
    def _stream_of(job: Dict[str, Any]) -> str:
        name = (job.get("container") or {}).get("logStreamName")
        if not name:
            for attempt in reversed(job.get("attempts") or []):
                name = (attempt.get("container") or {}).get("logStreamName")
                if name:
                    break
        return str(name or "")

    @staticmethod
    def _streams_of(job: Dict[str, Any]) -> List[str]:
        """The log streams of every attempt of a job, oldest first: each ended attempt's
        (``attempts[].container.logStreamName``, AttemptDetail:
        https://docs.aws.amazon.com/batch/latest/APIReference/API_AttemptDetail.html), then
        the current one's (``container.logStreamName``); CloudWatch keeps every one."""
        names = [(a.get("container") or {}).get("logStreamName") for a in job.get("attempts") or []]
        names.append((job.get("container") or {}).get("logStreamName"))
        return [str(n) for i, n in enumerate(names) if n and n not in names[:i]]

    def _node_streams(self, job: Dict[str, Any], index: int) -> List[str]:
        """:meth:`_streams_of` of node ``index`` (see :meth:`_node_stream`)."""
        if not job.get("nodeProperties"):
            return self._streams_of(job)
        recs = call("describing job node", self._aws.batch.describe_jobs, jobs=[f"{job['jobId']}#{index}"])["jobs"]
        return self._streams_of(recs[0] if recs else job)

    def _node_stream(self, job: Dict[str, Any], index: int) -> str:
        """The log stream of node ``index``: its node job's (AWS), else the job's own
        (backends without node jobs, such as moto, keep one stream per job; an array child
        has one stream)."""
        if not job.get("nodeProperties"):
            return self._stream_of(job)
        recs = call("describing job node", self._aws.batch.describe_jobs, jobs=[f"{job['jobId']}#{index}"])["jobs"]
        if recs:
            return self._stream_of(recs[0])
        return self._stream_of(job)

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
        """Lines (each ending in ``\\n``) that replica ``k`` of ``role_name`` wrote, from
        CloudWatch Logs (the ``awslogs-group`` of the job definition, default
        ``/aws/batch/job``), node index = the role's first node + ``k``.

        Args:
            since, until: only events in that window (CloudWatch times, milliseconds).
            should_tail: keep polling until the job is terminal.
            streams: None or ``combined`` (CloudWatch keeps stdout and stderr together).

        Raises:
            ValueError: another stream asked for, an unknown role, ``k`` out of range, an
                unknown app.
            SchedulerError: an AWS call failed.
        """
        if streams not in (None, Stream.COMBINED, "combined"):
            raise ValueError(f"aws_batch keeps one combined log per replica (CloudWatch); got streams={streams!r}")
        job = self._find_job(app_id)
        if job is None:
            raise ValueError(f"unknown app {app_id!r}")
        ranges = role_ranges(job)
        match = [(s, e) for n, s, e, _ in ranges if n == role_name]
        if not match:
            raise ValueError(f"app {app_id} has no role {role_name!r}; roles: {', '.join(r[0] for r in ranges)}")
        start, end = match[0]
        if not 0 <= k <= end - start:
            raise ValueError(f"role {role_name!r} of {app_id} has replicas 0..{end - start}, not {k}")
        lines = self._events(job, start + k, _ms(since), _ms(until), should_tail)
        return filter_regex(regex, lines)

    def _events(self, job: Dict[str, Any], index: int, start_ms: Optional[int], end_ms: Optional[int],
                tail: bool) -> Iterator[str]:
        """The node's log lines, every attempt's stream in turn, oldest first (a retry writes
        a new stream: the ones before it are read to their end, a followed one included)."""
        group = self._log_group(job)
        tokens: Dict[str, Optional[str]] = {}  # where reading each stream got to
        ended: List[str] = []  # streams of attempts that ended, read to their end
        while True:
            streams = self._node_streams(job, index)
            finished = is_terminal(appstate_from_batch(str(job.get("status")), str(job.get("statusReason", ""))))
            for i, stream in enumerate(streams):
                if stream in ended:
                    continue
                tokens[stream] = yield from self._stream_events(group, stream, tokens.get(stream), start_ms, end_ms)
                if i < len(streams) - 1:
                    ended.append(stream)
            if not tail or finished:
                return
            time.sleep(self.poll_interval)
            fresh = call("describing job", self._aws.batch.describe_jobs, jobs=[job["jobId"]])["jobs"]
            if not fresh:
                return
            job = fresh[0]

    def _stream_events(self, group: str, stream: str, token: Optional[str], start_ms: Optional[int],
                       end_ms: Optional[int]) -> Generator[str, None, Optional[str]]:
        """Lines of one log stream from ``token`` on (GetLogEvents:
        https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_GetLogEvents.html);
        returns the token to go on from (None: the stream does not exist yet).

        Raises:
            SchedulerError: the call failed.
        """
        from botocore.exceptions import BotoCoreError, ClientError  # botocore with the clients

        # the window goes with every page: a token continues the same query
        kwargs: Dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
        if token:
            kwargs["nextToken"] = token
        if start_ms is not None:
            kwargs["startTime"] = start_ms
        if end_ms is not None:
            kwargs["endTime"] = end_ms
        while True:
            try:
                resp = self._aws.logs.get_log_events(**kwargs)
            except (ClientError, BotoCoreError) as e:
                if error_code(e) == "ResourceNotFoundException":
                    return token  # the stream is not created yet (or there is none)
                raise explain(e, f"reading log stream {stream}") from None
            for ev in resp.get("events", []):
                yield ev["message"] if ev["message"].endswith("\n") else ev["message"] + "\n"
            nxt = resp.get("nextForwardToken")
            if not nxt or nxt == kwargs.get("nextToken"):
                return kwargs.get("nextToken")
            kwargs["nextToken"] = nxt
