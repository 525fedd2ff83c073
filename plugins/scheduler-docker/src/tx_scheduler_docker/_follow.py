"""Following a container's log to its end, every byte once, on Docker and on podman.

Docker's ``GET /containers/{id}/logs?follow=1``
(https://docs.docker.com/reference/api/engine/version/v1.41/#tag/Container/operation/ContainerLogs)
streams the whole log and ends when the container stops: tx reads that stream.

podman 4.3's (Debian 12's) follow can do neither, measured here on the private engine:

* **it drops lines.** A container writing 200,000 lines (10,288,890 bytes) in a few seconds:
  the stream gave 3.7 to 8.5 MB, with lines missing from the middle (3 runs of 3; a raw
  ``curl`` of the endpoint too, so it is the engine, not the client); 50,000 lines: 1.46 to
  1.57 of 2.54 MB. A read without ``follow`` gives every byte, every time.
* **it may never end.** It ends only when podman reads the container's ``died`` event from its
  events log: with ``events_logger = "none"`` never, and with the ``file`` logger a container
  that ends just as the follow starts can have its event missed while the engine rotates the
  log (``events_logfile_max_size``, 1 MB by default): 1 follow in 12 to 103 hung with rotation
  every few containers.

So on podman, :func:`follow` does not use the engine's follow at all: it reads the log without
following, again and again, and gives what is new each time. Each read asks for the entries
since the second of the last entry given (``since``; podman's log times are whole seconds,
and ``since`` includes that second), with their times (``timestamps``, stripped before they are
given): the entries of that second that were given already are skipped, by count (an entry,
once written, never changes; a line still being written is an entry of its own, and its end
another). So a read costs the last second's entries, not the whole log. The container's state
is read *before* each read, and the first read that starts after the container has ended is the
last. Between two reads: 0.1 s for the first 20 (so that the follow of a quick app ends soon
after it), then ``interval``; or twice the last read where that is longer (the read's time
includes the time its reader took over what it was given).
"""
from __future__ import annotations

import time
import weakref
from datetime import datetime
from typing import Any, Dict, Iterator, Optional

from tx.specs import is_terminal
from tx_scheduler_docker._states import container_state, engine_time_ns

#: the pause after each of the first reads of a follow on podman (seconds), and how many
#: reads get it: the follow of an app that ends within about 2 s ends about 0.1 s after it
_FIRST_PAUSE, _FIRST_READS = 0.1, 20

_PODMAN: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def is_podman(client: Any) -> bool:
    """True if ``client`` (a ``docker.DockerClient``) talks to podman's Docker API: its answer
    to ``HEAD /_ping`` has podman's ``Libpod-Api-Version`` header (2 ms, where ``GET /version``
    takes 0.4-0.5 s on podman 4.3); asked once per client."""
    if client not in _PODMAN:
        api = client.api  # a requests.Session on the engine's socket
        answer = api.head(f"{api.base_url}/_ping", timeout=api.timeout)
        _PODMAN[client] = "Libpod-Api-Version" in answer.headers
    return _PODMAN[client]


def _over(client: Any, cid: str) -> bool:
    """True if container ``cid`` has ended (a terminal state of :mod:`tx_scheduler_docker._states`:
    it will not write to its log again unless started again) or is gone, from one inspect."""
    import docker.errors

    try:
        state: Dict[str, Any] = client.api.inspect_container(cid).get("State") or {}
    except docker.errors.NotFound:
        return True
    return not state.get("Running") and is_terminal(container_state(state.get("Status"), state.get("ExitCode")))


def follow(client: Any, cid: str, kw: Dict[str, Any], interval: float = 1.0) -> Iterator[bytes]:
    """The bytes of container ``cid``'s log as they are written, until the container ends.

    Args:
        client: a ``docker.DockerClient``.
        cid: the container's id.
        kw: the other arguments of ``APIClient.logs`` (``stdout``, ``stderr``, ``timestamps``,
            ``since``, ``until``), the same for every read.
        interval: the pause between two reads on podman once the first few are done, in
            seconds (at least; longer where reads take long).

    Raises:
        docker.errors.APIError: the engine refused the logs request (no such container, ...);
            on podman, a container removed while it is followed ends the follow instead.
        ValueError: on podman, a log entry without its time (the engine wrote something else).
    """
    if not is_podman(client):
        yield from client.api.logs(cid, stream=True, follow=True, **kw)
        return
    import docker.errors

    args = {**kw, "timestamps": True}
    mark: Optional[int] = None  # the time of the last entry given (ns since the epoch)
    at_mark = 0  # how many entries with that time were given
    reads = 0
    while True:
        last = _over(client, cid)  # before the read: a read that starts after the end has it all
        started = time.monotonic()
        if mark is not None:
            since = mark // 1_000_000_000
            args["since"] = since if kw.get("since") is None else max(since, _epoch(kw["since"]))
        skip = at_mark
        try:
            for entry in client.api.logs(cid, stream=True, follow=False, **args):
                stamp, _, data = entry.partition(b" ")
                when = engine_time_ns(stamp.decode("ascii", "replace"))
                if when is None:
                    raise ValueError(f"a log entry of {cid} without an RFC 3339 time: {entry[:80]!r}")
                if mark is not None and when < mark:  # given by an earlier read
                    continue
                if when == mark and skip > 0:  # of the mark's second, given by an earlier read
                    skip -= 1
                    continue
                if when == mark:
                    at_mark += 1
                else:
                    mark, at_mark = when, 1
                yield entry if kw.get("timestamps") else data
        except docker.errors.NotFound:  # removed meanwhile: its log went with it
            return
        if last:
            return
        reads += 1
        # short pauses first (a quick app's follow ends soon after it), then ``interval``
        time.sleep(max(_FIRST_PAUSE if reads <= _FIRST_READS else interval, 2 * (time.monotonic() - started)))


def _epoch(value: Any) -> int:
    """A ``since`` argument of ``APIClient.logs`` (a datetime or Unix seconds) as whole seconds."""
    if isinstance(value, datetime):
        return int(value.timestamp())
    return int(value)
