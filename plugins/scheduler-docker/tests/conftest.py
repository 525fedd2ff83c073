"""Fixtures of the tx-scheduler-docker tests.

The tests run against a real Docker-compatible engine that this session starts itself: the
fixtures ``podman_engine`` and ``registry`` of :mod:`tx_scheduler_docker.testing` (loaded by
the repository's root ``conftest.py``; see there how the engine is kept private and where
the tests skip). Here: a client and a scheduler on that engine, the test image.

Jobs that need Python and torch bind-mount the host's ``/usr``, this interpreter's base
prefix and its environment (``sys.prefix``, where torch==2.13.0 is installed) read-only at
the same paths, as ``../shared/env/start-podman.sh``'s recipe does.
"""
import os
import sys
from typing import Any, Dict, Iterator, List

import pytest

from tx_scheduler_docker.testing import IMAGE


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
