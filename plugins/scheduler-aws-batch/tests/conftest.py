"""Fixtures of the tx-scheduler-aws-batch tests, over the moto servers of
:mod:`tx_scheduler_aws_batch.testing` (``moto_simple``, ``moto_docker``, ``moto_auth``; loaded
by the repository's root ``conftest.py``).

Tests reach a server the way users configure AWS: the ``aws_simple``/``aws_docker`` fixtures
set ``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION`` and test credentials in the environment (so
fresh processes find the same server), with the user's AWS config and credentials files
hidden; ``fault_proxy`` puts an HTTP proxy that answers with AWS errors in front of the
simple-mode server.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from tx.testing import tx_registry  # noqa: F401 - the fixture, for the tests of this directory
from tx_scheduler_aws_batch.testing import Moto


def _use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, moto: Moto) -> Moto:
    for var in ("AWS_PROFILE", "AWS_REGION", "AWS_ENDPOINT_URL_BATCH", "AWS_ENDPOINT_URL_LOGS",
                "AWS_SESSION_TOKEN", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for k, v in moto.env().items():
        monkeypatch.setenv(k, v)
    return moto


@pytest.fixture
def aws_simple(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, moto_simple: Moto) -> Moto:
    """The environment points at the simple-mode server (for this test)."""
    return _use(monkeypatch, tmp_path, moto_simple)


@pytest.fixture
def aws_docker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, moto_docker: Moto) -> Moto:
    """The environment points at the Docker-mode server (for this test)."""
    return _use(monkeypatch, tmp_path, moto_docker)


class FaultProxy:
    """An HTTP proxy in front of a moto server that answers some requests itself with an
    AWS error (as AWS would when throttling or when credentials expired) and forwards the
    others, so that boto3's real retry and error handling run end to end.

    ``fail(code, status, times)``: the next ``times`` requests (-1: all) get ``code``.
    """

    def __init__(self, target: str) -> None:
        import http.client
        import http.server
        import threading
        from urllib.parse import urlparse

        self.target = urlparse(target)
        self.code, self.status, self.times = "", 400, 0
        self.injected = 0
        self.forwarded = 0
        self.bodies: List[bytes] = []  # every request body, in order
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                self._handle()

            def do_GET(self) -> None:
                self._handle()

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.bodies.append(body)
                if proxy.times != 0:
                    proxy.times -= 1 if proxy.times > 0 else 0
                    proxy.injected += 1
                    data = json.dumps({"__type": proxy.code, "message": f"injected {proxy.code}"}).encode()
                    self.send_response(proxy.status)
                    self.send_header("Content-Type", "application/x-amz-json-1.1")
                    self.send_header("x-amzn-ErrorType", proxy.code)
                    self.send_header("x-amzn-RequestId", "tx-test")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                proxy.forwarded += 1
                conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def fail(self, code: str, status: int = 400, times: int = -1) -> None:
        self.code, self.status, self.times = code, status, times

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fault_proxy(aws_simple: Moto, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A :class:`FaultProxy` in front of the simple-mode server; AWS_ENDPOINT_URL points at it."""
    proxy = FaultProxy(aws_simple.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    try:
        yield proxy
    finally:
        proxy.close()
