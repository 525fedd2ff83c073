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


def _iter_entry_points(group: str = ENTRY_POINT_GROUP) -> Iterator[Tuple[str, str, str, str]]:
    """Yield ``(name, value, distribution, version)`` for each entry point of ``group``:
    read from the distributions' metadata directories on ``sys.path`` directly
    (:func:`_scan_entry_points`, ~7 ms for every group at once), or through
    importlib.metadata (~70 ms with email, zipfile and csv, under load, and ~15 ms more per
    group) where an import hook of its own provides distributions."""
    import importlib.machinery  # deferred: only on a cache miss (already loaded by the import system)

    if any(hasattr(f, "find_distributions") and f is not importlib.machinery.PathFinder for f in sys.meta_path):
        yield from _metadata_entry_points(group)
    else:
        yield from _scan_entry_points(group)


def _metadata_entry_points(group: str = ENTRY_POINT_GROUP) -> Iterator[Tuple[str, str, str, str]]:
    from importlib.metadata import entry_points  # deferred: ~34 ms, only on a cache miss

    eps = entry_points()
    selected = eps.select(group=group) if hasattr(eps, "select") else eps.get(group, [])
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


def _normalized(dist_dir: str) -> str:
    """The distribution's name in a metadata directory's name (``tx_core-0.1.dist-info``),
    normalized as importlib.metadata does (PEP 503, ``_`` for runs of ``-_.``, lower case)."""
    name = dist_dir.rsplit(".", 1)[0].partition("-")[0]
    return "".join("_" if c in "-_." else c for c in name).lower()


#: the last scan of every group: ``(fingerprint, {group: [(name, value, metadata file)]})``
_SCANNED: Optional[Tuple[str, Dict[str, List[Tuple[str, str, str]]]]] = None
#: ``(Name, Version)`` of the metadata files read so far
_NAMES: Dict[str, Tuple[str, str]] = {}


def _scan_entry_points(group: str = ENTRY_POINT_GROUP) -> Iterator[Tuple[str, str, str, str]]:
    """What importlib.metadata's ``entry_points().select(group=group)`` gives for the
    distributions found by its path finder, without importing it: each ``*.dist-info`` and
    ``*.egg-info`` directory directly in a ``sys.path`` directory, in ``sys.path`` order, a
    distribution found twice counted once (the first), its ``entry_points.txt`` read as
    importlib.metadata reads it, its name and version from ``METADATA`` (``PKG-INFO``).

    One pass reads every group; the process keeps it while :func:`_fingerprint` is unchanged
    (no distribution installed or removed), so that the next group (tx-torchx-compat asks
    for four of TorchX's) costs nothing. A distribution's name and version are read only
    when one of its entry points is asked for."""
    global _SCANNED
    key = _fingerprint()
    if _SCANNED is None or _SCANNED[0] != key:
        _SCANNED = (key, _scan_all_groups())
        _NAMES.clear()
    for name, value, meta in _SCANNED[1].get(group, []):
        if meta not in _NAMES:
            _NAMES[meta] = _name_and_version(meta)
        yield (name, value) + _NAMES[meta]


def _scan_all_groups() -> Dict[str, List[Tuple[str, str, str]]]:
    """``{group: [(name, value, metadata file)]}`` of every distribution's
    ``entry_points.txt`` on ``sys.path`` (:func:`_scan_entry_points`), each group's
    ``(name, value)`` counted once (the first)."""
    dists = set()
    seen = set()
    out: Dict[str, List[Tuple[str, str, str]]] = {}
    for entry in sys.path:
        where = entry or "."
        try:
            # os.listdir's order, as importlib.metadata's path finder: it decides which of two
            # distributions declaring one entry point (mlflow, mlflow-skinny) is named
            with os.scandir(where) as it:
                found = [e for e in it if e.name.lower().endswith(_DIST_SUFFIXES)]
        except OSError:  # missing, a file (a zip), unreadable
            continue
        for e in found:
            n = e.name
            path = os.path.join(where, n)
            dist = _normalized(n)
            try:
                if dist in dists or not e.is_dir():  # the directory entry's type: no stat
                    continue
            except OSError:
                continue
            dists.add(dist)
            meta = os.path.join(path, "METADATA" if n.lower().endswith(".dist-info") else "PKG-INFO")
            for key in _entry_points_txt(os.path.join(path, "entry_points.txt")):
                if key not in seen:
                    seen.add(key)
                    out.setdefault(key[0], []).append((key[1], key[2], meta))
    return out


