"""Preemption on the local schedulers (docs/recovery.md). Standard library only.

A signal tx did not send is the warning: SIGTERM to the supervisor (a host shutting down),
or the warning signal (``TX_PREEMPT_SIGNAL``, SIGTERM by default) to a replica. A replica
learns that it was warned through ``tx.distributed.preempted`` (whose handler appends a
line to the replica's ``TX_PREEMPT_NOTE`` file) or dies of the signal; the supervisor then
delivers the warning to every replica, kills what is left after ``preempt_grace`` seconds,
and records the attempt as an infrastructure failure naming what the job saved: the newest
complete checkpoint in ``TX_CHECKPOINT_DIR`` (its completion marker holds the step, the
save's duration and when it completed).

This module is the pure part (the replicas' environment, the notes, what was saved), shared
with the request builder; :mod:`._preempting` is the supervisor's side.
"""
from __future__ import annotations

import json
import os
import re
import signal
from typing import Dict, Optional, Tuple

#: the file, in each replica's directory, that the job's warning handler appends to
NOTE = "preempt.note"
#: the environment the replicas get
GRACE_ENV, SIGNAL_ENV, NOTE_ENV = "TX_PREEMPT_GRACE", "TX_PREEMPT_SIGNAL", "TX_PREEMPT_NOTE"
_CHECKPOINT_ENV = "TX_CHECKPOINT_DIR"
_COMPLETE = ".tx-complete"
_STEP = re.compile(r"^step-(\d+)$")


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


def _local(location: Optional[str]) -> Optional[str]:
    if not location:
        return None
    if location.startswith("file://"):
        return location[len("file://"):]
    return None if "://" in location else location


def newest_save(location: Optional[str]) -> Optional[Tuple[int, Optional[float], Optional[float]]]:
    """The newest complete checkpoint under a local ``location`` as ``(step, seconds the
    save took, when it completed)`` (None where the marker predates them), or None."""
    root = _local(location)
    if root is None:
        return None
    try:
        names = os.listdir(root)
    except OSError:
        return None
    for step in sorted((int(m.group(1)) for m in map(_STEP.match, names) if m), reverse=True):
        try:
            with open(os.path.join(root, f"step-{step:09d}", _COMPLETE), encoding="utf-8") as f:
                text = f.read()
        except OSError:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            return step, None, None
        if isinstance(data, dict):
            secs, done = data.get("seconds"), data.get("completed")
            return step, float(secs) if isinstance(secs, (int, float)) else None, \
                float(done) if isinstance(done, (int, float)) else None
        return step, None, None
    return None


def what_saved(location: Optional[str], since: float) -> str:
    """What the job saved after the warning of ``since`` (seconds since the epoch), for the
    attempt's reason: ``saved step 412 in 3.1 s``, ``no checkpoint saved before the kill;
    resumed from step 400`` (or ``...; starts fresh``); "" where the location is not a
    local path (tx cannot read it from here) or is unset."""
    if _local(location) is None:
        return ""
    found = newest_save(location)
    if found is None:
        return "no checkpoint saved before the kill; starts fresh"
    step, secs, done = found
    if done is not None and done >= since - 0.001:  # one host's clock; the marker rounds to ms
        return f"saved step {step}" + (f" in {secs:.{1 if secs >= 1 else 2}f} s" if secs is not None else "")
    return f"no checkpoint saved before the kill; resumed from step {step}"


def checkpoint_location(replica_env: Dict[str, str], base_env: Dict[str, str]) -> Optional[str]:
    """The replica's ``TX_CHECKPOINT_DIR`` (its own env first, then the app's)."""
    return replica_env.get(_CHECKPOINT_ENV) or base_env.get(_CHECKPOINT_ENV) or None
