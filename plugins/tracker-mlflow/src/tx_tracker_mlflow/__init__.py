"""tx-tracker-mlflow: the ``mlflow`` tracker of tx (:class:`tx.tracker.TrackerBase` over MLflow).

``import tx_tracker_mlflow`` does not import mlflow; :mod:`tx_tracker_mlflow.tracker` imports
it when a tracker is made.
"""
from tx_tracker_mlflow.version import __version__

__all__ = ["__version__"]
