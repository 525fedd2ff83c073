"""The preemption warning on Kubernetes and what a warned app saved.

Kubernetes warns a pod it evicts, preempts or deletes with SIGTERM to its containers, and
SIGKILLs them after the pod's ``terminationGracePeriodSeconds`` (default 30 s,
https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination). Every pod
of a tx app gets that grace from the run option ``preempt_grace`` and the same seconds in
``TX_PREEMPT_GRACE`` (:func:`tx.distributed.preempt_grace`), so that the job knows what it can
count on. An evicted pod (its ``DisruptionTarget`` condition) is an infrastructure failure;
its attempt names what the job saved, read from the completion markers under the app's
``TX_CHECKPOINT_DIR`` (:func:`tx.schedulers.saves.what_saved`) where that directory is one
this host reads (a hostPath or shared file system mounted at the same path), else the
eviction only.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional

from tx.schedulers import local_path, what_saved
from tx.specs import CfgVal, InvalidRunConfigException

__all__ = ["DEFAULT_GRACE", "GRACE_ENV", "OPTION", "checkpoint_dir", "grace", "pod_grace", "saved_since"]

#: Kubernetes' default ``terminationGracePeriodSeconds``
DEFAULT_GRACE = 30
GRACE_ENV = "TX_PREEMPT_GRACE"
OPTION = "preempt_grace"
_CHECKPOINT_ENV = "TX_CHECKPOINT_DIR"


def grace(cfg: Mapping[str, CfgVal]) -> int:
    """The ``preempt_grace`` run option (seconds, :data:`DEFAULT_GRACE` if unset).

    Raises:
        InvalidRunConfigException: not an integer >= 0.
    """
    value = cfg.get(OPTION)
    if value is None:
        return DEFAULT_GRACE
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidRunConfigException(f"run option {OPTION} must be whole seconds >= 0, got {value!r}", OPTION, cfg)
    return value


def pod_grace(pods: List[Dict[str, Any]], default: int = DEFAULT_GRACE) -> int:
    """The ``terminationGracePeriodSeconds`` of the app's pods (the first that says), else
    ``default``."""
    for pod in pods:
        g = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        if isinstance(g, int):
            return g
    return default


def checkpoint_dir(env_sources: List[Mapping[str, Any]]) -> Optional[str]:
    """The app's ``TX_CHECKPOINT_DIR`` (the first of ``env_sources``, role environments,
    that sets it) when it is a directory this host reads; None otherwise (unset, an object
    store, or a path of the pods' file system that this host does not have: saying
    nothing was saved there would be a wrong answer)."""
    for env in env_sources:
        loc = env.get(_CHECKPOINT_ENV)
        if loc:
            path = local_path(str(loc))
            return str(loc) if path is not None and os.path.isdir(path) else None
    return None


def container_env(pods: List[Dict[str, Any]]) -> List[Dict[str, str]]:
    """The literal environment of each pod's first container."""
    out = []
    for pod in pods:
        for c in ((pod.get("spec") or {}).get("containers") or [])[:1]:
            out.append({e["name"]: e["value"] for e in c.get("env") or [] if "value" in e})
    return out


def saved_since(location: Optional[str], since: float, until: float) -> str:
    """What was saved between the warning at ``since`` and the end of the attempt at
    ``until`` (epoch s), "" where unknown (no readable location, or no time)."""
    if location is None or not since < float("inf"):
        return ""
    return what_saved(location, since, until)
