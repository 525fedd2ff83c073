"""Settings of runs that outlive their backend (docs/recovery.md): the log archive
(``[tx:logs]``) and the checkpoint location (``[tx:checkpoint]``).

``.txconfig``::

    [tx:logs]
    archive = s3://bucket/tx-logs   # an fsspec URL or a path; "off" keeps no archive
    interval = 30s                  # how often a followed app's logs are copied
    last_copy = detached            # or "wait": Runner.wait copies a local app's end itself

    [tx:checkpoint]
    root = s3://bucket/ckpt         # every scheduler
    slurm = /shared/ckpt            # one scheduler (wins over root)

Defaults: the archive under ``<state_dir>/logs``, every 30 s; checkpoints under
``<state_dir>/checkpoints`` (:func:`tx.config.environ.state_dir`). Standard library only.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional

from tx.config.environ import state_dir
from tx.config.files import get_config, scheduler_section
from tx.config.gc import parse_duration

__all__ = [
    "ARCHIVE_INTERVAL_S", "CHECKPOINT_SECTION", "fallback", "pending_timeout", "LOGS_SECTION", "OFF", "archive_interval",
    "archive_url", "checkpoint_root", "checkpoint_url", "last_copy_detached", "new_checkpoint_url", "percent_encode",
]

#: ``[tx:logs]``: where the log archive is and how often it is written
LOGS_SECTION = ("tx", "logs")
#: ``[tx:checkpoint]``: where runs keep their checkpoints (``root`` or per scheduler)
CHECKPOINT_SECTION = ("tx", "checkpoint")
#: values of ``[tx:logs] archive`` that turn the archive off
OFF = ("off", "none", "false", "no", "0", "")
#: the default seconds between two copies of a followed app's logs
ARCHIVE_INTERVAL_S = 30.0


def archive_url(dirs: Optional[Iterable[str]] = None) -> Optional[str]:
    """The log archive's root, an fsspec URL or an absolute path: ``[tx:logs] archive``,
    else ``<state_dir>/logs``; None when the setting is ``off``."""
    value = get_config(*LOGS_SECTION, "archive", dirs)
    if value is None:
        return os.path.join(state_dir(), "logs")
    value = value.strip()
    if value.lower() in OFF:
        return None
    return value if "://" in value else os.path.abspath(os.path.expanduser(value))


def last_copy_detached(dirs: Optional[Iterable[str]] = None) -> bool:
    """Whether the last copy of an app that ran on this host is made by a detached process
    (:mod:`tx.runner._archive_copier`) rather than by the process that waited for it:
    ``[tx:logs] last_copy``, ``detached`` (the default) or ``wait``.

    Raises:
        ValueError: another value (message for users).
    """
    value = (get_config(*LOGS_SECTION, "last_copy", dirs) or "detached").strip().lower()
    if value not in ("detached", "wait"):
        raise ValueError(f"[tx:logs] last_copy: expected detached or wait, got {value!r}")
    return value == "detached"


def archive_interval(dirs: Optional[Iterable[str]] = None) -> float:
    """Seconds between two copies of a followed app's logs: ``[tx:logs] interval`` (a
    duration, :func:`tx.config.gc.parse_duration`), else :data:`ARCHIVE_INTERVAL_S`.

    Raises:
        ValueError: the setting is not a duration (message for users).
    """
    value = get_config(*LOGS_SECTION, "interval", dirs)
    if value is None:
        return ARCHIVE_INTERVAL_S
    try:
        return parse_duration(value)
    except ValueError as e:
        raise ValueError(f"[tx:logs] interval: {e}") from None


def checkpoint_root(scheduler: str, dirs: Optional[Iterable[str]] = None) -> str:
    """Where the runs of ``scheduler`` keep checkpoints: ``[tx:checkpoint] <scheduler>``,
    else ``[tx:checkpoint] root``, else ``<state_dir>/checkpoints``. An fsspec URL or an
    absolute path (the default is on this machine: a remote backend's replicas need a
    shared path or an object store URL)."""
    for key in (scheduler, "root"):
        value = get_config(*CHECKPOINT_SECTION, key, dirs)
        if value and value.strip():
            value = value.strip()
            return value if "://" in value else os.path.abspath(os.path.expanduser(value))
    return os.path.join(state_dir(), "checkpoints")


#: the longest directory name (bytes) of the file systems checkpoints go to (NAME_MAX)
_NAME_MAX = 255
#: what :func:`new_checkpoint_url` adds to the app's name: ``-`` and 8 hex digits
_RUN_SUFFIX = 9


#: the bytes :func:`urllib.parse.quote` leaves as they are with ``safe=""``
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


#: ASCII code -> its ``%XX`` for the ASCII characters :data:`_UNRESERVED` does not hold
_ASCII_ESCAPES = {b: f"%{b:02X}" for b in range(128) if b not in _UNRESERVED}


def percent_encode(text: str) -> str:
    """``urllib.parse.quote(text, safe="")`` (UTF-8, ``%XX`` in upper case), without
    importing urllib.parse (with ipaddress: ~3 ms on every dryrun's checkpoint URL)."""
    if text.isascii():  # one C call (a sweep encodes a URL per trial)
        return text.translate(_ASCII_ESCAPES)
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text.encode("utf-8"))


