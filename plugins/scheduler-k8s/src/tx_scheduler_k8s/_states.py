"""Pod phases -> :class:`tx.specs.AppState` (the state of each replica).

Phases are those of the v1 API (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-phase).
Each scheduler reads the state of its own object (Volcano Job, JobSet, AppWrapper) in its
per-kind module, beside the code that builds that object.
"""
from __future__ import annotations

from tx.specs import AppState

POD_STATES = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}
