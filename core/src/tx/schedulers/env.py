"""The replica environment contract: the variables every scheduler sets inside a replica.

Every scheduler plugin builds a replica's environment with :func:`replica_env` (or, where
the backend itself provides a value at run time, passes a shell expression or a backend
variable as the value), so that a training script reads the same names on every backend.
Each ``TX_*`` variable is also set under TorchX's name (:data:`TORCHX_NAMES`) so that
scripts written for TorchX keep working.

========================  ==========================  ==============================================
tx name                   TorchX name                 value
========================  ==========================  ==============================================
``TX_APP_ID``             (``TORCHX_APP_ID``)         the scheduler's app id
``TX_JOB_ID``             ``TORCHX_JOB_ID``           the app handle ``{scheduler}://{session}/{app_id}``
                                                      (set by the Runner for every role)
``TX_ROLE_NAME``          ``TORCHX_ROLE_NAME``        the role's name
``TX_ROLE_IDX``           ``TORCHX_ROLE_IDX``         the role's index in ``AppDef.roles``
``TX_REPLICA_ID``         ``TORCHX_REPLICA_IDX``      the replica's index in its role (0-based)
``TX_NUM_REPLICAS``       (``TORCHX_NUM_REPLICAS``)   the role's replica count
``TX_RANK0_HOST``         ``TORCHX_RANK0_HOST``       host name or address of replica 0 of role 0
``TX_PARENT_RUN_ID``      ``TORCHX_PARENT_RUN_ID``    the tracker parent run id (Runner)
``TX_TRACKERS``           ``TORCHX_TRACKERS``         configured tracker names, comma-separated (Runner)
``TX_TRACKER_<N>_CONFIG`` ``TORCHX_TRACKER_<N>_CONFIG`` a tracker's config (Runner)
``TX_CHECKPOINT_DIR``     (none)                      the run's checkpoint location, an fsspec URL or
                                                      a path, the same in every attempt (Runner;
                                                      :mod:`tx.distributed` saves and loads there)
``TX_RESUME_FROM``        (none)                      the handle ``tx run --resume`` continues (Runner)
``TX_SWEEP_ID``           (none)                      in a sweep's trial: the sweep handle (Runner)
``TX_TRIAL_INDEX``        (none)                      in a sweep's trial: its index, 0-based (Runner)
``TX_TRIAL_PARAMS``       (none)                      in a sweep's trial: its parameters as JSON (Runner)
========================  ==========================  ==============================================

Names in parentheses do not exist in TorchX 0.7.0; tx sets them for symmetry. The names
and the table of TorchX aliases are defined once, in :mod:`tx.config.environ`.
``${rank0_env}`` (the :data:`tx.specs.macros.rank0_env` macro) is :data:`RANK0_HOST`.
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional

from tx.config.environ import (
    APP_ID,
    JOB_ID,
    NUM_REPLICAS,
    PARENT_RUN_ID,
    RANK0_HOST,
    REPLICA_ID,
    ROLE_IDX,
    ROLE_NAME,
    TORCHX_NAMES,
    TRACKERS,
    torchx_name,
    tracker_config_var,
)

__all__ = [
    "APP_ID", "JOB_ID", "NUM_REPLICAS", "PARENT_RUN_ID", "RANK0_HOST", "REPLICA_ID", "REQUIRED",
    "ROLE_IDX", "ROLE_NAME", "TORCHX_NAMES", "TRACKERS", "replica_env", "torchx_name",
    "tracker_config_var", "with_torchx_names",
]

#: the variables every replica must have, each also under its TorchX name (the conformance
#: kit checks them all): the scheduler sets them, except ``TX_JOB_ID``, which the Runner
#: puts in every role's env with the ``${app_id}`` macro for the scheduler to fill in
REQUIRED = (APP_ID, JOB_ID, ROLE_NAME, ROLE_IDX, REPLICA_ID, NUM_REPLICAS, RANK0_HOST)


def with_torchx_names(env: Mapping[str, str]) -> Dict[str, str]:
    """A copy of ``env`` where every contract variable is also set under its TorchX name
    (an alias already present in ``env`` is kept: a user's explicit value wins)."""
    out = dict(env)
    for key, value in env.items():
        alias = torchx_name(key)
        if alias is not None and alias not in env:
            out[alias] = value
    return out


def replica_env(
    *,
    app_id: str,
    role_name: str,
    replica_id: str,
    rank0_host: Optional[str] = None,
    role_idx: Optional[int] = None,
    num_replicas: Optional[int] = None,
) -> Dict[str, str]:
    """The contract variables of one replica, under tx's and TorchX's names.

    Values are strings as the replica sees them; a scheduler whose backend supplies a value
    at run time passes what the backend expands there (``"$AWS_BATCH_JOB_NODE_INDEX"``, a
    macro such as ``"${app_id}"``). ``rank0_host=None`` leaves ``TX_RANK0_HOST`` out, for
    backends that export it from their launch script.

    Returns:
        ``{"TX_APP_ID": ..., "TORCHX_APP_ID": ..., "TX_ROLE_NAME": ..., ...}``
    """
    env = {APP_ID: app_id, ROLE_NAME: role_name, REPLICA_ID: str(replica_id)}
    if role_idx is not None:
        env[ROLE_IDX] = str(role_idx)
    if num_replicas is not None:
        env[NUM_REPLICAS] = str(num_replicas)
    if rank0_host is not None:
        env[RANK0_HOST] = rank0_host
    return with_torchx_names(env)
