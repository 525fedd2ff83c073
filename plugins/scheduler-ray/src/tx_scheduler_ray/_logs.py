"""Reading files under a node's Ray log directory through the dashboard's log API.

The API (https://docs.ray.io/en/latest/ray-observability/reference/api.html, ``ray logs``;
HTTP ``GET /api/v0/logs/file`` and ``/api/v0/logs/stream`` with ``node_id``, ``filename``
relative to the log directory, ``lines``) returns a file's bytes unchanged; ``stream``
follows the file as it grows and never ends by itself.
"""
from __future__ import annotations

import queue
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

#: seconds for connecting and for each read of a one-shot request
TIMEOUT_S = 30.0
_NOT_FOUND = "not found"


class LogAPIError(RuntimeError):
    """The dashboard answered a log request with an error."""


def _params(node_id: str, filename: str, **extra: Any) -> Dict[str, Any]:
    return {"node_id": node_id, "filename": filename, "lines": -1, **extra}


def read_file(address: str, node_id: str, filename: str, session: Any = None) -> Optional[bytes]:
    """The whole file, or None where it does not exist (yet).

    Raises:
        LogAPIError: another error of the log API.
        requests.RequestException: the dashboard cannot be reached.
    """
    import requests

    get = session.get if session is not None else requests.get
    r = get(f"{address}/api/v0/logs/file", params=_params(node_id, filename), timeout=TIMEOUT_S)
    if r.status_code == 200:
        return r.content
    if _NOT_FOUND in r.text.lower():
        return None
    raise LogAPIError(f"log API {r.status_code} for {filename}: {r.text.strip()[:300]}")


def _has_bytes(address: str, node_id: str, filename: str) -> bool:
    """Whether the file exists and is not empty (its last line, through the one-shot API)."""
    import requests

    r = requests.get(f"{address}/api/v0/logs/file", params={**_params(node_id, filename), "lines": 1},
                     timeout=TIMEOUT_S)
    if r.status_code == 200:
        return bool(r.content)
    if _NOT_FOUND in r.text.lower():
        return False
    raise LogAPIError(f"log API {r.status_code} for {filename}: {r.text.strip()[:300]}")


def follow(
    address: str,
    node_id: str,
    filename: str,
    final_size: Callable[[], Optional[int]],
    check_every: float = 1.0,
    settle_s: float = 5.0,
) -> Iterator[bytes]:
    """The file's bytes from its start, as they are written, until it is complete.

    ``final_size()`` is called about every ``check_every`` seconds: None while the file may
    still grow; once it returns a size (bytes; -1: unknown) the stream ends when that many
    bytes have been read, or, where they do not come within ``settle_s`` seconds (an unknown
    size, a file written on a node that died), after one last read of the whole file.

    While the file does not exist or is empty it is asked for through the one-shot API every
    ``check_every`` seconds; the stream is opened once it has bytes (the stream API sends no
    headers for an empty file, and a thread waiting for them cannot be woken).

    Raises:
        LogAPIError, requests.RequestException: as :func:`read_file`.
    """
    import requests

    # while the file is empty, ask the one-shot API: the stream API sends no headers for an
    # empty file, and a reader blocked on them could never be woken (no socket to shut down
    # yet): a replica that never writes to a stream would leave one thread per follower
    # (tx ui's log views, tx run --log) for the life of the process
    while not _has_bytes(address, node_id, filename):
        final = final_size()
        if final is not None:  # the app ended with the file empty, or just written: one read
            data = read_file(address, node_id, filename)
            if data:
                yield data
            return
        time.sleep(check_every)

    chunks: "queue.Queue[Any]" = queue.Queue()
    held: List[Any] = []  # the response, once its headers came
    done = threading.Event()  # the follower ended: a response that comes now is closed

    def pump() -> None:
        # the request is made here, so that the loop below goes on checking whether the app
        # has ended while the headers are on their way
        try:
            resp = requests.get(
                f"{address}/api/v0/logs/stream", params=_params(node_id, filename, interval=0.2),
                stream=True, timeout=(TIMEOUT_S, None),
            )
            held.append(resp)
            if done.is_set():  # the follower ended while the headers were on their way
                resp.close()
                return
            if resp.status_code != 200:
                text = resp.text
                resp.close()
                chunks.put(LogAPIError(f"log API {resp.status_code} for {filename}: {text.strip()[:300]}"))
                return
            for chunk in resp.iter_content(chunk_size=None):
                chunks.put(chunk)
        except Exception as e:  # noqa: BLE001 - closed under us, or the dashboard went away
            chunks.put(e)
        chunks.put(None)

    threading.Thread(target=pump, name=f"tx-ray-follow-{filename}", daemon=True).start()
    delivered = 0
    next_check = time.monotonic() + check_every
    final: Optional[int] = None
    final_at = 0.0
    ended = False
    try:
        while True:
            try:
                item = chunks.get(timeout=0.2)
            except queue.Empty:
                item = b""
            if isinstance(item, LogAPIError) and not delivered:
                raise item
            if item is None or isinstance(item, Exception):
                ended = True
            elif item:
                delivered += len(item)
                yield item
            now = time.monotonic()
            if final is None and (now >= next_check or ended):
                next_check = now + check_every
                final = final_size()
                final_at = now
            if final is not None:
                if 0 <= final <= delivered:
                    return
                if ended or now - final_at >= settle_s:
                    break
            elif ended:
                # the stream broke while the file may still grow: wait for the end, then read
                while final is None:
                    time.sleep(check_every)
                    final = final_size()
                break
    finally:
        done.set()
        if held:
            _abandon(held[0])
    data = read_file(address, node_id, filename)
    if data is not None and len(data) > delivered:
        yield data[delivered:]


def _abandon(resp: Any) -> None:
    """End a streaming response whose body another thread is blocked reading: shut the
    socket down (wakes the reader), then close the response in the background (closing
    waits for the reader's lock)."""
    sock = getattr(getattr(getattr(resp, "raw", None), "connection", None), "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    threading.Thread(target=resp.close, name="tx-ray-follow-close", daemon=True).start()
