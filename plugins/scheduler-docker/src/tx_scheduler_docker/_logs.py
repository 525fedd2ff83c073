"""Replica logs of ``local_docker``: the engine's log of each container of a replica
(``docker logs``; the containers the engine lost first), followed while the container runs
(:mod:`tx_scheduler_docker._follow`). :class:`ContainerLogs` is the log half of
:class:`tx_scheduler_docker.scheduler.DockerScheduler`.
"""
from __future__ import annotations

import codecs
from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Tuple

from tx.schedulers import Stream, filter_regex

from tx_scheduler_docker._client import engine_call
from tx_scheduler_docker._follow import follow as follow_log
from tx_scheduler_docker._status import RETIRED, summary_name
from tx_scheduler_docker.request import LABEL_APP_ID, LABEL_REPLICA_ID, LABEL_ROLE_NAME

__all__ = ["ContainerLogs"]


class ContainerLogs:
    """``log_iter`` of ``local_docker`` over the scheduler class's engine client
    (``_docker``)."""

    if TYPE_CHECKING:  # the scheduler class defines it
        def _docker(self) -> Any: ...

    @engine_call
    def _container_ids(self, app_id: str, role_name: str, k: int) -> List[str]:
        """The replica's containers, oldest attempt first: those the engine lost and tx
        replaced (``infra_retries``), then its container now.

        Raises:
            ValueError: the app has no such replica.
        """
        client = self._docker()
        found = client.api.containers(all=True, filters={"label": [f"{LABEL_APP_ID}={app_id}",
                                                                   f"{LABEL_ROLE_NAME}={role_name}",
                                                                   f"{LABEL_REPLICA_ID}={k}"]})
        if not found:
            raise ValueError(f"{app_id} has no replica {role_name}/{k}")
        def order(s: Dict[str, Any]) -> Tuple[int, int]:
            m = RETIRED.search(summary_name(s))
            return (0, int(m.group(1))) if m else (1, 0)

        return [str(s["Id"]) for s in sorted(found, key=order)]

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name`` from the engine's log of its container
        (``docker logs``), each with its ``\\n`` (``\\r`` kept inside lines); where the
        engine lost a container of the replica and tx started it again (``infra_retries``),
        the lost containers' lines come first, oldest first.

        Args:
            regex: keep the lines where it is found.
            since, until: the engine's time window (``docker logs --since/--until``).
            should_tail: follow the container's output until it exits.
            streams: ``stdout``, ``stderr`` or ``combined`` (default: combined, in the order
                the engine recorded the lines).

        Raises:
            ValueError: no such replica, or an unknown stream.
            SchedulerError: no engine answers.
        """
        stream = Stream(streams) if streams is not None else Stream.COMBINED
        *earlier, cid = self._container_ids(app_id, role_name, k)

        def lines() -> Iterator[str]:
            for old in earlier:
                yield from self._lines(old, stream, since, until, False)
            yield from self._lines(cid, stream, since, until, should_tail)

        return filter_regex(regex, lines())

    def _lines(self, cid: str, stream: Stream, since: Optional[datetime], until: Optional[datetime],
               follow: bool) -> Iterator[str]:
        client = self._docker()
        kw: Dict[str, Any] = {
            "stdout": stream in (Stream.STDOUT, Stream.COMBINED),
            "stderr": stream in (Stream.STDERR, Stream.COMBINED),
            "timestamps": False,
        }
        if since is not None:
            kw["since"] = since
        if until is not None:
            kw["until"] = until
        if follow:
            chunks: Iterable[bytes] = follow_log(client, cid, kw)
        else:
            chunks = [client.api.logs(cid, stream=False, **kw)]
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        buf = ""
        for chunk in chunks:
            buf += decoder.decode(chunk)
            if "\n" not in buf:
                continue
            *whole, buf = buf.split("\n")
            for line in whole:
                yield line + "\n"
        buf += decoder.decode(b"", final=True)
        if buf:
            yield buf
