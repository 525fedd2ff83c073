"""The attempts of an LSF app and why each ended (:class:`tx.specs.Attempt`).

Each replica's script records its job's runs in ``<app id>-<role>-<k>.attempts`` (see
:mod:`tx_scheduler_lsf.request`): ``<epoch s> run`` when a run starts, ``<epoch s> user
<status>`` when the program failed and runs again (``max_retries``), ``<epoch s> infra
requeued|host`` when LSF ran the job again (an administrator's ``brequeue``; a host failure
of a rerunnable job): an infrastructure failure (``infra_retries``), and ``<epoch s>
exhausted`` when one infrastructure failure too many failed the job. The app's attempts are
the failures of all its replicas in time order, then the attempt that is going or ended.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from tx.schedulers import signal_text
from tx.specs import AppState, Attempt, FailureKind

__all__ = ["EXHAUSTED", "INFRA_WORDS", "Event", "build_attempts", "read_attempts", "runs"]

#: why LSF ran a job again, by the word the script recorded
INFRA_WORDS: Dict[str, str] = {
    "requeued": "requeued by an administrator (brequeue)",
    "host": "LSF ran the job again after its host failed",
}
#: the reason of the attempt that found infra_retries spent
EXHAUSTED = "infra_retries exhausted: the job failed without running the program again"

#: one line of an attempts file: (epoch seconds, what, detail)
Event = Tuple[float, str, str]


def read_attempts(path: str) -> List[Event]:
    """The events of a replica's attempts file, in the order written; [] where it is
    missing or unreadable. Malformed lines are skipped."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out: List[Event] = []
    for line in lines:
        words = line.split()
        if len(words) < 2 or not words[0].isdigit() or words[1] not in ("run", "user", "infra", "exhausted"):
            continue
        out.append((float(words[0]), words[1], " ".join(words[2:])))
    return out


def runs(events: List[Event]) -> int:
    """How many runs of the job started."""
    return sum(1 for _, what, _ in events if what == "run")


def build_attempts(events: Dict[str, List[Event]], app_state: AppState,
                   final: Optional[Tuple[FailureKind, str]] = None) -> List[Attempt]:
    """Every attempt of an app, oldest first.

    Args:
        events: each replica's events (:func:`read_attempts`), by its label (``train[0]``).
        app_state: the app's state now (that of the last attempt).
        final: whose failure ended the app and why, where it FAILED (None: not known;
            a replica that found infra_retries spent decides it).
    """
    failures = sorted((when, who, what, detail) for who, evs in events.items()
                      for when, what, detail in evs if what in ("user", "infra"))
    attempts = []
    for i, (_, who, what, detail) in enumerate(failures):
        if what == "user":
            status = int(detail) if detail.lstrip("-").isdigit() else None
            attempts.append(Attempt(i, AppState.FAILED, FailureKind.USER,
                                    f"{who}: " + (signal_text(status) if status is not None else "failed"),
                                    retried=True))
        else:
            attempts.append(Attempt(i, AppState.FAILED, FailureKind.INFRA,
                                    f"{who}: {INFRA_WORDS.get(detail, INFRA_WORDS['host'])}", retried=True))
    kind: Optional[FailureKind] = None
    reason = ""
    if app_state == AppState.FAILED:
        exhausted = sorted(who for who, evs in events.items() if any(what == "exhausted" for _, what, _ in evs))
        if exhausted:
            kind, reason = FailureKind.INFRA, f"{exhausted[0]}: {EXHAUSTED}"
        elif final is not None:
            kind, reason = final
    attempts.append(Attempt(len(failures), app_state, kind, reason))
    return attempts
