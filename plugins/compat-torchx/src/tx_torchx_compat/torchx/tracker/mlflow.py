"""``torchx.tracker.mlflow``: tx-tracker-mlflow's MLflow tracker, with TorchX 0.7.0's
factory :func:`create_tracker`."""
import os
from typing import Any

from tx.config import get_configs
from tx_torchx_compat._missing import reexport

_mlflow = reexport(globals(), "tx_tracker_mlflow.tracker", "tx-tracker-mlflow")


def create_tracker(config: str) -> Any:
    """TorchX 0.7.0's entry point: an ``MLflowTracker`` whose keyword arguments
    (``tracking_uri``, ``artifact_location``, ``experiment_name``) are the keys of the
    ``[tracker:mlflow]`` section of the ``.torchxconfig`` in directory ``config`` (its
    ``config`` key is skipped); ``$TORCHX_TRACKING_EXPERIMENT_NAME`` wins over the
    section's ``experiment_name``.

    Raises:
        TypeError: the section has a key ``MLflowTracker`` does not take.
    """
    kwargs = dict(get_configs(prefix="tracker", name="mlflow", dirs=[config]))
    kwargs.pop("config", None)
    experiment = os.getenv("TORCHX_TRACKING_EXPERIMENT_NAME", kwargs.pop("experiment_name", None))
    return _mlflow.MLflowTracker(experiment_name=experiment, **kwargs)
