"""pytest fixtures of a local Google Cloud Batch, for this plugin's tests and every test of
the repository that needs one (tests/test_portability.py). Loaded as a pytest plugin by the
repository's root ``conftest.py`` (``pytest_plugins``), so the server exists once and is
started at most once per session.

* ``fake_gcp``: ``fake_gcp.FakeGcp`` (test code beside this plugin's tests:
  ``plugins/scheduler-gcp-batch/tests/fake_gcp.py``, importable there through pytest.ini's
  ``pythonpath``), a local server for the Batch v1 and Cloud Logging v2 REST APIs that really
  runs the tasks as local processes, on a free port of 127.0.0.1 with its state under
  pytest's temp directory, and the environment that points tx at it for the session (as
  users locate Google Cloud: see ``tx_scheduler_gcp_batch._client``), so that a scheduler
  created by name in a fresh process reaches the same server.

The server is the repository's: the fixture runs from a checkout.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator

import pytest

from tx.testing import backend_unavailable

__all__ = ["LOCATION", "PROJECT", "fake_gcp"]

#: the project and location the fake Batch server answers for
PROJECT = "tx-test-project"
LOCATION = "us-central1"


@pytest.fixture(scope="session")
def fake_gcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The local Batch + Logging server (a ``fake_gcp.FakeGcp``), and the environment that
    points tx at it."""
    try:
        from fake_gcp import FakeGcp  # the tests' server (pytest.ini: pythonpath), only where the fixture runs
    except ImportError as e:
        backend_unavailable("gcp_batch (local Batch server)",
                            f"{e.name} cannot be imported: run from a checkout (pytest.ini puts the tests on pythonpath)")
    server = FakeGcp(str(tmp_path_factory.mktemp("fake-gcp"))).start()
    env = {
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH": server.url + "/",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING": server.url + "/",
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "CLOUDSDK_BATCH_LOCATION": LOCATION,
        "CLOUDSDK_CONFIG": str(tmp_path_factory.mktemp("gcloud-config")),
        "NO_GCE_CHECK": "true",
    }
    saved: Dict[str, object] = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield server
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v  # type: ignore[assignment]
    assert not server.errors, f"the local Batch server moved jobs as Batch never does: {server.errors}"
