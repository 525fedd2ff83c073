"""The MLflow client of a tracking URI, and an absent tracking server as a one-line error.

mlflow is imported when a client is made (``tx --help`` and ``tx run`` without the mlflow
tracker never import it).
"""
from __future__ import annotations

from typing import Any, Optional

from tx import UserError


class TrackingServerUnreachable(UserError, ConnectionError):
    """The MLflow tracking server does not answer."""


def make_client(tracking_uri: Optional[str]) -> Any:
    """An ``mlflow.MlflowClient`` for ``tracking_uri`` (None: MLflow's default,
    ``MLFLOW_TRACKING_URI``), its server checked by :func:`check_reachable`.

    Raises:
        TrackingServerUnreachable: an ``http(s)`` tracking server does not answer.
        ImportError: mlflow is not installed.
    """
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    check_reachable(client.tracking_uri)
    return client


def check_reachable(uri: str) -> None:
    """Check once (5 s timeout) that an ``http(s)`` tracking server answers; other URIs
    (a file store, ``sqlite:``, ``databricks``) are not checked.

    Raises:
        TrackingServerUnreachable: it does not answer.
    """
    if not uri.startswith(("http://", "https://")):
        return
    import requests

    try:
        requests.get(uri.rstrip("/") + "/health", timeout=5)
    except requests.RequestException as e:
        reason = type(e).__name__
        raise TrackingServerUnreachable(
            f"the MLflow tracking server {uri} is not reachable ({reason}): start it, or fix the "
            "tracking URI (TX_TRACKER_MLFLOW_CONFIG, [tracker:mlflow] config, MLFLOW_TRACKING_URI)"
        ) from None
