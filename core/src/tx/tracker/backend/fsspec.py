"""The file tracker (``file``): runs recorded as small JSON files under a directory or any
fsspec URL (https://filesystem-spec.readthedocs.io/), tx-core's embedded default tracker.

Configure it with a directory or a URL (``s3://bucket/tx-runs``, ``gs://...``,
``memory://...``); without a config it uses ``$XDG_DATA_HOME/tx/tracker`` (default
``~/.local/share/tx/tracker``)::
    [tx:tracker]
    file =

    [tracker:file]
    config = /shared/tx-runs

Storage options of a remote filesystem come from fsspec's own configuration (environment
variables ``FSSPEC_<PROTOCOL>_<OPTION>``, e.g. ``FSSPEC_S3_ENDPOINT_URL``, or fsspec's
config files). Give jobs on other hosts a location they can all reach.

Layout (every file is written once and never changed, so that any number of processes can
write to one run at the same time without locks: no record is lost or torn)::
    <root>/runs/<run key>/<time ns>-<pid>-<uuid>.json       one record: metadata, artifact or source
    <root>/children/<run key>/<time ns>-<pid>-<uuid>.json   "run X names this run as a source"

``<run key>`` is the run id percent-encoded with ``+`` for ``%`` (reversible:
``local_cwd://tx/a-1`` -> ``local_cwd+3A+2F+2Ftx+2Fa-1``). A record is first written under a
hidden temporary name and then renamed (on object stores, where a write is atomic, it is
written in place); readers ignore hidden names and merge a run's records in name order
(later metadata values and artifacts of the same name win).
"""
from __future__ import annotations

import json
import os
import time
import uuid
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional
from urllib.parse import quote, unquote

from tx.log import get_logger
from tx.tracker.api import TrackerArtifact, TrackerBase, TrackerSource

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = ["create", "decode_run_id", "default_root", "encode_run_id", "FsspecTracker"]

#: filesystems whose writes are atomic per object: records are written in place
_ATOMIC_PUT_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory", "oci", "oss"}


