"""What a warned job saved: the newest complete checkpoint under a run's ``TX_CHECKPOINT_DIR``,
read from the completion markers :func:`tx.distributed.save_checkpoint` writes
(``step-<9 digits>/.tx-complete``, JSON ``{"step", "seconds", "completed"}``: the step, how
long the save took, when it completed in seconds since the epoch). For the schedulers'
records of preempted attempts (docs/recovery.md, "Preemption"). Standard library only.
"""
from __future__ import annotations

import json
import os
import re
from typing import Optional, Tuple

__all__ = ["local_path", "newest_save", "what_saved"]

#: :data:`tx.distributed.CHECKPOINT_COMPLETE` (the same name: core/tests checks it)
COMPLETE = ".tx-complete"
_STEP = re.compile(r"^step-(\d+)$")


def local_path(location: Optional[str]) -> Optional[str]:
    """The directory of a checkpoint ``location`` this host can read (a path or a
    ``file://`` URL), else None (unset, or an object store such as ``s3://``)."""
    if not location:
        return None
    if location.startswith("file://"):
        return location[len("file://"):]
    return None if "://" in location else location


def newest_save(location: Optional[str], until: float = float("inf")
                ) -> Optional[Tuple[int, Optional[float], Optional[float]]]:
    """The newest complete checkpoint under a local ``location`` that completed by ``until``
    (seconds since the epoch; a later attempt's saves are passed over; a marker without the
    time counts) as ``(step, seconds the save took, when it completed)`` (None where the
    marker predates those fields), or None where there is none or ``location`` is not local."""
    root = local_path(location)
    if root is None:
        return None
    try:
        names = os.listdir(root)
    except OSError:
        return None
    for step in sorted((int(m.group(1)) for m in map(_STEP.match, names) if m), reverse=True):
        try:
            with open(os.path.join(root, f"step-{step:09d}", COMPLETE), encoding="utf-8") as f:
                data = json.loads(f.read())
        except OSError:
            continue
        except ValueError:
            return step, None, None
        if not isinstance(data, dict):
            return step, None, None
        secs, done = data.get("seconds"), data.get("completed")
        if isinstance(done, (int, float)) and done > until:
            continue
        return (step, float(secs) if isinstance(secs, (int, float)) else None,
                float(done) if isinstance(done, (int, float)) else None)
    return None


def what_saved(location: Optional[str], since: float, until: float = float("inf")) -> str:
    """What the job saved between the warning at ``since`` and the end of the attempt at
    ``until`` (seconds since the epoch), for the attempt's reason: ``saved step 412 in 3.1 s``,
    ``no checkpoint saved before the kill; resumed from step 400`` (or ``...; starts fresh``);
    "" where ``location`` is unset or not a path tx can read from this host."""
    if local_path(location) is None:
        return ""
    found = newest_save(location, until)
    if found is None:
        return "no checkpoint saved before the kill; starts fresh"
    step, secs, done = found
    if done is not None and done >= since - 0.001:  # the marker rounds to milliseconds
        return f"saved step {step}" + (f" in {secs:.{1 if secs >= 1 else 2}f} s" if secs is not None else "")
    return f"no checkpoint saved before the kill; resumed from step {step}"