def _entry_points_txt(path: str) -> List[Tuple[str, str, str]]:
    """``(group, name, value)`` of every entry point of an ``entry_points.txt`` (INI:
    ``[group]`` lines, then ``name = value``; blank lines and ``#``/``;`` comments skipped);
    [] if none."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return []
    group = None
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
        elif group is not None and "=" in line:
            name, _, value = line.partition("=")
            out.append((group, name.strip(), value.strip()))
    return out


def entry_points(group: str) -> List[Tuple[str, str, str, str]]:
    """``(name, value, distribution, version)`` of each entry point of ``group`` in the
    installed distributions, as importlib.metadata's ``entry_points().select(group=group)``
    finds them (the first distribution of a name on ``sys.path``; a ``(name, value)`` pair
    once), without importing importlib.metadata unless an import hook of its own provides
    distributions (:func:`_iter_entry_points`). Not cached on disk: each call reads the
    metadata again once a distribution was installed or removed."""
    return list(_iter_entry_points(group))


def _name_and_version(path: str) -> Tuple[str, str]:
    """``Name`` and ``Version`` of a metadata file's headers ("?" for one it lacks)."""
    name = version = "?"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():  # the headers end at the first blank line
                    break
                if line.startswith("Name:"):
                    name = line[len("Name:"):].strip()
                elif line.startswith("Version:"):
                    version = line[len("Version:"):].strip()
    except OSError:
        pass
    return name, version


def _cache_path(key: str) -> str:
    """One cache file per fingerprint, so venvs and interpreters do not evict each other."""

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tx", f"entry-points-{zlib.crc32(key.encode()):08x}.json")


#: endings of the distribution metadata that importlib.metadata finds in a sys.path directory
_DIST_SUFFIXES = (".dist-info", ".egg-info")


def _dists_in(directory: str) -> str:
    """``name@mtime`` of each distribution's metadata directly in ``directory``, sorted and
    joined ("" when there is none, "-" when it cannot be read)."""
    try:
        with os.scandir(directory) as entries:
            found = sorted(
                f"{e.name}@{e.stat().st_mtime_ns}" for e in entries if e.name.lower().endswith(_DIST_SUFFIXES)
            )
    except OSError:
        return "-"
    return ",".join(found)


def _fingerprint() -> str:
    """Changes whenever a distribution is installed or removed on sys.path (the
    directories' mtimes change) or the interpreter or tx-core changes.

    The working directory is on sys.path under ``python -m``, ``python -c`` or ``""`` in
    PYTHONPATH, and importlib.metadata then finds the distributions in it. Its mtime changes
    with every file written there, so it is keyed by the distributions it holds instead
    (:func:`_dists_in`, with its path when there are some): a directory without any shares
    the cache with every other such directory, one with some has a cache of its own.
    Relative entries are keyed by their absolute path."""
    parts = [sys.version, __version__]
    cwd = os.getcwd()
    cwd_seen = False
    for p in sys.path:
        # "" and relative entries are relative to the working directory
        where = p if os.path.isabs(p) else os.path.normpath(os.path.join(cwd, p))
        if where == cwd:
            if not cwd_seen:
                cwd_seen = True
                dists = _dists_in(cwd)
                parts.append(f"<cwd>:{cwd}:{dists}" if dists else "<cwd>:")
            continue
        try:
            parts.append(f"{where}:{os.stat(where).st_mtime_ns}")
        except OSError:
            parts.append(f"{where}:-")
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
            if _entry_points_shape_ok(data, key):
                return [tuple(ep) for ep in data["entry_points"]]  # type: ignore[misc]
        except (OSError, ValueError):  # unreadable, or not JSON (ValueError): scan again
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


def _is_str_list(value: Any) -> bool:
    return type(value) is list and all(type(v) is str for v in value)


