"""tx.tracker: experiment tracking (which job produced which artifacts from which inputs).

The API of TorchX's ``torchx.tracker``: :class:`TrackerBase` backends, :class:`AppRun` for
code inside a job, :func:`build_trackers` and :func:`get_configured_trackers`. tx-core's
file tracker (``file``, :mod:`tx.tracker.backend.fsspec`) is the embedded default;
tx-tracker-mlflow adds ``mlflow``. See :mod:`tx.tracker.api`.
"""
from tx.tracker.api import (
    UNDEFINED_RUN_ID,
    AppRun,
    AppRunTrackableSource,
    Lineage,
    LineageRun,
    TrackerArtifact,
    TrackerBase,
    TrackerSource,
    app_run_from_env,
    build_trackers,
    get_configured_trackers,
    is_rank0,
    trackers_from_environ,
)

__all__ = [
    "UNDEFINED_RUN_ID", "AppRun",
    "AppRunTrackableSource", "Lineage", "LineageRun", "TrackerArtifact", "TrackerBase",
    "TrackerSource", "app_run_from_env", "build_trackers", "get_configured_trackers", "is_rank0",
    "trackers_from_environ",
]
