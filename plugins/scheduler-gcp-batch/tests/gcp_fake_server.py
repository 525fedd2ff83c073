"""The session fixture ``fake_gcp``: :class:`fake_gcp.FakeGcp` (beside this file), a local
server for the Batch v1 and Cloud Logging v2 REST APIs that really runs the tasks as local
processes, on a free port of 127.0.0.1 with its state under pytest's temp directory, and the
environment that points tx at it for the session (as users locate Google Cloud: see
``tx_scheduler_gcp_batch._client``), so that a scheduler created by name in a fresh process
reaches the same server.

A pytest plugin, loaded by the repository's root ``conftest.py`` (``pytest_plugins``; this
directory is on ``pythonpath``), so that this plugin's tests and the repository's
cross-backend tests (tests/test_portability.py) share one server per session.
"""
import os
from typing import Dict, Iterator

import pytest
from fake_gcp import FakeGcp  # beside this file (pytest.ini: pythonpath)
from gcp_settings import LOCATION, PROJECT

__all__ = ["fake_gcp"]


@pytest.fixture(scope="session")
def fake_gcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGcp]:
    """The local Batch + Logging server, and the environment that points tx at it."""
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
