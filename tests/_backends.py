"""Session fixtures for the cross-plugin workspace-image tests (tests/test_workspace_images.py):
a private podman engine, a private image registry the engine trusts, and moto's AWS Batch in
Docker mode over that same engine.

The minimum of what plugins/scheduler-docker/tests/conftest.py and
plugins/scheduler-aws-batch/tests/conftest.py do, copied (the repo-level tests import no
plugin's tests):

* ``podman_engine``: ``scripts/start-podman.sh`` with its own ``PODMAN_BASE`` (a short path
  under /tmp: unix socket paths are limited) and ``PODMAN_INSECURE_REGISTRIES`` naming the
  registry's address; ``DOCKER_HOST`` and podman's ``CONTAINERS_*`` point at it for the
  session; ``scripts/stop-podman.sh`` with ``PURGE=1`` at the end.
* ``registry``: Distribution's ``docker-registry`` on a free port of 127.0.0.1, plain HTTP,
  storage under pytest's temporary directory.
* ``moto_docker``: ``moto_server`` on a free port with Batch in Docker mode (``POST
  /moto-api/config``), its Docker client on the session's engine, with an IAM role, an
  unmanaged compute environment and a job queue.

Where the machine cannot run one (no podman, not root, no docker-registry, no moto), the
fixture skips with the fix (``tx.testing.backends.backend_unavailable``; a failure with
``TX_TEST_REQUIRE_BACKENDS=1``).

Test modules use them with ``from _backends import ...`` after putting this directory on
``sys.path`` (pytest runs with ``--import-mode=importlib``).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import urllib.request
from pathlib import Path
from typing import Dict, Iterator

import attrs
import pytest

from tx.testing.backends import (
    ServiceProcess, backend_unavailable, environ, free_port, port_open, script_backend, wait_for,
)

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"
#: the 2 MB busybox image scripts/start-podman.sh imports into each engine (no registry needed)
BASE_IMAGE = "localhost/busybox:tx"
REGION = "us-east-1"
_ENV_KEYS = ("DOCKER_HOST", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF",
             "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION")


@pytest.fixture(scope="session")
def podman_engine() -> Iterator[Dict[str, str]]:
    """A private podman Docker API service for the session; yields its environment
    (``DOCKER_HOST`` ... and ``TX_TEST_REGISTRY``, the address the ``registry`` fixture
    serves on, which the engine reaches over plain HTTP). The environment is also set in
    ``os.environ`` while the session runs."""
    if shutil.which("podman") is None or shutil.which("runc") is None or not os.path.exists("/bin/busybox"):
        backend_unavailable("podman", "podman, runc or busybox-static missing: run scripts/install-podman.sh (root)")
    if os.geteuid() != 0:
        backend_unavailable("podman", "the tests run podman as root (private storage, runc, bridge networks)")
    base = Path("/tmp") / f"tx-wsimg-podman-{os.getpid()}"
    registry = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "PODMAN_BASE": str(base), "PODMAN_INSECURE_REGISTRIES": registry}
    for k in _ENV_KEYS:
        env.pop(k, None)
    start, stop = ["bash", str(SCRIPTS / "start-podman.sh")], ["bash", str(SCRIPTS / "stop-podman.sh")]
    try:
        with script_backend(start, stop, {**env, "PURGE": "1"}) as exports, environ(exports, unset=_ENV_KEYS):
            yield {**exports, "TX_TEST_REGISTRY": registry}
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def registry(podman_engine: Dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private image registry (Distribution 2.8's ``docker-registry``) on 127.0.0.1, plain
    HTTP, storage under pytest's temporary directory; the session's engine trusts it.
    Yields ``host:port``."""
    exe = shutil.which("docker-registry")
    if exe is None:
        backend_unavailable("docker-registry", "no docker-registry binary: run scripts/install-podman.sh (root)")
    addr = podman_engine["TX_TEST_REGISTRY"]
    d = tmp_path_factory.mktemp("registry")
    conf = d / "config.yml"
    conf.write_text(f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {d}/data\n"
                    f"http:\n  addr: {addr}\n")
    svc = ServiceProcess.start([exe, "serve", str(conf)], log=d / "registry.log")
    try:
        wait_for(lambda: port_open(int(addr.rsplit(":", 1)[1])), timeout=30, what="docker-registry to listen",
                 service=svc)
        yield addr
    finally:
        svc.stop()


@attrs.define
class Moto:
    """A running moto_server (Batch in Docker mode) with a job queue."""

    endpoint: str
    queue: str
    service: ServiceProcess

    def env(self) -> Dict[str, str]:
        """The variables that point boto3 (and tx's aws_batch) at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_DEFAULT_REGION": REGION,
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@pytest.fixture(scope="session")
def moto_docker(podman_engine: Dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """moto_server with Batch in Docker mode, whose Docker client is the session's podman
    engine (so the jobs' containers pull their images through that engine), and a queue."""
    exe = shutil.which("moto_server", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                            os.environ.get("PATH", "")]))
    if exe is None:
        backend_unavailable("moto", "moto_server not found: pip install 'moto[server,batch,logs]'")
    try:
        import boto3
        import docker  # noqa: F401 - moto's Docker mode needs it
    except ImportError as e:
        backend_unavailable("moto Docker mode", f"{e.name} is missing: pip install boto3 docker")
    port = free_port()
    d = tmp_path_factory.mktemp("moto-docker")
    svc = ServiceProcess.start([exe, "-H", "127.0.0.1", "-p", str(port)], log=d / "moto.log",
                               env={**os.environ, **podman_engine})
    try:
        wait_for(lambda: port_open(port), timeout=60, what="moto_server to listen", service=svc)
        endpoint = f"http://127.0.0.1:{port}"
        req = urllib.request.Request(f"{endpoint}/moto-api/config", method="POST",
                                     data=json.dumps({"batch": {"use_docker": True}}).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).read()
        kw = dict(endpoint_url=endpoint, region_name=REGION, aws_access_key_id="testing",
                  aws_secret_access_key="testing")
        iam, batch = boto3.client("iam", **kw), boto3.client("batch", **kw)
        role = iam.create_role(RoleName="tx-wsimg", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        ce = batch.create_compute_environment(computeEnvironmentName="tx-wsimg-ce", type="UNMANAGED",
                                              state="ENABLED", serviceRole=role)
        q = batch.create_job_queue(jobQueueName="tx-wsimg-q", state="ENABLED", priority=1,
                                   computeEnvironmentOrder=[{"order": 1,
                                                             "computeEnvironment": ce["computeEnvironmentArn"]}])
        yield Moto(endpoint=endpoint, queue=q["jobQueueName"], service=svc)
    finally:
        svc.stop()
