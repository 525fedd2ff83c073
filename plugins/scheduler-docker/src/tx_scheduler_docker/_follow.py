"""Following a container's log until the container ends, on engines that never end the stream.

``GET /containers/{id}/logs?follow=1`` (https://docs.docker.com/reference/api/engine/version/v1.41/#tag/Container/operation/ContainerLogs)
should end when the container stops. Docker's does. podman 4.3's (Debian 12's) ends its stream
only when it reads the container's ``died`` event from its own events log, and so:

* with ``events_logger = "none"`` in containers.conf it never ends;
* with the ``file`` events logger, a container that ends within moments of the follow's start
  can have its event missed while the engine rotates its events log (``events_logfile_max_size``,
  1 MB by default: a long-lived engine rotates after several hundred containers). Measured here
  with rotation every two or three containers: 1 follow in 12 to 103 hung.

A follow that hangs keeps ``tx log -f`` and ``tx run`` (which relays the logs) waiting after the
app has ended. :func:`follow` reads the stream in a thread, and where no data comes it looks at
the container (one inspect per ``poll`` seconds of silence). Once the container has been over
for ``grace`` seconds and the stream is still open, it closes the stream and reads the rest of the
log once, without following, skipping the bytes the stream already gave: nothing is lost or
repeated (both reads return the same log file's bytes in the same order).
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Dict, Iterator

#: container states (the inspect record's ``State.Status``) in which the container will not write
#: to its log again without being started (an ``on-failure`` restart starts a new follow anyway)
_OVER = frozenset({"exited", "dead", "stopped"})

_END = object()


def _over(client: Any, cid: str) -> bool:
    """True if container ``cid`` has ended (or is gone), from one inspect."""
    import docker.errors

    try:
        state: Dict[str, Any] = client.api.inspect_container(cid).get("State") or {}
    except docker.errors.NotFound:
        return True
    return not state.get("Running") and str(state.get("Status") or "") in _OVER


def follow(client: Any, cid: str, kw: Dict[str, Any], poll: float = 1.0, grace: float = 2.0) -> Iterator[bytes]:
    """The bytes of container ``cid``'s log as the engine writes them, until the container ends.

    Args:
        client: a ``docker.DockerClient``.
        cid: the container's id.
        kw: the other arguments of ``APIClient.logs`` (``stdout``, ``stderr``, ``timestamps``,
            ``since``, ``until``), the same for the stream and for the read that completes it.
        poll: seconds without data after which the container's state is read.
        grace: seconds the container must have been over, with the stream still open, before
            the stream is closed and the rest read without following.

    Raises:
        docker.errors.APIError: the engine refused the logs request (no such container, ...).
    """
    import docker.errors

    stream = client.api.logs(cid, stream=True, follow=True, **kw)
    chunks: "queue.Queue[Any]" = queue.Queue()

    def pump() -> None:
        try:
            for chunk in stream:
                chunks.put(chunk)
        except Exception as e:  # handed to the reader, which raises it
            chunks.put(e)
        finally:
            chunks.put(_END)

    reader = threading.Thread(target=pump, name=f"tx-docker-follow-{cid[:12]}", daemon=True)
    reader.start()
    given = 0
    over_since = None
    try:
        while True:
            try:
                item = chunks.get(timeout=poll)
            except queue.Empty:
                if not _over(client, cid):
                    over_since = None
                    continue
                now = time.monotonic()
                if over_since is None:
                    over_since = now
                if now - over_since < grace:
                    continue
                break  # the container is over and the engine keeps the stream open
            if item is _END:
                return
            if isinstance(item, Exception):
                raise item
            given += len(item)
            yield item
            over_since = None
    finally:
        stream.close()
    # the stream was cut: what the reader got before the cut, then the rest from one plain read
    reader.join(timeout=10)
    while True:
        try:
            item = chunks.get_nowait()
        except queue.Empty:
            break
        if isinstance(item, bytes):
            given += len(item)
            yield item
    try:
        rest: bytes = client.api.logs(cid, stream=False, follow=False, **kw)
    except docker.errors.NotFound:  # removed meanwhile: its log went with it
        return
    if len(rest) > given:
        yield rest[given:]
