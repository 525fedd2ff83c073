"""Start ``tx ui`` for tests and benchmarks: :func:`serve` runs the real command in a
subprocess and reads the URL it prints; :class:`UIServer` reads its pages and event streams
(standard library only, so a test needs no HTTP client)."""
from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlencode

__all__ = ["UIServer", "json_lines", "read_events", "request", "serve"]


class UIServer:
    """A running ``tx ui``: ``url`` as printed (with the token), ``base`` without it."""

    def __init__(self, url: str, process: "subprocess.Popen[str]") -> None:
        self.url = url
        self.base = url.split("/?", 1)[0]
        self.token = url.rsplit("token=", 1)[1]
        self.process = process

    def link(self, path: str, token: bool = True, **query: Any) -> str:
        """``base + path`` with ``query`` (and the token unless ``token`` is False)."""
        if token:
            query["token"] = self.token
        return self.base + path + ("?" + urlencode(query) if query else "")

    def get(self, path: str, token: bool = True, headers: Optional[Mapping[str, str]] = None,
            timeout: float = 30, **query: Any) -> Tuple[int, str]:
        """``(status, body)`` of a GET."""
        return request(self.link(path, token, **query), headers=headers, timeout=timeout)

    def events(self, path: str, headers: Optional[Mapping[str, str]] = None, timeout: float = 60,
               until: Optional[str] = "end", **query: Any) -> List[Dict[str, str]]:
        """The events of an event stream, until one named ``until`` (or the stream's end)."""
        req = urllib.request.Request(self.link(path, **query), headers=dict(headers or {}))
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return read_events(resp, until)


def request(url: str, data: Optional[bytes] = None, headers: Optional[Mapping[str, str]] = None,
            timeout: float = 30) -> Tuple[int, str]:
    """``(status, body)`` of a request (redirects not followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(url, data=data, headers=dict(headers or {}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def read_events(stream: Any, until: Optional[str] = "end") -> List[Dict[str, str]]:
    """Parse server-sent events from a binary file object (the format:
    https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation);
    each event is ``{"event", "data", "id"}``; comments (pings) are skipped."""
    events: List[Dict[str, str]] = []
    event: Dict[str, Any] = {}
    data: List[str] = []
    for raw in stream:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data or event:
                event["data"] = "\n".join(data)
                event.setdefault("event", "message")
                events.append(event)
                if event["event"] == until:
                    return events
            event, data = {}, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field in ("event", "id"):
            event[field] = value
    return events


@contextlib.contextmanager
def serve(env: Mapping[str, str], *args: str, tx: Optional[str] = None, timeout: float = 60) -> Iterator[UIServer]:
    """Run ``tx ui ARGS...`` with ``env`` until the block ends (SIGINT, then SIGKILL after
    10 s); yields the :class:`UIServer` once it printed its URL.

    Raises:
        RuntimeError: it exited or printed no URL within ``timeout`` seconds (with its stderr).
    """
    exe = tx or str(Path(sys.executable).parent / "tx")
    proc = subprocess.Popen([exe, "ui", *args], env=dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = _read_url(proc, timeout)
        yield UIServer(url, proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _read_url(proc: "subprocess.Popen[str]", timeout: float) -> str:
    """The URL line of ``proc``'s output (read on a thread: a pipe's buffered reader hides
    lines from ``select``); the rest of its output is read on and dropped."""
    assert proc.stdout is not None
    lines: "queue.Queue[str]" = queue.Queue()

    def pump() -> None:
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                lines.put(line)
        except (OSError, ValueError):  # the pipe was closed when the server was stopped
            pass
        lines.put("")

    threading.Thread(target=pump, name="tx-ui stdout", daemon=True).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if line.strip().startswith("http"):
            return line.strip()
        if not line:
            break
    err = proc.stderr.read() if proc.poll() is not None and proc.stderr is not None else ""
    raise RuntimeError(f"tx ui printed no URL within {timeout} s (exit {proc.poll()}): {err.strip()}")


def json_lines(events: Sequence[Dict[str, str]]) -> List[str]:
    """Every line the ``lines`` events of a log stream carried, in order."""
    return [line for e in events if e.get("event") == "lines" for line in json.loads(e["data"])]