def _too_long(app_name: str, part: str, extra: int = 0) -> ValueError:
    shown = app_name if len(app_name) <= 40 else f"{app_name[:32]}...{app_name[-5:]}"
    how = ", ".join(x for x in ("percent-encoded" if part != app_name else "",
                                f"plus {extra} for the run's '-<8 hex>'" if extra else "") if x)
    return ValueError(f"app name {shown!r} is {len(part)} characters long as the last part of the run's "
                      f"checkpoint directory ({how + ': ' if how else ''}at most {_NAME_MAX} fit in a "
                      "directory name): give a shorter one (tx run --name NAME)")


def checkpoint_url(scheduler: str, session: str, key: str,
                   dirs: Optional[Iterable[str]] = None, root: Optional[str] = None) -> str:
    """``TX_CHECKPOINT_DIR`` of the run ``key``: ``<checkpoint_root(scheduler)>/<session>/<key>``
    (names percent-encoded). ``key`` must name one run, never only an app's name:
    a new run gets a fresh one (:func:`new_checkpoint_url`), a failover run its run id, a
    sweep's trial ``<sweep id>/trial-<index>``; every attempt of the run (retries, infra
    retries, failover hops) is given the location itself, never recomputes it.
    ``root``: :func:`checkpoint_root`'s answer where the caller has it already (a sweep's
    many trials: reading the config files is most of the cost of one URL).

    Raises:
        ValueError: ``key``, percent-encoded, is longer than the 255 bytes a directory
            name holds (one line; every scheduler's dryrun calls this, so such a name is
            refused before anything is submitted).
    """
    part = percent_encode(key or "app")
    if len(part) > _NAME_MAX:
        raise _too_long(key, part)
    if root is None:
        root = checkpoint_root(scheduler, dirs)
    return "/".join([root.rstrip("/"), percent_encode(session or "_"), part])


def new_checkpoint_url(scheduler: str, session: str, app_name: str,
                       dirs: Optional[Iterable[str]] = None, root: Optional[str] = None) -> str:
    """A fresh checkpoint location for a new run of the app ``app_name``:
    ``<checkpoint_root(scheduler)>/<session>/<app name>-<8 random hex digits>``, unique per
    call, so that a new run never resumes another run's checkpoints (``tx run --resume
    HANDLE`` continues an earlier one explicitly: docs/recovery.md).

    Raises:
        ValueError: the app name, percent-encoded, with the 9 characters added, is longer
            than a directory name holds (one line, as :func:`checkpoint_url`).
    """
    part = percent_encode(app_name or "app")
    if len(part) + _RUN_SUFFIX > _NAME_MAX:
        raise _too_long(app_name, part, _RUN_SUFFIX)
    return checkpoint_url(scheduler, session, f"{app_name or 'app'}-{os.urandom(4).hex()}", dirs, root)  # secrets.token_hex(4) without hashlib


def fallback(dirs: Optional[Iterable[str]] = None) -> list:
    """``[tx] fallback``: the schedulers a run fails over to, in order (``local_docker,
    local_cwd``); [] when unset (docs/recovery.md)."""
    value = scheduler_section("tx", dirs).get("fallback", "")
    return [s.strip() for s in value.split(",") if s.strip()]


def pending_timeout(dirs: Optional[Iterable[str]] = None) -> Optional[float]:
    """``[tx] pending_timeout``: seconds a run may stay PENDING before it fails over (a
    duration, ``10m``); None when unset.

    Raises:
        ValueError: not a duration (message for users).
    """
    value = scheduler_section("tx", dirs).get("pending_timeout")
    if value is None or not value.strip():
        return None
    try:
        return parse_duration(value)
    except ValueError as e:
        raise ValueError(f"[tx] pending_timeout: {e}") from None
