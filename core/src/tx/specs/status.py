"""Status of a running app: :class:`AppStatus`, :class:`RoleStatus`, :class:`ReplicaStatus`."""
from __future__ import annotations

import json
import textwrap
from typing import Any, Dict, List, Optional

import attrs

from tx.specs.api import NONE, AppState, AppStatusError, is_terminal

__all__ = ["AppStatus", "ReplicaStatus", "RoleStatus"]


@attrs.define
class ReplicaStatus:
    """One replica: ``id`` is its index within the role (node rank, not worker rank);
    ``exit_code`` is its last exit status (negative: killed by that signal) where known;
    ``structured_error_msg`` holds the tail of its stderr or a torchelastic error JSON."""

    id: int
    state: AppState
    role: str
    hostname: str = ""
    structured_error_msg: str = NONE
    exit_code: Optional[int] = None


@attrs.define
class RoleStatus:
    """The replicas of one role."""

    role: str
    replicas: List[ReplicaStatus] = attrs.field(factory=list)

    def to_json(self) -> Dict[str, Any]:
        return {
            "role": self.role,
            "replicas": [{**attrs.asdict(r), "state": str(r.state)} for r in self.replicas],
        }


@attrs.define
class AppStatus:
    """The state of an app, as returned by ``Runner.status``.

    Attributes:
        state: the app's :class:`AppState`.
        num_restarts: how many times replicas were restarted (-1: unknown).
        msg: a human-readable message from the scheduler.
        structured_error_msg: the error of the first failed replica, if any.
        ui_url: where to see the app (file:// for local apps, a console URL for clouds).
        roles: per-role replica statuses.
    """

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: Optional[str] = None
    roles: List[RoleStatus] = attrs.field(factory=list)

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
            "url": self.ui_url,
        }

    def _format_replica(self, r: ReplicaStatus) -> str:
        mark = "*" if r.id == 0 else " "
        line = f"  {mark}{r.role}[{r.id}]:{r.state}"
        if r.exit_code is not None and r.state in (AppState.FAILED, AppState.CANCELLED):
            line += f" (exit code {r.exit_code})" if r.exit_code >= 0 else f" (signal {-r.exit_code})"
        if r.hostname:
            line += f" on {r.hostname}"
        if r.structured_error_msg != NONE and r.state == AppState.FAILED:
            line += "\n" + textwrap.indent(_render_error(r.structured_error_msg), "      ")
        return line

    def format(self, filter_roles: Optional[List[str]] = None) -> str:
        """Render the status as TorchX's ``torchx status`` text block: state, restarts,
        each replica as ``  *role[0]:STATE`` (``*`` marks replica 0), message, error, URL."""
        lines = []
        for rs in self.roles:
            if filter_roles and rs.role not in filter_roles:
                continue
            for r in sorted(rs.replicas, key=lambda x: x.id):
                lines.append(self._format_replica(r))
        roles = "\n".join(lines)
        err = self.structured_error_msg
        return (
            "AppStatus:\n"
            f"  State: {self.state}\n"
            f"  Num Restarts: {self.num_restarts}\n"
            f"  Roles:\n{roles}\n"
            f"  Msg: {self.msg}\n"
            f"  Structured Error Msg: {_render_error(err) if err != NONE else err}\n"
            f"  UI URL: {self.ui_url}\n"
        )

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
