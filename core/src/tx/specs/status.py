"""Status of a running app: :class:`AppStatus`, :class:`RoleStatus`, :class:`ReplicaStatus`,
and the app's :class:`Attempt` history with each attempt's :class:`FailureKind`."""
from __future__ import annotations

import enum
import json
import textwrap
import os
from typing import Any, Callable, Dict, List, Optional

import attrs

from tx.specs.api import NONE, AppState, AppStatusError, is_terminal

__all__ = ["AppStatus", "Attempt", "FailureKind", "ReplicaStatus", "RoleStatus", "RootCause"]


#: at most this many characters of an exception message in :attr:`RootCause.text`
_TEXT_MESSAGE_CHARS = 160


@attrs.frozen
class RootCause:
    """Why a replica failed, as far as its output and its TorchElastic error file tell:
    the worker that failed first, its exception and where it was raised, how it ended.
    Made by :func:`tx.schedulers.why.root_cause`; :attr:`text` is the one line schedulers
    put in ``structured_error_msg``.

    Attributes:
        role: the role of the failed replica.
        replica: the replica's index within the role.
        rank: the global rank of the worker that failed first (torchrun's root cause),
            None where unknown (not a torchrun app, or its report was not seen).
        local_rank: that worker's rank on its node, None where unknown.
        exception_type: the exception's type as Python printed it (``RuntimeError``,
            ``torch.OutOfMemoryError``); ``""`` if no exception was found.
        message: the exception's message (may hold several lines); without an exception,
            the last line the failed worker (or replica) wrote; ``""`` if none.
        file: the file the exception was raised at: the innermost frame outside installed
            packages and the standard library (else the innermost frame); ``""`` if unknown.
        line: the line in ``file``, None if unknown.
        exit_code: the failed worker's exit status (negative: killed by that signal), else
            the replica's; None if unknown.
        signal: the signal's name (``SIGKILL``) when the worker was killed by one, else ``""``.
        source: where the exception was read: ``error_file`` (TorchElastic's error file),
            ``report`` (torchrun's ChildFailedError report), ``traceback`` (a traceback in
            the output), ``output`` (only the last line) or ``""`` (nothing but the exit status).
    """

    role: str
    replica: int
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    exception_type: str = ""
    message: str = ""
    file: str = ""
    line: Optional[int] = None
    exit_code: Optional[int] = None
    signal: str = ""
    source: str = ""

    @property
    def status(self) -> str:
        """How the worker ended: ``exit code 1``, ``signal SIGKILL``, or ``""`` if unknown."""
        if self.signal:
            return f"signal {self.signal}"
        if self.exit_code is not None:
            return f"exit code {self.exit_code}" if self.exit_code >= 0 else f"signal {-self.exit_code}"
        return ""

    @property
    def text(self) -> str:
        """One line: ``train/0 rank 1: RuntimeError: CUDA out of memory at train.py:41
        (exit code 1)``; without an exception, the last line written (``train/0: no space
        left (exit code 2)``) or how it ended (``train/0 rank 1: killed by signal SIGKILL``).
        The message is cut to 160 characters and its lines joined with spaces."""
        who = f"{self.role}/{self.replica}" + (f" rank {self.rank}" if self.rank is not None else "")
        msg = " ".join(ln.strip() for ln in self.message.splitlines() if ln.strip())
        if len(msg) > _TEXT_MESSAGE_CHARS:
            msg = msg[: _TEXT_MESSAGE_CHARS - 3] + "..."
        if self.exception_type:
            body = f"{self.exception_type}: {msg}" if msg else self.exception_type
        else:
            body = msg
        if self.file:
            body += f" at {os.path.basename(self.file)}" + (f":{self.line}" if self.line is not None else "")
        status = self.status
        if not body:
            if self.signal or (self.exit_code is not None and self.exit_code < 0):
                return f"{who}: killed by {status}"
            return f"{who}: exited with code {self.exit_code}" if self.exit_code is not None else f"{who}: failed"
        return f"{who}: {body}" + (f" ({status})" if status else "")

    def to_json(self) -> Dict[str, Any]:
        """The fields as a dict, with :attr:`text` added."""
        return {**attrs.asdict(self), "text": self.text}


