"""What the configured trackers recorded (``tx tracker``'s data, for the tracking pages): run
ids, a run's metadata, artifacts and lineage. Called on the backend's worker threads."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from tx.config import configured_trackers
from tx import UserError
from tx.tracker import TrackerBase, build_trackers

__all__ = ["NO_TRACKER", "TrackingError", "run_record", "runs", "tracker_names"]

#: the page's line when no tracker is configured (as ``tx tracker`` says it)
NO_TRACKER = ("no tracker is configured: add a [tx:tracker] section to .txconfig (e.g. `file =`), "
              "or set TX_TRACKERS=file")


class TrackingError(UserError):
    """A tracker cannot be made or is not configured."""


def tracker_names() -> List[str]:
    """The configured trackers' names, in order (``[tx:tracker]`` or ``TX_TRACKERS``)."""
    return list(configured_trackers())


def _tracker(name: Optional[str]) -> tuple:
    configured = configured_trackers()
    if not configured:
        raise TrackingError(NO_TRACKER)
    name = name or next(iter(configured))
    if name not in configured:
        raise TrackingError(f"tracker {name!r} is not configured (configured: {', '.join(configured)})")
    trackers: List[TrackerBase] = build_trackers({name: configured[name]})
    if not trackers:
        raise TrackingError(f"tracker {name!r} cannot be made: is its plugin installed? (`tx plugins`)")
    return name, trackers[0]


def runs(_runner: Any, name: Optional[str]) -> Dict[str, Any]:
    """``{"tracker", "runs": [run ids]}`` of tracker ``name`` (default: the first configured)."""
    name, tracker = _tracker(name)
    return {"tracker": name, "runs": list(tracker.run_ids())}


def run_record(_runner: Any, name: Optional[str], run_id: str) -> Dict[str, Any]:
    """``{"tracker", "run_id", "metadata", "lineage"}`` of one run (lineage: its artifacts,
    parents and children, :class:`tx.tracker.Lineage`)."""
    name, tracker = _tracker(name)
    return {"tracker": name, "run_id": run_id, "metadata": dict(tracker.metadata(run_id)),
            "lineage": tracker.lineage(run_id)}
