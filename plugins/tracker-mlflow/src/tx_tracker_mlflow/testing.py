"""A private ``mlflow server`` for tests (this plugin's and the repository's end-to-end
tests): a sqlite backend store and served artifacts under a directory of the test's, on a
free port of 127.0.0.1, stopped (its process group only) by :meth:`MLflowServer.stop`.

Also a pytest plugin, loaded by the repository's root ``conftest.py`` (``pytest_plugins``):
the fixture ``mlflow_server`` starts one such server once per session (skipped with the fix
where the full mlflow is missing: :func:`tx.testing.backends.backend_unavailable`).

Needs the full ``mlflow`` distribution (``pip install 'tx-tracker-mlflow[full]'``);
``mlflow-skinny`` has no server and no sqlite store.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Iterator, Optional, Union

import pytest

from tx.testing import ServiceProcess, backend_unavailable, wait_for

__all__ = ["INSTALL", "MLflowServer", "full_mlflow_installed", "mlflow_executable", "mlflow_server"]

INSTALL = "pip install 'tx-tracker-mlflow[full]' (the full mlflow: server and sqlite store)"


def mlflow_executable() -> Optional[str]:
    """The ``mlflow`` command of this interpreter's environment (else of PATH), or None."""
    here = Path(sys.executable).parent / "mlflow"
    return str(here) if here.is_file() else shutil.which("mlflow")


def full_mlflow_installed() -> bool:
    """True when the full mlflow (server, sqlite store) is importable, not only mlflow-skinny."""
    import importlib.util

    return importlib.util.find_spec("mlflow") is not None and importlib.util.find_spec("sqlalchemy") is not None \
        and importlib.util.find_spec("alembic") is not None


class MLflowServer:
    """A running ``mlflow server``: :attr:`uri` (``http://127.0.0.1:PORT``), :attr:`directory`
    (its database ``mlflow.db`` and ``artifacts/``), :attr:`process`."""

    def __init__(self, uri: str, directory: Path, process: ServiceProcess) -> None:
        self.uri = uri
        self.directory = directory
        self.process = process

    @classmethod
    def start(cls, directory: Union[str, Path], timeout: float = 180.0) -> "MLflowServer":
        """Start a server storing everything under ``directory`` and wait until its
        ``/health`` answers.

        Raises:
            FileNotFoundError: no ``mlflow`` command (see :data:`INSTALL`).
            RuntimeError: it did not become healthy within ``timeout`` seconds (with the
                last lines of its log).
        """
        exe = mlflow_executable()
        if exe is None:
            raise FileNotFoundError(f"the mlflow command is not installed: {INSTALL}")
        directory = Path(directory)
        (directory / "artifacts").mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        # no huey job workers: ~1.4 GB less memory (../shared/env/README.md, MLflow)
        env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
        env.pop("MLFLOW_TRACKING_URI", None)
        port, proc = ServiceProcess.start_listening(
            lambda port: [exe, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                          "--backend-store-uri", f"sqlite:///{directory / 'mlflow.db'}",
                          "--artifacts-destination", str(directory / "artifacts")],
            log=directory / "server.log", what="mlflow server", env=env, cwd=directory, timeout=timeout,
        )
        uri = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: _healthy(uri), timeout=timeout, what=f"mlflow server at {uri}", interval=0.25,
                     service=proc)
        except BaseException:
            proc.stop()
            raise
        return cls(uri, directory, proc)

    def stop(self) -> None:
        """Stop the server (its process group); idempotent."""
        self.process.stop()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MLflowServer]:
    """The session's private :class:`MLflowServer` (started on first use, stopped at the end)."""
    if not full_mlflow_installed():
        backend_unavailable("mlflow", f"the full mlflow is not installed: {INSTALL}")
    server = MLflowServer.start(tmp_path_factory.mktemp("mlflow-server"))
    try:
        yield server
    finally:
        server.stop()


def _healthy(uri: str) -> bool:
    import requests

    try:
        return requests.get(f"{uri}/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False