class FailureKind(str, enum.Enum):
    """Whose failure ended an attempt, the same on every backend.

    ``INFRA``: the infrastructure lost the replicas (Slurm NODE_FAIL, PREEMPTED or a
    requeue by an administrator; a Kubernetes pod evicted; a spot VM reclaimed): retried
    within the run option ``infra_retries`` without spending the roles' ``max_retries``.
    ``USER``: the user's program failed (a non-zero exit status, its own out-of-memory
    kill): retried within ``max_retries``.
    """

    INFRA = "infra"
    USER = "user"

    def __str__(self) -> str:
        return self.value


@attrs.frozen
class Attempt:
    """One attempt of an app (a submission, then one per retry), as the scheduler saw it end.

    Attributes:
        index: 0 for the first attempt, then 1, 2 ... (``num_restarts`` is the last one's).
        state: how it ended (FAILED), or the app's state for the attempt still going.
        kind: whose failure ended it (:class:`FailureKind`); None while it runs or when it
            succeeded.
        reason: the backend's own words for why it ended (``NODE_FAIL``, ``PREEMPTED``,
            ``exit code 3``), "" when the backend does not say.
        retried: whether the scheduler started another attempt after it.
        saved_step: for a preempted attempt, the step of the checkpoint its job saved
            after the warning (``saved step 412`` in ``reason``); None where it saved none
            or tx cannot read the checkpoint location from this host.
        save_seconds: how long that save took, in seconds (as ``reason`` rounds it).
        resumed_step: the step of the checkpoint this attempt resumed from (the newest
            complete one when the previous attempt was preempted); None where it started
            fresh or tx cannot tell.
    """

    index: int
    state: "AppState"
    kind: Optional[FailureKind] = None
    reason: str = ""
    retried: bool = False
    saved_step: Optional[int] = None
    save_seconds: Optional[float] = None
    resumed_step: Optional[int] = None

    @property
    def text(self) -> str:
        """One line: ``#0 FAILED (infra: NODE_FAIL), retried``."""
        why = ": ".join(x for x in (str(self.kind) if self.kind else "", self.reason) if x)
        return f"#{self.index} {self.state}" + (f" ({why})" if why else "") + (", retried" if self.retried else "")

    def to_json(self) -> Dict[str, Any]:
        """The fields as a dict (state and kind as their names)."""
        return {"index": self.index, "state": str(self.state),
                "kind": str(self.kind) if self.kind else None, "reason": self.reason, "retried": self.retried,
                "saved_step": self.saved_step, "save_seconds": self.save_seconds, "resumed_step": self.resumed_step}


@attrs.define
class ReplicaStatus:
    """One replica: ``id`` is its index within the role (node rank, not worker rank);
    ``exit_code`` is its last exit status (negative: killed by that signal) where known;
    ``structured_error_msg`` holds why it failed (one line where the scheduler could tell,
    the tail of its stderr or a torchelastic error JSON otherwise); ``root_cause`` the
    same, field by field, where the scheduler read it (:mod:`tx.schedulers.why`)."""

    id: int
    state: AppState
    role: str
    hostname: str = ""
    structured_error_msg: str = NONE
    exit_code: Optional[int] = None
    root_cause: Optional[RootCause] = None


@attrs.define
class RoleStatus:
    """The replicas of one role."""

    role: str
    replicas: List[ReplicaStatus] = attrs.field(factory=list)

    def to_json(self) -> Dict[str, Any]:
        return {
            "role": self.role,
            "replicas": [
                {**attrs.asdict(r), "state": str(r.state),
                 "root_cause": r.root_cause.to_json() if r.root_cause is not None else None}
                for r in self.replicas
            ],
        }


