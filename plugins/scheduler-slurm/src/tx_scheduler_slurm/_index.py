"""A small on-disk index of the jobs tx submitted: where each job's files are.

``tx log`` reads the replicas' files where the job runs (its ``--chdir``); this index lets
it find them without asking slurmctld (which may be down, and costs a call per read). One
JSON file per job: ``$TX_STATE_DIR/slurm/<cluster key>/<jobid>.json`` (``TX_STATE_DIR``
defaults to ``${XDG_STATE_HOME:-~/.local/state}/tx``, as for the local scheduler), where the
cluster key is a hash of the ``SLURM_CONF`` path (job ids are unique per cluster only).
The index is a cache: a missing or damaged entry means "ask squeue".
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Dict, List, Optional, Tuple

from tx.config import state_dir
from tx import get_logger

log = get_logger(__name__)

#: slurm.conf where SLURM_CONF is unset (Debian's and Slurm's default)
DEFAULT_CONF = "/etc/slurm/slurm.conf"


def conf_path() -> str:
    """The slurm.conf the clients use: ``$SLURM_CONF`` or :data:`DEFAULT_CONF`."""
    return os.path.abspath(os.environ.get("SLURM_CONF") or DEFAULT_CONF)


def index_dir() -> str:
    """``$TX_STATE_DIR/slurm/<12 hex digits of sha1(conf_path())>``."""
    base = state_dir()
    key = hashlib.sha1(conf_path().encode("utf-8")).hexdigest()[:12]
    return os.path.join(base, "slurm", key)


def record(job_id: str, work_dir: str, replicas: List[Tuple[str, int]]) -> None:
    """Write the entry of ``job_id`` (atomically); a failure is logged, never raised: the
    job runs, and squeue still knows where its files are."""
    if not work_dir:
        return
    try:
        d = index_dir()
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{job_id}.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"work_dir": work_dir, "replicas": [list(r) for r in replicas]}, f)
        os.replace(tmp, os.path.join(d, f"{job_id}.json"))
    except OSError as e:
        log.warning(f"slurm: cannot record job {job_id} in {index_dir()}: {e}")


def lookup(job_id: str) -> Optional[Tuple[str, List[Tuple[str, int]]]]:
    """``(work_dir, [(role, replica_id), ...])`` of ``job_id``; None when not recorded
    here or unreadable. A job array's task (``<array>_<task>``, a sweep's trial) without an
    entry of its own has its array's (one entry for all its tasks)."""
    try:
        with open(os.path.join(index_dir(), f"{job_id}.json"), encoding="utf-8") as f:
            data = json.load(f)
        return str(data["work_dir"]), [(str(r), int(k)) for r, k in data["replicas"]]
    except FileNotFoundError:
        return lookup(job_id.split("_", 1)[0]) if "_" in job_id else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def accounting_in_conf() -> Optional[bool]:
    """Whether slurm.conf (:func:`conf_path`) configures accounting; None when the file
    cannot be read (configless clusters) or includes others, so that the caller asks
    ``scontrol show config``."""
    try:
        with open(conf_path(), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    value = "accounting_storage/none"
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        key, sep, val = line.partition("=")
        if sep and key.strip().lower() == "accountingstoragetype":
            value = val.strip()
        if line.lower().startswith("include"):
            return None
    return value != "accounting_storage/none"


#: Slurm's defaults where slurm.conf does not set them: MaxArraySize
#: (https://slurm.schedmd.com/slurm.conf.html#OPT_MaxArraySize) and MaxJobCount
#: (https://slurm.schedmd.com/slurm.conf.html#OPT_MaxJobCount)
DEFAULT_LIMITS = {"MaxArraySize": 1001, "MaxJobCount": 10000}


def limits_in_conf() -> Optional[Dict[str, int]]:
    """``MaxArraySize`` and ``MaxJobCount`` of slurm.conf (:func:`conf_path`; Slurm's
    defaults where unset); None when the file cannot be read or includes others, so that
    the caller asks ``scontrol show config``."""
    try:
        with open(conf_path(), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    values = dict(DEFAULT_LIMITS)
    names = {k.lower(): k for k in values}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        key, sep, val = line.partition("=")
        if sep and key.strip().lower() in names and val.strip().isdigit():
            values[names[key.strip().lower()]] = int(val.strip())
        if line.lower().startswith("include"):
            return None
    return values


def mark_cancelled(app_id: str) -> None:
    """Record that tx cancelled the array task ``app_id`` (``<array>_<task>``): slurmctld
    keeps no record of a pending task it cancels (it leaves the array's pending range), so
    :func:`cancelled` is what still tells it from a task Slurm forgot. Never raises."""
    try:
        d = index_dir()
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"{app_id}.cancelled"), "w", encoding="utf-8"):
            pass
    except OSError as e:
        log.warning(f"slurm: cannot record the cancel of {app_id} in {index_dir()}: {e}")


def cancelled(app_id: str) -> bool:
    """Whether :func:`mark_cancelled` recorded ``app_id`` here."""
    return os.path.exists(os.path.join(index_dir(), f"{app_id}.cancelled"))
