"""Registrations of tx-tracker-mlflow (entry point ``mlflow`` in the group ``tx``). Imports
nothing heavy: mlflow is imported when the tracker is made."""
from typing import Callable

from tx import hookimpl

TX_PLUGIN_API = 1


@hookimpl
def tx_register_trackers(register: Callable[..., None]) -> None:
    """Register the ``mlflow`` tracker (factory ``create(config)``)."""
    register(
        "mlflow",
        "tx_tracker_mlflow.tracker:create",
        description="MLflow: one run per job (named by its app handle); config: tracking URI[;key=value...]",
        requires=("mlflow",),
        install="pip install tx-tracker-mlflow",
    )
