"""Fixtures of the tx-scheduler-docker tests.

The tests run against a real Docker-compatible engine that this session starts itself:
podman's Docker API service, started by ``scripts/start-podman.sh`` with its own
``PODMAN_BASE`` under pytest's temporary directory (own socket, storage, run state,
networks, events; runc, cgroupfs) and the image ``localhost/busybox:tx`` imported there from
Debian's busybox-static without any registry. The session sets ``DOCKER_HOST`` (and podman's
``CONTAINERS_CONF``/``CONTAINERS_STORAGE_CONF``) to it, so that a user's engine is never
touched and fresh processes (``tx status`` from another shell) find the same engine, and at
the end stops the service it started and removes everything it made (``PURGE=1``).

Where podman is not installed (``scripts/install-podman.sh`` installs it) or the tests do
not run as root, the tests are skipped with the fix
(``tx.testing.backends.backend_unavailable``; a failure with ``TX_TEST_REQUIRE_BACKENDS=1``).

Jobs that need Python and torch bind-mount the host's ``/usr``, this interpreter's base
prefix and its environment (``sys.prefix``, where torch==2.13.0 is installed) read-only at
the same paths, as ``../shared/env/start-podman.sh``'s recipe does.
"""
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from tx.testing.backends import (
    ServiceProcess, backend_unavailable, environ, free_port, port_open, script_backend, wait_for,
)

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = REPO / "scripts"
IMAGE = "localhost/busybox:tx"
_ENV_KEYS = ("DOCKER_HOST", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF",
             "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION")


@pytest.fixture(scope="session")
def podman_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, str]]:
    """A private podman Docker API service for the session; yields its environment
    (``DOCKER_HOST`` ...), which is also set in ``os.environ`` while the session runs."""
    if shutil.which("podman") is None or shutil.which("runc") is None or not os.path.exists("/bin/busybox"):
        backend_unavailable("podman", "podman, runc or busybox-static missing: run scripts/install-podman.sh (root)")
    if os.geteuid() != 0:
        backend_unavailable("podman", "the tests run podman as root (private storage, runc, bridge networks)")
    base = tmp_path_factory.mktemp("podman")
    registry = f"127.0.0.1:{free_port()}"  # the private registry's address (fixture `registry`)
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
    """A private image registry (Distribution's ``docker-registry``) on 127.0.0.1, plain HTTP,
    storage under pytest's temporary directory; the session's engine trusts it. Yields
    ``host:port``."""
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
        wait_for(lambda: port_open(int(addr.rsplit(":", 1)[1])), timeout=30, what="docker-registry to listen", service=svc)
        yield addr
    finally:
        svc.stop()


@pytest.fixture(scope="session")
def docker_client(podman_engine: Dict[str, str]) -> Iterator[Any]:
    """A ``docker.DockerClient`` on the session's engine."""
    import docker

    client = docker.DockerClient(base_url=podman_engine["DOCKER_HOST"], timeout=120)
    yield client
    client.close()


@pytest.fixture
def scheduler(podman_engine: Dict[str, str]) -> Iterator[Any]:
    """``local_docker`` created by name through the plugin registry, as ``tx`` creates it."""
    from tx.schedulers import get_scheduler_factories

    sched = get_scheduler_factories()["local_docker"]("txtest")
    yield sched
    sched.close()


@pytest.fixture(scope="session")
def image() -> str:
    """The test image: busybox, imported by scripts/start-podman.sh."""
    return IMAGE


@pytest.fixture(scope="session")
def host_python_mounts() -> List[str]:
    """``--mounts`` entries (``tx.specs.parse_mounts`` syntax) that make this interpreter and
    its packages (torch) usable inside the busybox image: /usr, the base prefix and the
    environment, read-only, at the same paths."""
    paths = ["/usr", sys.base_prefix, sys.prefix]
    out = []
    for p in dict.fromkeys(os.path.realpath(x) for x in paths):
        if p == "/usr" or not p.startswith("/usr/"):
            out.append(f"type=bind,src={p},dst={p},readonly")
    return out
