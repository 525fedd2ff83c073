"""What ``tx status``, ``tx list`` and a dry run show of a sweep: each trial's status, the
sweep's state and counts, its dry run, and a listing's trials folded into one row per sweep
(:func:`collapse_listed`). Nothing here calls a scheduler; :mod:`tx.runner.sweep` fills them."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import attrs

from tx.durations import format_duration
from tx.runner._sweep_records import SweepRecord
from tx.schedulers.api import ListAppResponse
from tx.specs.api import AppDryRunInfo, AppState, is_terminal
from tx.specs.sweep import format_value

__all__ = ["SweepDryRunInfo", "SweepStatus", "TrialStatus", "collapse_listed"]


@attrs.frozen
class TrialStatus:
    """A trial as ``tx status`` shows it.

    Attributes:
        index, params: the trial's.
        state: its last attempt's state (UNSUBMITTED: not submitted yet; CANCELLED: the
            sweep was cancelled before it was submitted).
        app_handle: its last attempt's app handle (None before it is submitted).
        attempts: how many times it was submitted.
        duration: seconds its last attempt ran, from the start and end times its
            scheduler recorded (where it records none: from its submission until tx first
            saw it end); until now while it runs; None before it is submitted.
        why: why it failed (the scheduler's failed replica that is its cause), else "".
    """

    index: int
    params: Dict[str, Any]
    state: AppState
    app_handle: Optional[str]
    attempts: int
    duration: Optional[float]
    why: str = ""


@attrs.frozen
class SweepStatus:
    """A sweep's trials, and counts by state."""

    sweep_handle: str
    trials: List[TrialStatus]
    cancelled: bool = False

    def counts(self) -> Dict[str, int]:
        """State name -> how many trials are in it (only states that occur)."""
        out: Dict[str, int] = {}
        for t in self.trials:
            out[t.state.name] = out.get(t.state.name, 0) + 1
        return out

    @property
    def state(self) -> AppState:
        """RUNNING while a trial is not terminal; else FAILED if one failed, CANCELLED if
        one was cancelled, else SUCCEEDED."""
        states = {t.state for t in self.trials}
        if any(not is_terminal(s) for s in states) and not (self.cancelled and states <= {
                AppState.UNSUBMITTED, *(s for s in states if is_terminal(s))}):
            return AppState.RUNNING if AppState.RUNNING in states else AppState.PENDING
        for s in (AppState.FAILED, AppState.CANCELLED):
            if s in states:
                return s
        return AppState.SUCCEEDED if states <= {AppState.SUCCEEDED} else AppState.CANCELLED

    def format(self) -> str:
        """The trial table: index, params, state, attempts, duration, why failed."""
        rows = [("TRIAL", "PARAMS", "STATE", "TRIES", "DURATION", "WHY FAILED")]
        for t in self.trials:
            rows.append((str(t.index), _params_text(t.params), t.state.name, str(t.attempts),
                         format_duration(t.duration), t.why or ""))
        counts = ", ".join(f"{n} {s.lower()}" for s, n in self.counts().items())
        head = f"sweep {self.sweep_handle}: {self.state.name} ({counts})\n"
        return head + _table(rows)

    def to_json(self) -> Dict[str, Any]:
        return {"sweep_handle": self.sweep_handle, "state": self.state.name, "counts": self.counts(),
                "trials": [{**attrs.asdict(t), "state": t.state.name,
                            "duration": None if t.duration is None else round(t.duration, 3)}
                           for t in self.trials]}


@attrs.define
class SweepDryRunInfo:
    """What :meth:`tx.runner.Runner.run_sweep` would submit: the trials and the request(s).

    Attributes:
        record: the sweep's record (no attempts yet).
        trials: each trial's own dry run, in trial order.
        native: the backend's one array request, or None (one request per trial).
        not_native: why there is no array request (the scheduler's words), else "".
    """

    record: SweepRecord
    trials: List[AppDryRunInfo[Any]]
    native: Optional[AppDryRunInfo[Any]] = None
    not_native: str = ""

    @property
    def sweep_handle(self) -> str:
        return self.record.handle

    def trial_table(self) -> str:
        rows = [("TRIAL", "PARAMS")] + [(str(t.index), _params_text(t.params)) for t in self.record.trials]
        return _table(rows)

    def __str__(self) -> str:
        n = len(self.trials)
        bound = f", at most {self.record.max_parallel} at once" if self.record.max_parallel else ""
        if self.native is not None:
            head = f"=== {self.record.scheduler}: one native array request for {n} trials{bound} ===\n"
            body = str(self.native)
        else:
            why = self.not_native or "no native array for this app on this scheduler"
            head = f"=== {self.record.scheduler}: {n} requests, one per trial{bound} ({why}); trial 0's: ===\n"
            body = str(self.trials[0])
        return f"{head}{body}\n=== TRIALS ({n}) ===\n{self.trial_table()}"


def _params_text(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n" for r in rows)


def collapse_listed(apps: Sequence[Any], records: Sequence[SweepRecord]) -> List[Any]:
    """``apps`` (a scheduler's :class:`tx.schedulers.ListAppResponse` list, with handles)
    with the trials of each sweep in ``records`` replaced by one row for the sweep: its
    handle, its state (as :attr:`SweepStatus.state` from the listed states), its name with
    the trial counts by state, and when it was submitted. No scheduler call: the listed
    states are used (a trial not listed counts as UNKNOWN, or UNSUBMITTED/CANCELLED while
    pending)."""
    by_id = {a.app_id: a for a in apps}
    taken = set()
    rows = []
    for rec in records:
        trials = []
        for t in rec.trials:
            if t.pending or not t.attempts:
                state = AppState.CANCELLED if rec.cancelled or t.cancelled else AppState.UNSUBMITTED
            else:
                listed = by_id.get(t.attempts[-1])
                state = listed.state if listed is not None else AppState.UNKNOWN
            taken.update(t.attempts)
            trials.append(TrialStatus(t.index, t.params, state, None, len(t.attempts), None))
        status = SweepStatus(rec.handle, trials, rec.cancelled)
        counts = ", ".join(f"{n} {s.lower()}" for s, n in status.counts().items())
        rows.append(ListAppResponse(app_id=rec.sweep_id, state=status.state, app_handle=rec.handle,
                                    name=f"{rec.name} [sweep of {len(trials)}: {counts}]", submitted=rec.created))
    return rows + [a for a in apps if a.app_id not in taken]

