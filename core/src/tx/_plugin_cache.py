"""The caches that let a ``tx`` process skip scanning distributions and importing plugins:
the ``tx`` entry points, and a snapshot of what installed plugins registered, both keyed by
a fingerprint of ``sys.path`` (see :class:`tx.plugins.PluginRegistry`). Standard library
only, so that ``tx --help`` can list the installed schedulers without attrs or pluggy.
"""
from __future__ import annotations

import json
import os
import sys
import zlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from tx.version import __version__

ENTRY_POINT_GROUP = "tx"
#: the layout of the cache files (entry points, plugin snapshot); a file of another
#: layout, written by another tx version, is ignored and rewritten
CACHE_LAYOUT = 2


def _iter_entry_points() -> Iterator[Tuple[str, str, str, str]]:
    """Yield ``(name, module, distribution, version)`` for each ``tx`` entry point."""
    from importlib.metadata import entry_points  # deferred: ~34 ms, only on a cache miss

    eps = entry_points()
    selected = eps.select(group=ENTRY_POINT_GROUP) if hasattr(eps, "select") else eps.get(ENTRY_POINT_GROUP, [])
    seen = set()
    for ep in selected:
        dist = getattr(ep, "dist", None)
        key = (ep.name, ep.value)
        if key in seen:  # the same distribution on sys.path twice
            continue
        seen.add(key)
        yield (
            ep.name,
            ep.value,
            dist.metadata["Name"] if dist is not None else "?",
            dist.version if dist is not None else "?",
        )


def _cache_path(key: str) -> str:
    """One cache file per fingerprint, so venvs and interpreters do not evict each other."""

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tx", f"entry-points-{zlib.crc32(key.encode()):08x}.json")


def _fingerprint() -> str:
    """Changes whenever a distribution is installed or removed on sys.path (the
    directories' mtimes change) or the interpreter or tx-core changes. The working
    directory is left out."""
    parts = [sys.version, __version__]
    cwd = os.getcwd()
    for p in sys.path:
        if p in ("", ".", cwd):  # the working directory changes all the time; no dists live there
            continue
        try:
            parts.append(f"{p}:{os.stat(p or '.').st_mtime_ns}")
        except OSError:
            parts.append(f"{p}:-")
    return "|".join(parts)


def cached_entry_points(key: Optional[str] = None) -> List[Tuple[str, str, str, str]]:
    """The ``tx`` entry points, from a cache keyed by :func:`_fingerprint` when it is
    current (skips importing importlib.metadata and scanning every distribution, ~50 ms),
    else scanned and cached. ``TX_NO_CACHE=1`` always scans."""

    key = key or _fingerprint()
    path = _cache_path(key)
    if not os.environ.get("TX_NO_CACHE"):
        try:
            with open(path) as f:
                data = json.load(f)
            if data.get("key") == key and data.get("layout") == CACHE_LAYOUT:
                return [tuple(ep) for ep in data["entry_points"]]  # type: ignore[misc]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    eps = list(_iter_entry_points())
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"key": key, "layout": CACHE_LAYOUT, "entry_points": eps}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: scan every time
    return eps


def _mtime(path: Optional[str]) -> Optional[int]:
    if not path:
        return None
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _snapshot_path(key: str) -> str:
    return _cache_path(key)[: -len(".json")] + ".plugins.json"


def _read_snapshot(key: str) -> Optional[Dict[str, Any]]:

    if os.environ.get("TX_NO_CACHE"):
        return None
    try:
        with open(_snapshot_path(key)) as f:
            data = json.load(f)
        return data if data.get("key") == key and data.get("layout") == CACHE_LAYOUT else None
    except (OSError, ValueError, AttributeError):
        return None


def _snapshot_valid(snapshot: Dict[str, Any], eps: Sequence[Tuple[str, str, str, str]]) -> bool:
    """The snapshot is of these entry points and no plugin module changed since."""
    try:
        if snapshot["selected"] != [ep[0] for ep in eps]:
            return False
        return all(_mtime(p["file"]) == p["mtime"] for p in snapshot["plugins"] if p["file"])
    except (KeyError, TypeError):
        return False


def _write_snapshot(key: str, snapshot: Optional[Dict[str, Any]]) -> None:

    if snapshot is None or os.environ.get("TX_NO_CACHE"):
        return
    path = _snapshot_path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"key": key, "layout": CACHE_LAYOUT, **snapshot}, f)
        os.replace(tmp, path)
    except OSError:
        pass


def _tracing() -> bool:
    return os.environ.get("TX_TRACE_PLUGINS", "").strip().lower() in ("1", "true", "yes", "on")


def _env_list(name: str) -> Optional[List[str]]:
    val = os.environ.get(name)
    if val is None:
        return None
    return [v.strip() for v in val.split(",") if v.strip()]


def snapshot_names(kind: str) -> Optional[List[str]]:
    """The names of ``kind`` (``"schedulers"``...) that the installed plugins registered,
    read from a current snapshot without importing attrs, pluggy or any plugin; None when
    there is no current snapshot (the caller then builds the registry)."""
    only = _env_list("TX_PLUGINS")
    disabled = set(_env_list("TX_DISABLE_PLUGINS") or [])
    key = _fingerprint()
    eps = [ep for ep in cached_entry_points(key)
           if (only is None or ep[0] in only) and ep[0] not in disabled]
    snapshot = None if _tracing() else _read_snapshot(key)
    if snapshot is None or not _snapshot_valid(snapshot, eps):
        return None
    try:
        return [r[1] for p in snapshot["plugins"] for r in p["registrations"] if r[0] == kind]
    except (KeyError, TypeError, IndexError):
        return None