def default_root() -> str:
    """``$XDG_DATA_HOME/tx/tracker``, default ``~/.local/share/tx/tracker``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "tx", "tracker")


def encode_run_id(run_id: str) -> str:
    """The directory name of ``run_id`` (see the module doc); :func:`decode_run_id` inverts it.

    Raises:
        ValueError: ``run_id`` is empty or not a string.
    """
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"a run id must be a non-empty string, got {run_id!r}")
    key = quote(run_id, safe="").replace("%", "+")
    return "+2E" + key[1:] if key.startswith(".") else key


def decode_run_id(key: str) -> str:
    """The run id of directory name ``key`` (:func:`encode_run_id`)."""
    return unquote(key.replace("+", "%"))


class FsspecTracker(TrackerBase):
    """Records runs as JSON files under ``root_dir`` of the fsspec filesystem ``fs`` (see
    the module doc). TorchX's ``FsspecTracker(fs, root_dir)``; use :func:`create` to make
    one from a URL.

    Metadata and artifact metadata values are stored as JSON; values JSON cannot hold are
    stored as their ``str()``. Errors of the filesystem (``OSError``, permission errors of a
    bucket) propagate.
    """

    def __init__(self, fs: "AbstractFileSystem", root_dir: str) -> None:
        self.fs = fs
        self.root_dir = root_dir.rstrip("/") or "/"
        protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
        self._atomic_put = any(p in _ATOMIC_PUT_PROTOCOLS for p in protocols)
        self._made: set = set()

    def __repr__(self) -> str:
        return f"FsspecTracker({self.fs.unstrip_protocol(self.root_dir)!r})"

    # -- storage ------------------------------------------------------------------------
    def _dir(self, kind: str, run_id: str) -> str:
        return f"{self.root_dir}/{kind}/{encode_run_id(run_id)}"

    def _write(self, directory: str, record: Dict[str, Any]) -> None:
        data = json.dumps(record, default=str).encode()
        unique = uuid.uuid4().hex
        path = f"{directory}/{time.time_ns():020d}-{os.getpid()}-{unique}.json"
        if directory not in self._made:
            self.fs.makedirs(directory, exist_ok=True)
            self._made.add(directory)
        if self._atomic_put:
            self.fs.pipe_file(path, data)
            return
        tmp = f"{directory}/.tmp-{unique}"
        self.fs.pipe_file(tmp, data)
        self.fs.mv(tmp, path)

    def _read(self, directory: str) -> List[Dict[str, Any]]:
        """The records of ``directory`` in name (time) order; [] when there are none."""
        self.fs.invalidate_cache(directory)
        try:
            names = self.fs.ls(directory, detail=False)
        except FileNotFoundError:
            return []
        paths = sorted(
            (p for p in names if p.rsplit("/", 1)[-1].endswith(".json") and not p.rsplit("/", 1)[-1].startswith(".")),
            key=lambda p: p.rsplit("/", 1)[-1],
        )
        if not paths:
            return []
        blobs = self.fs.cat(paths, on_error="omit")
        records = []
        for p in paths:
            blob = blobs.get(p)
            if blob is None:
                continue
            try:
                records.append(json.loads(blob))
            except ValueError:
                get_logger(__name__).warning("tracker_record_unreadable", path=p)
        return records

    # -- TrackerBase ----------------------------------------------------------------------
    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Optional[Mapping[str, object]] = None
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"an artifact name must be a non-empty string, got {name!r}")
        self._write(self._dir("runs", run_id), {
            "kind": "artifact", "run_id": run_id, "name": name, "path": str(path),
            "metadata": dict(metadata) if metadata is not None else None,
        })

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        out: Dict[str, TrackerArtifact] = {}
        for r in self._read(self._dir("runs", run_id)):
            if r.get("kind") == "artifact":
                out[r["name"]] = TrackerArtifact(r["name"], r["path"], r.get("metadata"))
        return out

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        if not kwargs:
            encode_run_id(run_id)  # still check the run id
            return
        self._write(self._dir("runs", run_id), {"kind": "metadata", "run_id": run_id, "values": kwargs})

    def metadata(self, run_id: str) -> Mapping[str, object]:
        out: Dict[str, object] = {}
        for r in self._read(self._dir("runs", run_id)):
            if r.get("kind") == "metadata":
                out.update(r["values"])
        return out

    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        source_dir = self._dir("children", source_id)
        self._write(self._dir("runs", run_id), {
            "kind": "source", "run_id": run_id, "source_run_id": source_id, "artifact_name": artifact_name,
        })
        self._write(source_dir, {"kind": "child", "run_id": run_id, "source_run_id": source_id,
                                 "artifact_name": artifact_name})

    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        seen: Dict[tuple, TrackerSource] = {}
        for r in self._read(self._dir("runs", run_id)):
            if r.get("kind") != "source":
                continue
            if artifact_name is not None and r.get("artifact_name") != artifact_name:
                continue
            key = (r["source_run_id"], r.get("artifact_name"))
            seen.setdefault(key, TrackerSource(*key))
        return list(seen.values())

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        unknown = set(kwargs) - {"parent_run_id"}
        if unknown:
            raise ValueError(f"unsupported run_ids filter(s) {sorted(unknown)}: the file tracker filters by parent_run_id")
        parent = kwargs.get("parent_run_id")
        if parent is not None:
            children: Dict[str, None] = {}
            for r in self._read(self._dir("children", parent)):
                children.setdefault(r["run_id"], None)
            return list(children)
        runs = f"{self.root_dir}/runs"
        self.fs.invalidate_cache(runs)
        try:
            entries = self.fs.ls(runs, detail=True)
        except FileNotFoundError:
            return []
        keys = [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"]
        return sorted(decode_run_id(k) for k in keys)


def create(config: Optional[str] = None) -> FsspecTracker:
    """The ``file`` tracker's factory (``tx_register_trackers``): ``config`` is a directory
    (``~`` expanded, relative to the working directory) or an fsspec URL; None: the
    default directory (:func:`default_root`).

    Raises:
        ValueError: fsspec does not know the URL's protocol (the message names the package
            that provides it, e.g. s3fs).
    """
    import fsspec.core  # deferred: fsspec only when the file tracker is used

    url = (config or "").strip() or default_root()
    if "://" not in url and "::" not in url:
        url = os.path.abspath(os.path.expanduser(url))
    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as e:
        raise ValueError(f"file tracker location {url!r}: {e}") from None
    return FsspecTracker(fs, root)
