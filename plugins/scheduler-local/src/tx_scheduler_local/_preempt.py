"""Preemption on the local schedulers (docs/recovery.md). Standard library only.

A signal tx did not send is the warning: SIGTERM to the supervisor (a host shutting down),
or the warning signal (``TX_PREEMPT_SIGNAL``, SIGTERM by default) to a replica. A replica
learns that it was warned through ``tx.distributed.preempted`` (whose handler appends a
line to the replica's ``TX_PREEMPT_NOTE`` file) or dies of the signal; the supervisor then
delivers the warning to every replica, kills what is left after ``preempt_grace`` seconds,
and records the attempt as an infrastructure failure naming what the job saved: the newest
complete checkpoint in ``TX_CHECKPOINT_DIR`` (its completion marker holds the step, the
save's duration and when it completed).

This module is the pure part (the replicas' environment, the notes), shared with the request
builder; :mod:`._preempting` is the supervisor's side; what was saved: :mod:`tx.schedulers.saves`.
"""
from __future__ import annotations

import os
import signal
from typing import Dict, Optional

#: the file, in each replica's directory, that the job's warning handler appends to
NOTE = "preempt.note"
#: the environment the replicas get
GRACE_ENV, SIGNAL_ENV, NOTE_ENV = "TX_PREEMPT_GRACE", "TX_PREEMPT_SIGNAL", "TX_PREEMPT_NOTE"
_CHECKPOINT_ENV = "TX_CHECKPOINT_DIR"


def env(replica_dir: str, grace: float) -> Dict[str, str]:
    """The preemption environment of a replica whose directory is ``replica_dir``."""
    return {GRACE_ENV: f"{grace:g}", NOTE_ENV: os.path.join(replica_dir, NOTE)}


def warning_signal(replica_env: Dict[str, str]) -> int:
    """The signal that warns this replica: its ``TX_PREEMPT_SIGNAL``, else SIGTERM (a value
    that names no signal: SIGTERM; the job's ``preempted()`` reports the bad value)."""
    raw = (replica_env.get(SIGNAL_ENV) or "").strip().upper()
    if not raw:
        return int(signal.SIGTERM)
    try:
        return int(signal.Signals(int(raw)) if raw.isdigit() else signal.Signals[raw if raw.startswith("SIG")
                                                                                     else "SIG" + raw])
    except (KeyError, ValueError):
        return int(signal.SIGTERM)


def clear_note(replica_dir: str) -> None:
    """Forget an earlier attempt's warning (before the replica starts again)."""
    try:
        os.unlink(os.path.join(replica_dir, NOTE))
    except OSError:
        pass


def warned_at(replica_dir: str) -> Optional[float]:
    """When the replica's job recorded the warning (seconds since the epoch), or None."""
    try:
        with open(os.path.join(replica_dir, NOTE), encoding="utf-8") as f:
            first = f.readline().split()
        return float(first[0]) if first else None
    except (OSError, ValueError, IndexError):
        return None


def checkpoint_location(replica_env: Dict[str, str], base_env: Dict[str, str]) -> Optional[str]:
    """The replica's ``TX_CHECKPOINT_DIR`` (its own env first, then the app's)."""
    return replica_env.get(_CHECKPOINT_ENV) or base_env.get(_CHECKPOINT_ENV) or None
