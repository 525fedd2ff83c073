"""Fixtures of the tx-scheduler-aws-batch tests: AWS Batch and CloudWatch Logs from
``moto_server`` processes this session starts on free ports of 127.0.0.1.

* ``moto_simple``: moto's Batch in simple mode (``POST /moto-api/config
  {"batch": {"use_docker": false}}``): jobs end inside SubmitJob, without containers.
* ``moto_docker``: moto's Batch in Docker mode over a private podman service
  (``scripts/start-podman.sh`` with this session's own ``PODMAN_BASE``), so nodes run as
  real containers of ``localhost/busybox:tx`` and their output lands in CloudWatch Logs.

Each has its own IAM role, compute environment and job queue. Tests reach a server the way
users configure AWS: the ``aws_simple``/``aws_docker`` fixtures set ``AWS_ENDPOINT_URL``,
``AWS_DEFAULT_REGION`` and test credentials in the environment (so fresh processes find
the same server), with the user's AWS config and credentials files hidden.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import attrs
import pytest

from tx.testing import tx_registry  # noqa: F401 - the fixture, for the tests of this directory
from tx.testing.backends import ServiceProcess, backend_unavailable, free_port, port_open, wait_for

REPO = Path(__file__).resolve().parents[3]
REGION = "us-east-1"
IMAGE = "localhost/busybox:tx"


@attrs.define
class Moto:
    """A running moto_server with a job queue."""

    endpoint: str
    queue: str
    compute_env: str
    service: ServiceProcess
    extra_env: Dict[str, str] = attrs.field(factory=dict)

    def env(self) -> Dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }

    def client(self, service: str, **kw: Any) -> Any:
        import boto3

        args = dict(endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id="testing",
                    aws_secret_access_key="testing")
        args.update(kw)
        return boto3.client(service, **args)


def moto_server_exe() -> str:
    exe = shutil.which("moto_server", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if exe is None:
        backend_unavailable("moto", "moto_server not found: pip install 'moto[server,batch,logs]'")
    return exe


def start_moto(log: Path, env: Optional[Dict[str, str]] = None, use_docker: bool = False) -> "tuple[str, ServiceProcess]":
    """Start moto_server on a free port; returns (endpoint, service)."""
    port = free_port()
    svc = ServiceProcess.start([moto_server_exe(), "-H", "127.0.0.1", "-p", str(port)], log=log,
                               env={**os.environ, **(env or {})})
    wait_for(lambda: port_open(port), timeout=60, what="moto_server to listen", service=svc)
    endpoint = f"http://127.0.0.1:{port}"
    req = urllib.request.Request(
        f"{endpoint}/moto-api/config", data=json.dumps({"batch": {"use_docker": use_docker}}).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )
    urllib.request.urlopen(req, timeout=10).read()
    return endpoint, svc


def make_queue(endpoint: str, svc: ServiceProcess, tag: str) -> Moto:
    m = Moto(endpoint=endpoint, queue="", compute_env="", service=svc)
    iam, batch = m.client("iam"), m.client("batch")
    role = iam.create_role(RoleName=f"tx-batch-{tag}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    ce = batch.create_compute_environment(computeEnvironmentName=f"tx-ce-{tag}", type="UNMANAGED",
                                          state="ENABLED", serviceRole=role)
    q = batch.create_job_queue(jobQueueName=f"tx-q-{tag}", state="ENABLED", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": ce["computeEnvironmentArn"]}])
    m.queue, m.compute_env = q["jobQueueName"], ce["computeEnvironmentName"]
    return m


@pytest.fixture(scope="session")
def moto_simple(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """moto_server with Batch in simple mode, a compute environment and queue ``tx-q-simple``."""
    endpoint, svc = start_moto(tmp_path_factory.mktemp("moto-simple") / "moto.log")
    try:
        yield make_queue(endpoint, svc, "simple")
    finally:
        svc.stop()


def _podman_env(base: Path) -> Dict[str, str]:
    script = REPO / "scripts" / "start-podman.sh"
    if not script.is_file():
        backend_unavailable("podman", f"{script} is missing")
    if shutil.which("podman") is None and os.geteuid() != 0:
        backend_unavailable("podman", "podman is not installed and this is not root: run scripts/install-podman.sh as root")
    p = subprocess.run(["bash", str(script)], env={**os.environ, "PODMAN_BASE": str(base)},
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        backend_unavailable("podman", f"scripts/start-podman.sh failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    env = {}
    for tok in p.stdout.strip().splitlines()[-1].split()[1:]:
        k, _, v = tok.partition("=")
        env[k] = v
    return env


@pytest.fixture(scope="session")
def moto_docker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """moto_server with Batch in Docker mode over a private podman service; queue ``tx-q-docker``."""
    try:
        import docker  # noqa: F401 - moto's Docker mode needs it
    except ImportError:
        backend_unavailable("moto Docker mode", "the docker package is missing: pip install docker")
    base = Path("/tmp") / f"tx-aws-podman-{os.getpid()}"  # short: unix socket paths are limited
    podman = _podman_env(base)
    try:
        endpoint, svc = start_moto(tmp_path_factory.mktemp("moto-docker") / "moto.log", env=podman, use_docker=True)
        try:
            m = make_queue(endpoint, svc, "docker")
            m.extra_env = podman
            yield m
        finally:
            svc.stop()
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "stop-podman.sh")],
                       env={**os.environ, "PODMAN_BASE": str(base), "PURGE": "1"},
                       capture_output=True, timeout=300)


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


@pytest.fixture(scope="session")
def moto_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, str]]:
    """A moto_server that checks IAM (``INITIAL_NO_AUTH_ACTION_COUNT``): its first two
    requests create an IAM user without any policy and its access key; every later request
    is authenticated and authorized as AWS would. Yields endpoint, key id and secret."""
    endpoint, svc = start_moto(tmp_path_factory.mktemp("moto-auth") / "moto.log",
                               env={"INITIAL_NO_AUTH_ACTION_COUNT": "2"})
    try:
        import boto3

        iam = boto3.client("iam", endpoint_url=endpoint, region_name=REGION,
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        iam.create_user(UserName="tx-nobody")
        key = iam.create_access_key(UserName="tx-nobody")["AccessKey"]
        yield {"endpoint": endpoint, "key": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
    finally:
        svc.stop()
