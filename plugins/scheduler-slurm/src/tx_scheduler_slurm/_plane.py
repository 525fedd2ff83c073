"""The slurm scheduler's call budget and status plane (:mod:`tx.schedulers.budget`,
:mod:`tx.schedulers.plane`).

* Every Slurm client command tx runs goes through :func:`budget` (in
  :func:`tx_scheduler_slurm._client.run`): a token bucket shared by the tx processes of this
  host, unlimited unless ``.txconfig`` ``[slurm] max_calls_per_minute`` sets it (Slurm
  itself has no default limit: ``SlurmctldParameters=rl_enable`` is off by default). A
  command that fails with slurmctld's rate-limit answer (``SLURMCTLD_COMMUNICATIONS_BACKOFF``:
  "Rate limit exceeded, please retry momentarily") is retried after a jittered backoff.
* Status comes from one ``squeue --user <uid>`` for every job of the user, shared for
  a short time by every tx process of the host (:func:`plane`): ``describe`` of 1,000 apps is
  one squeue, not 1,000.

The cluster is named by ``SLURM_CONF`` (what selects the cluster for Slurm's commands) and
``SLURM_CLUSTERS``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

import attrs

from tx.schedulers import CallBudget, StatusPlane, budget_for

from tx_scheduler_slurm._parse import JobRecord, in_array_tasks

__all__ = ["DEFAULT_CALLS_PER_MINUTE", "budget", "cluster_key", "find", "plane", "to_items"]

#: Slurm's controller has no rate limit unless ``SlurmctldParameters=rl_enable`` is set
#: (https://slurm.schedmd.com/slurm.conf.html#OPT_rl_enable): no budget unless configured
DEFAULT_CALLS_PER_MINUTE: Optional[float] = None


def cluster_key() -> str:
    """What names the cluster this process's Slurm commands reach."""
    return f"{os.environ.get('SLURM_CONF', '')}|{os.environ.get('SLURM_CLUSTERS', '')}"


def budget() -> CallBudget:
    """The call budget of Slurm commands on this cluster."""
    return budget_for("slurm", cluster_key(), DEFAULT_CALLS_PER_MINUTE)


_PLANES: Dict[str, StatusPlane] = {}


def plane() -> StatusPlane:
    """The shared status snapshot of this cluster (under the current state directory)."""
    p = StatusPlane("slurm", cluster_key())
    return _PLANES.setdefault(p.path, p)


def to_items(records: List[JobRecord]) -> Dict[str, Any]:
    """squeue's records by app id, as JSON-able dicts."""
    items: Dict[str, List[Dict[str, Any]]] = {}
    for rec in records:
        items.setdefault(rec.app_id, []).append(attrs.asdict(rec))
    return items


def find(items: Dict[str, Any], app_id: str) -> List[JobRecord]:
    """The records of ``app_id`` in a snapshot; a task of a job array that has no record
    of its own yet gets its array's record (as :meth:`SlurmScheduler._records` does)."""
    recs = [JobRecord(**d) for d in items.get(app_id, ())]
    if recs or "_" not in app_id:
        return recs
    array, task = app_id.split("_", 1)
    if not task.isdigit():
        return []
    return [attrs.evolve(JobRecord(**d), job_id=app_id, app_id=app_id) for d in items.get(array, ())
            if d.get("job_id") == array and in_array_tasks(int(task), d.get("array_tasks", ""))]
