"""Fixtures of the tx-tracker-mlflow tests: a real MLflow, started by the session itself.

* ``mlflow_server`` (of :mod:`tx_tracker_mlflow.testing`, loaded by the repository's root
  ``conftest.py``): an ``mlflow server`` on a free port of 127.0.0.1 with a sqlite store
  and served artifacts under the session's temp dir, started once per session;
* ``store_uri``: parametrized over that server and a sqlite file store (in-process);
* tracker-related environment variables are cleared for every test.

Where the full mlflow is not installed the tests are skipped with the fix
(``tx.testing.backends.backend_unavailable``; a failure with TX_TEST_REQUIRE_BACKENDS=1).
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest

from tx.testing.backends import backend_unavailable
from tx_tracker_mlflow.testing import INSTALL, full_mlflow_installed

ENV_VARS = ("TX_TRACKERS", "TORCHX_TRACKERS", "TX_TRACKER_MLFLOW_CONFIG", "TORCHX_TRACKER_MLFLOW_CONFIG",
            "TX_JOB_ID", "TORCHX_JOB_ID", "TX_PARENT_RUN_ID", "TORCHX_PARENT_RUN_ID", "RANK", "TX_REPLICA_ID",
            "TORCHX_REPLICA_IDX", "TX_ROLE_IDX", "TORCHX_ROLE_IDX", "MLFLOW_TRACKING_URI",
            "TX_TRACKING_EXPERIMENT_NAME", "TORCHX_TRACKING_EXPERIMENT_NAME", "TXCONFIG")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(params=["server", "sqlite"])
def store_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A tracking URI: the session's ``mlflow server``, or a sqlite file of this test."""
    if request.param == "server":
        return request.getfixturevalue("mlflow_server").uri
    if not full_mlflow_installed():
        backend_unavailable("mlflow", f"the full mlflow is not installed: {INSTALL}")
    (tmp_path / "artifacts").mkdir()
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture
def experiment() -> str:
    """A fresh experiment name (tests share the session's server)."""
    return f"exp-{uuid.uuid4().hex[:8]}"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a sqlite store keeps artifacts under ./mlruns: the test's directory
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _end_primed_runs() -> Iterator[None]:
    """Runs a test primed (as a job's rank 0 does) are ended after the test, while its
    store is still there, not when pytest exits."""
    yield
    from tx_tracker_mlflow import tracker

    tracker._finish_all()