@attrs.define
class AppStatus:
    """The state of an app, as returned by ``Runner.status``.

    Attributes:
        state: the app's :class:`AppState`.
        num_restarts: how many times replicas were restarted (-1: unknown).
        msg: a human-readable message from the scheduler.
        structured_error_msg: the error of the failed replica that is the app's cause, if
            any: the first that failed, unless it only lost a peer that failed within 10 s
            of it (:func:`tx.schedulers.why.first_cause`).
        ui_url: where to see the app (file:// for local apps, a console URL for clouds).
        roles: per-role replica statuses.
        root_cause: that replica's :class:`RootCause`, where the scheduler
            read one (its ``text`` is then ``structured_error_msg``).
        attempts: every attempt with why it ended (:class:`Attempt`), oldest first; empty
            where the scheduler keeps no history.
    """

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: Optional[str] = None
    roles: List[RoleStatus] = attrs.field(factory=list)
    root_cause: Optional[RootCause] = None
    attempts: List[Attempt] = attrs.field(factory=list)

    def is_terminal(self) -> bool:
        return is_terminal(self.state)

    def raise_for_status(self) -> None:
        """Raise :class:`AppStatusError` unless the app SUCCEEDED."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"app did not succeed: {self.format()}")

    def to_json(self, filter_roles: Optional[List[str]] = None) -> Dict[str, Any]:
        roles = [r for r in self.roles if not filter_roles or r.role in filter_roles]
        return {
            "state": str(self.state),
            "num_restarts": self.num_restarts,
            "roles": [r.to_json() for r in roles],
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "root_cause": self.root_cause.to_json() if self.root_cause is not None else None,
            "url": self.ui_url,
            "attempts": [a.to_json() for a in self.attempts],
        }

    def _format_replica(self, r: ReplicaStatus, state: Callable[[str], str] = str) -> str:
        """One replica's line (and its error, indented); ``state`` renders the state's
        name (``tx status`` colours it)."""
        mark = "*" if r.id == 0 else " "
        line = f"  {mark}{r.role}[{r.id}]:{state(r.state.name)}"
        if r.exit_code is not None and r.state in (AppState.FAILED, AppState.CANCELLED):
            line += f" (exit code {r.exit_code})" if r.exit_code >= 0 else f" (signal {-r.exit_code})"
        if r.hostname:
            line += f" on {r.hostname}"
        if r.structured_error_msg != NONE and r.state == AppState.FAILED:
            line += "\n" + textwrap.indent(_render_error(r.structured_error_msg), "      ")
        return line

    def format(self, filter_roles: Optional[List[str]] = None) -> str:
        """Render the status as TorchX's ``torchx status`` text block: state, restarts,
        each replica as ``  *role[0]:STATE`` (``*`` marks replica 0), message, error, URL;
        then, where an attempt failed, ``  Attempts:`` with one :attr:`Attempt.text` line each."""
        lines = []
        for rs in self.roles:
            if filter_roles and rs.role not in filter_roles:
                continue
            for r in sorted(rs.replicas, key=lambda x: x.id):
                lines.append(self._format_replica(r))
        roles = "\n".join(lines)
        err = self.structured_error_msg
        attempts = self._attempts_block()
        return (
            "AppStatus:\n"
            f"  State: {self.state}\n"
            f"  Num Restarts: {self.num_restarts}\n"
            f"  Roles:\n{roles}\n"
            f"  Msg: {self.msg}\n"
            f"  Structured Error Msg: {_render_error(err) if err != NONE else err}\n"
            f"  UI URL: {self.ui_url}\n"
            + attempts
        )

    def _attempts_block(self) -> str:
        """``  Attempts:`` and one :attr:`Attempt.text` line each, only where an attempt
        failed (a run without failures reads as before); else ``""``."""
        if not any(a.kind is not None for a in self.attempts):
            return ""
        return "  Attempts:\n" + "".join(f"    {a.text}\n" for a in self.attempts)

    def __repr__(self) -> str:
        import yaml  # deferred: PyYAML only to print a status

        d = self.to_json()
        return yaml.safe_dump({"AppStatus": d}, sort_keys=False)


def _render_error(msg: str) -> str:
    """Render a torchelastic error JSON (``{"message": {...}}``) readably; other text as is."""
    try:
        data = json.loads(msg)
    except (ValueError, TypeError):
        return msg
    if not isinstance(data, dict) or "message" not in data:
        return msg
    m = data["message"]
    if isinstance(m, dict):
        extra = m.get("extraInfo", {}) or {}
        text = m.get("message", "")
        return (
            f"exitcode: {data.get('exitcode', extra.get('exitcode', '?'))}\n"
            f"timestamp: {extra.get('timestamp', '?')}\n"
            f"error: {textwrap.fill(str(text), 80)}"
        )
    return str(m)
