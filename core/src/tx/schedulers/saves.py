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
from typing import TYPE_CHECKING, List, Optional, Tuple

if TYPE_CHECKING:
    from tx.specs.status import Attempt

__all__ = ["local_path", "newest_save", "read_saved", "what_saved", "with_saves"]

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


#: the phrases :func:`what_saved` writes, as one part of a reason (parts are joined by ``"; "``)
_SAVED = re.compile(r"(?:^|; )saved step (\d+)(?: in (\d+(?:\.\d+)?) s)?(?=;|$)")
_NOT_SAVED = re.compile(r"(?:^|; )no checkpoint saved before the kill; (?:resumed from step (\d+)|starts fresh)(?=;|$)")


def read_saved(reason: str) -> Tuple[Optional[int], Optional[float], Optional[int], bool]:
    """What a preempted attempt's ``reason`` says :func:`what_saved` found, as
    ``(saved step, seconds the save took, step the next attempt resumes from, whether the
    reason says it at all)``: ``saved step 412 in 3.1 s`` is ``(412, 3.1, 412, True)`` (the
    seconds as the reason rounds them: 0.01 s below 1 s, 0.1 s above), ``no checkpoint saved
    before the kill; resumed from step 400`` is ``(None, None, 400, True)``, ``...; starts
    fresh`` ``(None, None, None, True)``, and a reason without either ``(None, None, None, False)``."""
    m = _SAVED.search(reason or "")
    if m:
        return int(m.group(1)), (float(m.group(2)) if m.group(2) else None), int(m.group(1)), True
    m = _NOT_SAVED.search(reason or "")
    if m:
        return None, None, (int(m.group(1)) if m.group(1) else None), True
    return None, None, None, False


def with_saves(attempts: "List[Attempt]") -> "List[Attempt]":
    """``attempts`` (oldest first) with :attr:`~tx.specs.Attempt.saved_step` and
    :attr:`~tx.specs.Attempt.save_seconds` set on each infra attempt whose reason names what
    the job saved (:func:`read_saved`), and :attr:`~tx.specs.Attempt.resumed_step` on the
    attempt after it (the newest complete checkpoint when the preempted attempt ended, which
    the next attempt's :func:`tx.distributed.load_latest_checkpoint` reads). Fields a
    scheduler set already are kept; the list is not changed in place."""
    import attrs  # deferred: attrs is the model's; saves itself is standard library

    out: "List[Attempt]" = []
    resumes: Optional[int] = None
    for a in attempts:
        changes = {}
        if resumes is not None and a.resumed_step is None:
            changes["resumed_step"] = resumes
        resumes = None
        if a.kind is not None and str(a.kind) == "infra":
            step, secs, resumes, said = read_saved(a.reason)
            if said and a.saved_step is None and step is not None:
                changes["saved_step"] = step
                if a.save_seconds is None and secs is not None:
                    changes["save_seconds"] = secs
        out.append(attrs.evolve(a, **changes) if changes else a)
    return out
