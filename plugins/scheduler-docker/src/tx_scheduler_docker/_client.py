"""The Docker client, made from the environment as the ``docker`` CLI makes it, and the
engine's errors as one-line :class:`SchedulerError` messages (:func:`engine_call`).

The location of the engine comes from ``DOCKER_HOST`` (``unix:///var/run/docker.sock`` when
unset; ``tcp://host:2376`` with ``DOCKER_TLS_VERIFY``/``DOCKER_CERT_PATH``), as documented in
https://docs.docker.com/engine/reference/commandline/cli/#environment-variables and read by
``docker.DockerClient.from_env``. Podman's Docker-compatible service works the same way
(``DOCKER_HOST=unix:///run/podman/podman.sock``).
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable, TypeVar

from tx.schedulers import SchedulerError

#: seconds one API call may take (image builds and pulls stream, so this bounds silence)
DEFAULT_TIMEOUT = 120

#: the Engine API version tx speaks unless ``DOCKER_API_VERSION`` says otherwise (as for the
#: docker CLI): 1.41 is Docker 20.10's, served by every later Docker and by podman 3+.
#: Pinning it skips the version negotiation, a ``GET /version`` that takes 0.4-0.8 s on podman.
DEFAULT_API_VERSION = "1.41"

START_HINT = (
    "start one (Docker: `sudo systemctl start docker`; podman: `podman system service --time=0 "
    "unix:///run/podman/podman.sock &` or this repository's `eval \"$(scripts/start-podman.sh)\"`) "
    "and point DOCKER_HOST at its socket"
)


def engine_location() -> str:
    """Where the engine is expected: ``DOCKER_HOST`` or Docker's default socket."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def make_client(timeout: int = DEFAULT_TIMEOUT) -> Any:
    """A ``docker.DockerClient`` for the engine at :func:`engine_location`, checked with a ping,
    speaking API version ``DOCKER_API_VERSION`` (default :data:`DEFAULT_API_VERSION`).

    Raises:
        SchedulerError: the ``docker`` SDK is missing, or no engine answers (one line that
            says how to start one).
    """
    try:
        import docker
        import requests
    except ImportError:
        raise SchedulerError(
            "the docker Python SDK is not installed: pip install tx-scheduler-docker"
        ) from None
    try:
        version = os.environ.get("DOCKER_API_VERSION") or DEFAULT_API_VERSION
        client = docker.DockerClient.from_env(timeout=timeout, version=version)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SchedulerError(
            f"no Docker engine answers at {engine_location()} ({reason[:200]}); {START_HINT}"
        ) from None
    return client


def api_reason(e: Exception) -> str:
    """The first line of an engine error's explanation (at most 300 characters)."""
    explanation = getattr(e, "explanation", None)
    text = str(explanation or e)
    return text.splitlines()[0][:300] if text else type(e).__name__


F = TypeVar("F", bound=Callable[..., Any])


def engine_call(fn: F) -> F:
    """Turn a lost connection or an engine error during ``fn`` into a one-line
    :class:`SchedulerError` (what the CLI prints)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import docker
        import requests

        try:
            return fn(*args, **kwargs)
        except requests.exceptions.RequestException as e:
            reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
            raise SchedulerError(f"no Docker engine answers at {engine_location()} ({reason}); {START_HINT}") from None
        except docker.errors.APIError as e:
            raise SchedulerError(f"the Docker engine at {engine_location()} refused the request: {api_reason(e)}") from None

    return wrapper  # type: ignore[return-value]
