"""tx's environment variables, with their TorchX aliases, in one table.

Two kinds of variables live here, each under one name:

* settings tx reads: ``TX_STATE_DIR`` (:func:`state_dir`), ``TX_TRACKERS`` and
  ``TX_TRACKER_<NAME>_CONFIG`` (:mod:`tx.config.trackers`), ``TX_PARENT_RUN_ID``,
  ``TX_<RUN OPTION>`` (:func:`tx.config.run_options.env_run_opts`);
* the replica environment contract every scheduler sets inside a replica (``TX_APP_ID``,
  ``TX_JOB_ID``, ...; built by :mod:`tx.schedulers.env`).

Where TorchX 0.7.0 has a name for the same thing (``TORCHX_JOB_ID``, ``TORCHX_REPLICA_IDX``,
...), :data:`TORCHX_NAMES` maps tx's name to it: tx sets both in replicas, and reads
TorchX's where tx's is unset (:func:`getenv`). Standard library only: a replica's
supervisor imports this.
"""
from __future__ import annotations

import os
from typing import Dict, Mapping, Optional

__all__ = [
    "APP_ID", "CHECKPOINT_DIR", "JOB_ID", "NUM_REPLICAS", "PARENT_RUN_ID", "RANK0_HOST", "REPLICA_ID", "ROLE_IDX",
    "RESUME_FROM", "ROLE_NAME", "STATE_DIR", "FAILOVER_PAUSE", "failover_pause", "SWEEP_ID", "TRIAL_INDEX", "TRIAL_PARAMS", "TORCHX_NAMES", "TRACKERS", "getenv", "state_dir", "torchx_name",
    "tracker_config_var",
]

# the replica environment contract (tx.schedulers.env documents each)
APP_ID = "TX_APP_ID"
JOB_ID = "TX_JOB_ID"
ROLE_NAME = "TX_ROLE_NAME"
ROLE_IDX = "TX_ROLE_IDX"
REPLICA_ID = "TX_REPLICA_ID"
NUM_REPLICAS = "TX_NUM_REPLICAS"
RANK0_HOST = "TX_RANK0_HOST"
# settings the Runner passes to every replica (trackers)
PARENT_RUN_ID = "TX_PARENT_RUN_ID"
TRACKERS = "TX_TRACKERS"
# the trial of a sweep, set by the Runner in every replica of every trial (no TorchX name)
SWEEP_ID = "TX_SWEEP_ID"
TRIAL_INDEX = "TX_TRIAL_INDEX"
TRIAL_PARAMS = "TX_TRIAL_PARAMS"
#: the run's checkpoint location, the same in every attempt (the Runner sets it; docs/recovery.md)
CHECKPOINT_DIR = "TX_CHECKPOINT_DIR"
#: the handle of the app or run whose checkpoint location this run continues
#: (``tx run --resume HANDLE``; unset in a fresh run: the Runner sets it; docs/recovery.md)
RESUME_FROM = "TX_RESUME_FROM"
#: where tx keeps the state of apps it launched (local apps, the Slurm job index)
STATE_DIR = "TX_STATE_DIR"
#: fault tests only: a failover step stops 60 s at this point (``after_cancel``,
#: ``after_submit``: submitted, not yet recorded) so that a test can kill it there (tx.runner.failover)
FAILOVER_PAUSE = "TX_FAILOVER_PAUSE"

#: tx name -> TorchX name, for every variable with a fixed name that TorchX also has (or,
#: in :mod:`tx.schedulers.env`'s table, that tx sets under a TorchX-style name for symmetry)
TORCHX_NAMES: Dict[str, str] = {
    APP_ID: "TORCHX_APP_ID",
    JOB_ID: "TORCHX_JOB_ID",
    ROLE_NAME: "TORCHX_ROLE_NAME",
    ROLE_IDX: "TORCHX_ROLE_IDX",
    REPLICA_ID: "TORCHX_REPLICA_IDX",
    NUM_REPLICAS: "TORCHX_NUM_REPLICAS",
    RANK0_HOST: "TORCHX_RANK0_HOST",
    PARENT_RUN_ID: "TORCHX_PARENT_RUN_ID",
    TRACKERS: "TORCHX_TRACKERS",
}


def tracker_config_var(name: str) -> str:
    """``TX_TRACKER_<NAME>_CONFIG``: the variable that holds tracker ``name``'s config
    (TorchX's ``TORCHX_TRACKER_<NAME>_CONFIG`` is its alias)."""
    return f"TX_TRACKER_{name.upper()}_CONFIG"


def torchx_name(tx_name: str) -> Optional[str]:
    """TorchX's name of a ``TX_*`` variable (``TX_REPLICA_ID`` -> ``TORCHX_REPLICA_IDX``,
    ``TX_TRACKER_X_CONFIG`` -> ``TORCHX_TRACKER_X_CONFIG``), or None for a variable without one."""
    if tx_name in TORCHX_NAMES:
        return TORCHX_NAMES[tx_name]
    if tx_name.startswith("TX_TRACKER_") and tx_name.endswith("_CONFIG"):
        return "TORCHX_" + tx_name[len("TX_"):]
    return None


def getenv(tx_name: str, environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The value of ``tx_name`` in ``environ`` (default ``os.environ``), else of its TorchX
    alias (:func:`torchx_name`), else None. A variable set to the empty string is set."""
    env = os.environ if environ is None else environ
    if tx_name in env:
        return env[tx_name]
    alias = torchx_name(tx_name)
    return env.get(alias) if alias else None


def state_dir(environ: Optional[Mapping[str, str]] = None) -> str:
    """Where tx keeps state: ``$TX_STATE_DIR``, else ``${XDG_STATE_HOME:-~/.local/state}/tx``
    (the XDG base directory rule). An absolute path; not created here."""
    env = os.environ if environ is None else environ
    explicit = env.get(STATE_DIR)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(os.path.abspath(base), "tx")


def failover_pause(environ: Optional[Mapping[str, str]] = None) -> str:
    """``$TX_FAILOVER_PAUSE`` (fault tests: where a failover step stops), "" when unset."""
    return (os.environ if environ is None else environ).get(FAILOVER_PAUSE, "")
