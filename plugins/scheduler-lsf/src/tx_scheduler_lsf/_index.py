"""A small on-disk index of the apps tx submitted to LSF: where each app's files are.

``tx log`` and ``tx describe`` read the replicas' files in the job directory; this index
finds it without asking mbatchd (``bjobs -l`` names it too, while LSF keeps the jobs). One
JSON file per app: ``$TX_STATE_DIR/lsf/<cluster key>/<app id>.json``, where the cluster
key is a hash of ``LSF_ENVDIR`` (the cluster the clients talk to). A cache: a missing or
damaged entry means "ask bjobs".
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Optional

from tx.config import state_dir
from tx import get_logger

log = get_logger(__name__)


def index_dir() -> str:
    """``$TX_STATE_DIR/lsf/<12 hex digits of sha1(LSF_ENVDIR)>``."""
    key = hashlib.sha1(os.path.abspath(os.environ.get("LSF_ENVDIR") or "/etc").encode("utf-8")).hexdigest()[:12]
    return os.path.join(state_dir(), "lsf", key)


def record(app_id: str, job_dir: str) -> None:
    """Write the entry of ``app_id`` (atomically); a failure is logged, never raised."""
    try:
        d = index_dir()
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{app_id}.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"job_dir": job_dir}, f)
        os.replace(tmp, os.path.join(d, f"{app_id}.json"))
    except OSError as e:
        log.warning(f"lsf: cannot record app {app_id} in {index_dir()}: {e}")


def lookup(app_id: str) -> Optional[str]:
    """The job directory of ``app_id``; None when not recorded here or unreadable."""
    if "/" in app_id or app_id.startswith("."):
        return None
    try:
        with open(os.path.join(index_dir(), f"{app_id}.json"), encoding="utf-8") as f:
            return str(json.load(f)["job_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
