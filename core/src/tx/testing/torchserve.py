"""A private TorchServe for tests (``serve.torchserve`` and ``tx.apps.serve``): its own
model store, config, log and temp directories under a directory of the test session's, its
inference, management and metrics APIs on free ports of 127.0.0.1, started with
``--disable-token-auth --enable-model-api --ncs`` (TorchServe 0.12 registers models through
the management API only with the model API enabled, and without a token only with token auth
disabled), stopped (its process group: the Java frontend and its Python workers) by
:meth:`TorchServe.stop`.

Also a pytest plugin, loaded by the repository's root ``conftest.py`` (``pytest_plugins``):
the fixture ``torchserve_server`` starts one such server once per session (skipped with the
fix where TorchServe or Java is missing: :func:`tx.testing.backends.backend_unavailable`; a
failure under ``TX_TEST_REQUIRE_BACKENDS=1``). ``scripts/start-torchserve.sh`` starts the same
configuration by hand.

Needs ``torchserve`` and ``torch-model-archiver`` (PyPI, 0.12), ``pyyaml`` (TorchServe's worker
imports it without declaring it) and a Java runtime (Debian's ``openjdk-17-jre-headless``).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Optional, Union

import pytest

from tx.testing.backends import ServiceProcess, backend_unavailable, free_port, wait_for

__all__ = ["INSTALL", "TorchServe", "executable", "torchserve_server", "unavailable_reason"]

INSTALL = ("pip install torchserve==0.12.0 torch-model-archiver==0.12.0 pyyaml, "
           "and a Java runtime (apt-get install openjdk-17-jre-headless)")


def executable(name: str) -> Optional[str]:
    """The command ``name`` (``torchserve``, ``torch-model-archiver``) of this interpreter's
    environment, else of PATH; None if neither has it."""
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() else shutil.which(name)


def unavailable_reason() -> Optional[str]:
    """Why TorchServe cannot run here (with the fix), or None when it can."""
    missing = [c for c in ("torchserve", "torch-model-archiver") if executable(c) is None]
    missing += [m for m in ("yaml",) if importlib.util.find_spec(m) is None]
    if shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin") if os.environ.get("JAVA_HOME")
                    else None) is None:
        missing.append("java")
    return f"{', '.join(missing)} not found: {INSTALL}" if missing else None


class TorchServe:
    """A running TorchServe: :attr:`inference`, :attr:`management`, :attr:`metrics` (the
    ``http://127.0.0.1:PORT`` URLs of its APIs), :attr:`directory` (``config.properties``,
    ``model-store/``, ``logs/``, ``tmp/``), :attr:`process`."""

    def __init__(self, directory: Path, inference: str, management: str, metrics: str,
                 process: ServiceProcess) -> None:
        self.directory = directory
        self.inference = inference
        self.management = management
        self.metrics = metrics
        self.process = process

    @classmethod
    def start(cls, directory: Union[str, Path], timeout: float = 120.0) -> "TorchServe":
        """Start a server keeping everything under ``directory`` and wait until its
        management API lists models and its inference API answers ``/ping`` as Healthy.

        Raises:
            FileNotFoundError: no ``torchserve`` command (see :data:`INSTALL`).
            RuntimeError: it exited or was not ready within ``timeout`` seconds (with the
                last lines of its log).
        """
        exe = executable("torchserve")
        if exe is None:
            raise FileNotFoundError(f"the torchserve command is not installed: {INSTALL}")
        directory = Path(directory)
        for sub in ("model-store", "logs", "tmp"):
            (directory / sub).mkdir(parents=True, exist_ok=True)
        ports = {name: free_port() for name in ("inference", "management", "metrics")}
        urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        config = directory / "config.properties"
        config.write_text("\n".join([
            *(f"{name}_address={url}" for name, url in urls.items()),
            # its gRPC servers too (default 7070 and 7071: a second TorchServe on the machine,
            # a user's or another test session's, would fail to bind them and stop)
            f"grpc_inference_port={free_port()}",
            f"grpc_management_port={free_port()}",
            "default_workers_per_model=1",
            "disable_system_metrics=true",  # no metrics collector process every minute
            # a small, quick JVM: the frontend only routes requests (2-core CI machines)
            "vmargs=-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1",
            "",
        ]))
        env = dict(os.environ)
        # its logs (log4j reads LOG_LOCATION, METRICS_LOCATION), the JVM's temp dir (TEMP) and
        # the pid file torchserve keeps in Python's temp dir (TMPDIR): all private, so
        # another TorchServe on the machine neither collides nor is taken for this one
        for var in ("LOG_LOCATION", "METRICS_LOCATION"):
            env[var] = str(directory / "logs")
        env["TEMP"] = env["TMPDIR"] = str(directory / "tmp")
        env.pop("TS_CONFIG_FILE", None)
        proc = ServiceProcess.start(
            [exe, "--foreground", "--model-store", str(directory / "model-store"), "--ts-config", str(config),
             "--disable-token-auth", "--enable-model-api", "--ncs"],
            log=directory / "torchserve.out", env=env, cwd=directory,
        )
        server = cls(directory, urls["inference"], urls["management"], urls["metrics"], proc)
        try:
            wait_for(server.ready, timeout=timeout, what=f"TorchServe at {server.management}", interval=0.25,
                     service=proc)
        except BaseException:
            proc.stop()
            raise
        return server

    def ready(self) -> bool:
        """True when the management API lists models and ``/ping`` says Healthy."""
        try:
            self.request("GET", f"{self.management}/models", timeout=2)
            return bool(self.request("GET", f"{self.inference}/ping", timeout=2).get("status") == "Healthy")
        except (OSError, ValueError):
            return False

    @staticmethod
    def request(method: str, url: str, body: Any = None, timeout: float = 30.0) -> Any:
        """Send ``body`` (JSON-encoded unless bytes) to ``url`` and return the decoded JSON answer.

        Raises:
            urllib.error.HTTPError: TorchServe answered with an error status.
            OSError: no answer.
        """
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data is not None else {})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")

    def models(self) -> list:
        """The names of the registered models."""
        return [m["modelName"] for m in self.request("GET", f"{self.management}/models")["models"]]

    def unregister(self, name: str) -> None:
        """Unregister every version of model ``name`` (stopping its workers); nothing if absent."""
        try:
            for entry in self.request("GET", f"{self.management}/models/{name}/all"):
                self.request("DELETE", f"{self.management}/models/{name}/{entry['modelVersion']}")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of TorchServe's own log (``logs/ts_log.log``), for messages."""
        try:
            text = (self.directory / "logs" / "ts_log.log").read_text(errors="replace")
        except OSError:
            return self.process.log_tail(lines)
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server (its process group); idempotent."""
        self.process.stop()


@pytest.fixture(scope="session")
def torchserve_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TorchServe]:
    """The session's private :class:`TorchServe` (started on first use, stopped at the end)."""
    reason = unavailable_reason()
    if reason is not None:
        backend_unavailable("torchserve", reason)
    server = TorchServe.start(tmp_path_factory.mktemp("torchserve"))
    try:
        yield server
    finally:
        server.stop()
