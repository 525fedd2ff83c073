"""Which checkpoint location each app launched from this host was given, by app handle:
``<state_dir>/checkpoints.d/<scheduler>/<session>/<app_id>.json`` (``{"handle", "checkpoint_dir"}``),
written when the Runner schedules the app. ``tx run --resume HANDLE`` reads the location
from the app's AppDef where its scheduler describes the env (local schedulers, failover
runs), else from this record (Slurm, Kubernetes ... rebuild roles without their env), also
after the app itself was forgotten (``tx gc``). Never derived from a name."""
from __future__ import annotations

import json
import os
from typing import Dict, Optional

from tx.config.environ import CHECKPOINT_DIR, RESUME_FROM, state_dir
from tx.config.recovery import percent_encode
from tx.log import get_logger
from tx.runner._records import write_json
from tx.specs.api import AppDef
from tx.specs.handles import parse_app_handle

__all__ = ["record", "recorded", "resume_env"]


def _path(handle: str) -> str:
    scheduler, session, app_id = parse_app_handle(handle)
    return os.path.join(state_dir(), "checkpoints.d", *(percent_encode(p) for p in (scheduler, session, app_id))) \
        + ".json"


def _location(app: Optional[AppDef]) -> Optional[str]:
    return next((r.env[CHECKPOINT_DIR] for r in app.roles if r.env.get(CHECKPOINT_DIR)), None) if app else None


def record(handle: str, app: AppDef) -> None:
    """Remember the ``TX_CHECKPOINT_DIR`` of the app ``handle`` (as submitted: ``app``), if
    it has one; a failure to write is logged, never raised (the app is running already)."""
    location = _location(app)
    if not location:
        return
    try:
        write_json(_path(handle), {"handle": handle, "checkpoint_dir": location})
    except (OSError, ValueError) as e:
        get_logger(__name__).warning(f"could not record the checkpoint location of {handle}: {e}")


def recorded(handle: str) -> Optional[str]:
    """The location :func:`record` kept for ``handle``, or None.

    Raises:
        tx.specs.MalformedAppHandleException: ``handle`` is not an app handle.
    """
    try:
        with open(_path(handle), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    value = data.get("checkpoint_dir") if isinstance(data, dict) and data.get("handle") == handle else None
    return value if isinstance(value, str) and value else None


def resume_env(handle: str, app: Optional[AppDef]) -> Dict[str, str]:
    """The env of a run that continues the checkpoints of ``handle`` (``tx run --resume``):
    the ``TX_CHECKPOINT_DIR`` of its AppDef ``app`` (``Runner.describe``; None where there is
    none), else of :func:`recorded`; and ``TX_RESUME_FROM`` = ``handle``.

    Raises:
        ValueError: neither has a location (one line for users).
    """
    location = _location(app) or recorded(handle)
    if location is None:
        if app is None:
            raise ValueError(f"cannot resume {handle}: no such app or run (tx list shows them)")
        raise ValueError(f"cannot resume {handle}: no {CHECKPOINT_DIR} recorded for it "
                         "(not launched by tx run from this host?)")
    return {CHECKPOINT_DIR: location, RESUME_FROM: handle}
