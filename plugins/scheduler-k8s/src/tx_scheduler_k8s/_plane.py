"""The Kubernetes schedulers' status plane (:mod:`tx.schedulers.plane`): one snapshot per
scheduler, API server and namespace, shared by every tx process of the host for a short
time.

A fetch is one label-selected list per kind (``app.kubernetes.io/managed-by=tx``): the
scheduler's objects (Volcano Jobs, JobSets or AppWrappers), their pods, and the sweeps'
Indexed Jobs (``batch/v1`` Jobs labelled ``tx.pytorch.org/sweep``): 3 requests a tick
whether 10 or 1,000 apps are followed there
(https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks
is not used: each list is one response).
"""
from __future__ import annotations

from typing import Any, Dict, List

from tx.schedulers import StatusPlane

__all__ = ["group_pods", "plane"]

_PLANES: Dict[str, StatusPlane] = {}


def plane(backend: str, host: str, namespace: str) -> StatusPlane:
    """The shared snapshot of ``backend``'s apps in ``namespace`` of the API server
    ``host`` (under the current state directory)."""
    p = StatusPlane(backend, f"{host}|{namespace}")
    return _PLANES.setdefault(p.path, p)


def group_pods(pods: List[Dict[str, Any]], label: str) -> Dict[str, List[Dict[str, Any]]]:
    """Pods by the value of their label ``label`` (the app's object name)."""
    out: Dict[str, List[Dict[str, Any]]] = {}
    for pod in pods:
        out.setdefault((pod["metadata"].get("labels") or {}).get(label, ""), []).append(pod)
    return out
