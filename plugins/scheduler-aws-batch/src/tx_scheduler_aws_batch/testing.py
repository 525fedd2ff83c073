"""pytest fixtures of AWS Batch and CloudWatch Logs from ``moto_server`` processes the test
session starts on free ports of 127.0.0.1, for this plugin's tests and the repository's
end-to-end tests. Loaded as a pytest plugin by the repository's root ``conftest.py``
(``pytest_plugins``); each server starts at most once per session.

* ``moto_simple``: moto's Batch in simple mode (``POST /moto-api/config
  {"batch": {"use_docker": false}}``): jobs end inside SubmitJob, without containers.
* ``moto_docker``: moto's Batch in Docker mode whose Docker client is the session's private
  podman engine (the ``podman_engine`` fixture of :mod:`tx_scheduler_docker.testing`), so
  nodes run as real containers of ``localhost/busybox:tx`` and their output lands in
  CloudWatch Logs. It is the test server made to set what AWS documents
  (:mod:`tx_scheduler_aws_batch._moto_nodes`): each node of a multi-node job gets
  ``AWS_BATCH_JOB_NODE_INDEX``, ``AWS_BATCH_JOB_NUM_NODES`` and
  ``AWS_BATCH_JOB_MAIN_NODE_INDEX`` (moto sets none), its own log stream, and a node job
  ``<jobId>#<i>`` that ``DescribeJobs`` answers (moto has none).
* ``moto_auth``: a server that checks IAM, with a user that has no policy.

Each of the first two has its own IAM role, compute environment and job queue
(:class:`Moto`). Where moto (or, for Docker mode, podman) cannot run here, the fixtures skip
with the fix (:func:`tx.testing.backends.backend_unavailable`; a failure with
``TX_TEST_REQUIRE_BACKENDS=1``).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import attrs
import pytest

from tx.testing import ServiceProcess, backend_unavailable

__all__ = ["REGION", "Moto", "batch_calls", "make_queue", "moto_api", "moto_auth", "moto_docker", "moto_nodes_cmd", "moto_server_exe",
           "moto_simple", "start_moto"]

#: the region every server and client of the tests uses
REGION = "us-east-1"


@attrs.define
class Moto:
    """A running moto_server with a job queue: ``endpoint`` (``http://127.0.0.1:PORT``),
    ``queue`` and ``compute_env`` (names), ``service`` (the process), ``extra_env`` (for
    Docker mode: the engine's ``DOCKER_HOST`` ...)."""

    endpoint: str
    queue: str
    compute_env: str
    service: ServiceProcess
    extra_env: Dict[str, str] = attrs.field(factory=dict)

    def env(self) -> Dict[str, str]:
        """The variables that point boto3 (and tx's aws_batch) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }

    def client(self, service: str, **kw: Any) -> Any:
        """A boto3 client of ``service`` on this server (``kw`` override its arguments)."""
        import boto3

        args = dict(endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id="testing",
                    aws_secret_access_key="testing")
        args.update(kw)
        return boto3.client(service, **args)


def moto_server_exe() -> str:
    """The ``moto_server`` of this interpreter's environment, else of PATH; skips
    (:func:`backend_unavailable`) where there is none."""
    exe = shutil.which("moto_server", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                            os.environ.get("PATH", "")]))
    if exe is None:
        backend_unavailable("moto", "moto_server not found: pip install 'moto[server,batch,logs]'")
    return exe


def moto_nodes_cmd() -> List[str]:
    """The command of the test server made to set what AWS documents for multi-node jobs
    (:mod:`tx_scheduler_aws_batch._moto_nodes`: moto_server with the node variables, node
    log streams and node jobs), run by this interpreter; skips (:func:`backend_unavailable`)
    where this interpreter has no moto server."""
    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("moto.server") is None:
        backend_unavailable("moto", "moto's server is not installed here: pip install 'moto[server,batch,logs]'")
    return [sys.executable, "-m", "tx_scheduler_aws_batch._moto_nodes"]


def start_moto(log: Path, env: Optional[Dict[str, str]] = None, use_docker: bool = False,
               nodes: bool = False) -> Tuple[str, ServiceProcess]:
    """Start moto_server on a free port of 127.0.0.1 with its output in ``log`` (``env``:
    more variables) and set its Batch mode; returns (endpoint, service). ``nodes``: start
    it through :func:`moto_nodes_cmd` (multi-node jobs as AWS runs them).

    Raises:
        RuntimeError: it did not listen within 60 s (with its log's last lines);
            :meth:`~tx.testing.ServiceProcess.start_listening` says why a port is not
            trusted before its server owns it.
    """
    exe = moto_nodes_cmd() if nodes else [moto_server_exe()]
    port, svc = ServiceProcess.start_listening(lambda port: [*exe, "-H", "127.0.0.1", "-p", str(port)], log=log,
                                               what="moto_server", env={**os.environ, **(env or {})})
    try:
        endpoint = f"http://127.0.0.1:{port}"
        req = urllib.request.Request(
            f"{endpoint}/moto-api/config", data=json.dumps({"batch": {"use_docker": use_docker}}).encode(),
            headers={"Content-Type": "application/json"}, method="POST",
        )
        urllib.request.urlopen(req, timeout=10).read()
    except BaseException:
        svc.stop()
        raise
    return endpoint, svc


def make_queue(endpoint: str, svc: ServiceProcess, tag: str) -> Moto:
    """Create an IAM role, an unmanaged compute environment ``tx-ce-<tag>`` and a job queue
    ``tx-q-<tag>`` on the server at ``endpoint``."""
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


@pytest.fixture(scope="session")
def moto_docker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """moto_server with Batch in Docker mode over the session's private podman engine
    (``extra_env``: its ``DOCKER_HOST`` ...); queue ``tx-q-docker``."""
    try:
        import docker  # noqa: F401 - moto's Docker mode needs it
    except ImportError:
        backend_unavailable("moto Docker mode", "the docker package is missing: pip install docker")
    try:
        engine: Dict[str, str] = request.getfixturevalue("podman_engine")
    except pytest.FixtureLookupError:
        backend_unavailable("moto Docker mode", "no podman_engine fixture: install tx-scheduler-docker, whose "
                            "testing module starts the engine")
    endpoint, svc = start_moto(tmp_path_factory.mktemp("moto-docker") / "moto.log", env=engine, use_docker=True,
                               nodes=True)
    try:
        m = make_queue(endpoint, svc, "docker")
        m.extra_env = dict(engine)
        yield m
    finally:
        svc.stop()


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


def moto_api(m: Moto, path: str, body: Any = None) -> bytes:
    """POST ``body`` (JSON; none: an empty POST) to moto's own API at ``/moto-api/<path>``
    (``recorder/start-recording``, ``state-manager/set-transition``...), or GET
    ``recorder/download-recording``; returns the answer's bytes. See
    https://docs.getmoto.org/en/latest/docs/configuration/recorder/index.html."""
    data = json.dumps(body).encode() if body is not None else (b"" if path != "recorder/download-recording" else None)
    req = urllib.request.Request(f"{m.endpoint}/moto-api/{path}", data=data, headers={"Content-Type": "application/json"},
                                 method="GET" if data is None else "POST")
    return urllib.request.urlopen(req, timeout=30).read()


def batch_calls(m: Moto) -> Dict[str, int]:
    """The Batch API calls moto's recorder holds since its last reset, by operation
    (``listjobs``: the path after ``/v1/``): the calls counted at the backend."""
    counts: Dict[str, int] = {}
    for line in moto_api(m, "recorder/download-recording").decode().splitlines():
        if line.strip():
            url = json.loads(line)["url"]
            if "/v1/" in url:
                op = url.split("/v1/", 1)[1].split("?")[0]
                counts[op] = counts.get(op, 0) + 1
    return counts