def _entry_points_shape_ok(data: Any, key: str) -> bool:
    """``data`` (a parsed entry-point cache file) is of this fingerprint and layout, and is
    ``{"key": str, "layout": int, "entry_points": [[name, value, dist, version], ...]}``
    with four strings per row. Anything else is a cache miss."""
    if type(data) is not dict or data.get("key") != key or data.get("layout") != CACHE_LAYOUT:
        return False
    eps = data.get("entry_points")
    return type(eps) is list and all(_is_str_list(ep) and len(ep) == 4 for ep in eps)


def _registration_shape_ok(row: Any, kinds: Optional[Sequence[str]]) -> bool:
    """``[kind, name, target, description, requires, install]``: strings, ``requires`` a
    list of strings, ``kind`` one of ``kinds`` (when given), ``name`` empty only for a
    component namespace (the rule of :class:`tx.plugins.Register`), ``target`` a dotted path."""
    if type(row) is not list or len(row) != 6:
        return False
    kind, name, target, description, requires, install = row
    if type(kind) is not str or type(name) is not str or type(target) is not str:
        return False
    if type(description) is not str or type(install) is not str or not _is_str_list(requires):
        return False
    if kinds is not None and kind not in kinds:
        return False
    return bool(target) and (bool(name) or kind == "components")


def _plugin_shape_ok(p: Any, kinds: Optional[Sequence[str]]) -> bool:
    """One plugin of a snapshot: a mapping with every field :meth:`tx.plugins.PluginRegistry._snapshot`
    writes, each of its type, and well-formed registrations."""
    if type(p) is not dict:
        return False
    try:
        if (type(p["name"]) is not str or type(p["module"]) is not str or type(p["distribution"]) is not str
                or type(p["version"]) is not str or type(p["events"]) is not bool or type(p["live"]) is not bool
                or type(p["registrations"]) is not list
                or (p["error"] is not None and type(p["error"]) is not str)
                or (p["file"] is not None and type(p["file"]) is not str)
                or (p["mtime"] is not None and type(p["mtime"]) is not int)):
            return False
    except KeyError:
        return False
    return all(_registration_shape_ok(r, kinds) for r in p["registrations"])


def _snapshot_shape_ok(data: Any, key: str, kinds: Optional[Sequence[str]] = None) -> bool:
    """``data`` (a parsed snapshot file) is of this fingerprint and layout and has the whole
    shape :meth:`tx.plugins.PluginRegistry._snapshot` writes: ``selected`` (entry point
    names), and one ``plugins`` mapping per selected name, in that order, each well formed
    (:func:`_plugin_shape_ok`). Anything else (a field missing or of another type, a short
    row, a list where a mapping belongs) is a cache miss."""
    if type(data) is not dict or data.get("key") != key or data.get("layout") != CACHE_LAYOUT:
        return False
    selected, plugins = data.get("selected"), data.get("plugins")
    if not _is_str_list(selected) or type(plugins) is not list:
        return False
    if not all(_plugin_shape_ok(p, kinds) for p in plugins):
        return False
    return [p["name"] for p in plugins] == selected


def _read_snapshot(key: str, kinds: Optional[Sequence[str]] = None) -> Optional[Dict[str, Any]]:
    """The snapshot of fingerprint ``key`` when its file holds one of the whole expected
    shape (:func:`_snapshot_shape_ok`; ``kinds``: the registry kinds a registration may
    name), else None: a damaged or foreign file is a miss, never an error."""

    if os.environ.get("TX_NO_CACHE"):
        return None
    try:
        with open(_snapshot_path(key)) as f:
            data = json.load(f)
    except (OSError, ValueError):  # unreadable, or not JSON (ValueError)
        return None
    return data if _snapshot_shape_ok(data, key, kinds) else None


def _snapshot_valid(snapshot: Dict[str, Any], eps: Sequence[Tuple[str, str, str, str]]) -> bool:
    """The snapshot (of the shape :func:`_read_snapshot` checked) is of these entry points
    and no plugin module changed since."""
    if snapshot["selected"] != [ep[0] for ep in eps]:
        return False
    return all(_mtime(p["file"]) == p["mtime"] for p in snapshot["plugins"] if p["file"])


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
    return [r[1] for p in snapshot["plugins"] for r in p["registrations"] if r[0] == kind]
