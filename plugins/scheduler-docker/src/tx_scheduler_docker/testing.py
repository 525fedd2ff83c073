"""pytest fixtures of a private Docker-compatible engine and image registry, for this
plugin's tests and every test of the repository that needs an engine (AWS Batch in moto's
Docker mode, the workspace images of the remote schedulers). Loaded as a pytest plugin by
the repository's root ``conftest.py`` (``pytest_plugins``), so each exists once and is
started at most once per session.

* ``podman_engine``: podman's Docker API service, started by ``scripts/start-podman.sh``
  with its own ``PODMAN_BASE`` under pytest's temporary directory (own socket, storage, run
  state, networks, events; runc, cgroupfs) and the image :data:`IMAGE` imported there from
  Debian's busybox-static without any registry; ``PODMAN_INSECURE_REGISTRIES`` names the
  ``registry`` fixture's address. ``DOCKER_HOST`` (and podman's ``CONTAINERS_*``) point at
  it while the session runs, so a user's engine is never touched and fresh processes (``tx
  status`` from another shell) find the same engine; at the end the service is stopped and
  everything it made removed (``scripts/stop-podman.sh`` with ``PURGE=1``).
* ``registry``: Distribution's ``docker-registry`` on a free port of 127.0.0.1, plain HTTP,
  storage under pytest's temporary directory; the session's engine trusts it.

Where the machine cannot run them (no podman, runc or busybox-static: run
``scripts/install-podman.sh``; not root; no ``docker-registry``), the fixtures skip with the
fix (:func:`tx.testing.backends.backend_unavailable`; a failure with
``TX_TEST_REQUIRE_BACKENDS=1``). The scripts are the repository's: the fixtures run from a
checkout.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Iterator

import pytest

from tx.testing import ServiceProcess, backend_unavailable, environ, free_port, script_backend, wait_for

__all__ = ["IMAGE", "SCRIPTS", "podman_engine", "podman_service", "registry"]

#: the repository's scripts/ (start-podman.sh, stop-podman.sh), from a checkout
SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"
#: the 2 MB busybox image scripts/start-podman.sh imports into each engine (no registry needed)
IMAGE = "localhost/busybox:tx"
#: variables of a user's engine that would point the clients elsewhere: unset for the session
_ENV_KEYS = ("DOCKER_HOST", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF",
             "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION")


@pytest.fixture(scope="session")
def podman_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, str]]:
    """A private podman Docker API service for the session; yields its environment
    (``DOCKER_HOST`` ... and ``TX_TEST_REGISTRY``, the address the ``registry`` fixture
    serves on, which the engine reaches over plain HTTP). The environment is also set in
    ``os.environ`` while the session runs."""
    if shutil.which("podman") is None or shutil.which("runc") is None or not os.path.exists("/bin/busybox"):
        backend_unavailable("podman", "podman, runc or busybox-static missing: run scripts/install-podman.sh (root)")
    if os.geteuid() != 0:
        backend_unavailable("podman", "the tests run podman as root (private storage, runc, bridge networks)")
    if not (SCRIPTS / "start-podman.sh").is_file():
        backend_unavailable("podman", f"{SCRIPTS / 'start-podman.sh'} is missing: run the tests from a checkout")
    base = tmp_path_factory.mktemp("podman")
    if len(str(base)) > 46:  # podman refuses a runroot (base/run) over 50 characters (start-podman.sh)
        base = Path(tempfile.mkdtemp(prefix="tx-podman-"))
    registry = f"127.0.0.1:{free_port()}"
    try:
        with podman_service(base, PODMAN_INSECURE_REGISTRIES=registry) as exports, environ(exports, unset=_ENV_KEYS):
            yield {**exports, "TX_TEST_REGISTRY": registry}
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@contextlib.contextmanager
def podman_service(base: Path, **settings: str) -> Iterator[Dict[str, str]]:
    """An engine of ``scripts/start-podman.sh`` under ``base`` for the ``with`` block, stopped
    with everything it made at its end (``stop-podman.sh`` with ``PURGE=1``); yields its client
    environment (``DOCKER_HOST``, podman's ``CONTAINERS_*``), without setting it here. A user's
    engine variables (``DOCKER_HOST`` ...) are left out of the scripts' environment.

    Args:
        base: its ``PODMAN_BASE``; at most 46 characters (podman refuses a runroot, ``base/run``, over 50).
        settings: more variables of the start script (``PODMAN_INSECURE_REGISTRIES``,
            ``PODMAN_EVENTS_LOGGER``).

    Raises:
        RuntimeError: the start script failed (:func:`tx.testing.backends.script_backend`).
    """
    env = {k: v for k, v in os.environ.items() if k not in _ENV_KEYS}
    env.update(settings, PODMAN_BASE=str(base), PURGE="1")
    start, stop = ["bash", str(SCRIPTS / "start-podman.sh")], ["bash", str(SCRIPTS / "stop-podman.sh")]
    with script_backend(start, stop, env) as exports:
        yield exports


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
        # its own socket, not port_open: the port was picked when the engine started, and
        # another process may hold it now (then the registry exits saying so)
        wait_for(lambda: svc.listens(int(addr.rsplit(":", 1)[1])), timeout=30, what="docker-registry to listen",
                 service=svc)
        yield addr
    finally:
        svc.stop()
