"""``torchx.tracker.mlflow``: tx-tracker-mlflow's MLflow tracker."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_tracker_mlflow.tracker", "tx-tracker-mlflow")
