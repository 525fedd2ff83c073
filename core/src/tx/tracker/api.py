"""The tracker API: record which job produced which artifacts from which inputs.

Names and meaning follow TorchX's ``torchx.tracker.api``
(https://pytorch.org/torchx/latest/tracker.html):

* a **run** is identified by a string, the *run id*. Inside a job launched by tx it is the
  job's app handle (``TX_JOB_ID``, e.g. ``local_cwd://tx/train-x1y2``);
* a run has **metadata** (key -> value), **artifacts** (name -> path plus metadata) and
  **sources** (the runs, and optionally which of their artifacts, it consumed);
* a run's **lineage** is its parents (its sources) and its children (the runs that name it
  as a source), each with their artifacts.

A :class:`TrackerBase` is a storage backend (the file tracker of
:mod:`tx.tracker.backend.fsspec`, MLflow from tx-tracker-mlflow). Backends are registered
by plugins through ``tx_register_trackers`` as factories ``(config: Optional[str]) ->
TrackerBase`` and chosen by configuration (:func:`get_configured_trackers`): the
``[tx:tracker]`` section of ``.txconfig`` or the ``TX_TRACKERS`` environment variable. The
Runner passes the configured trackers to every replica, and code inside a job records
through :class:`AppRun`::
    from tx.tracker import app_run_from_env

    run = app_run_from_env()          # a no-op when no tracker is configured
    run.add_metadata(lr=0.01, epochs=8)
    run.add_artifact("model", "/checkpoints/model.pt", {"accuracy": 0.97})
"""
from __future__ import annotations

import functools
import os
import threading
from abc import ABC, abstractmethod
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import attrs

from tx.config import environ as _env
from tx.config.environ import getenv as _getenv
from tx.config.trackers import configured_trackers
from tx.log import get_logger
from tx.plugins import PluginError, get_registry, import_object, not_installed_hint, pip_install

__all__ = [
    "app_run_from_env", "AppRun", "AppRunTrackableSource", "build_trackers",
    "get_configured_trackers", "is_rank0", "Lineage", "LineageRun", "TrackerArtifact",
    "TrackerBase", "trackers_from_environ", "TrackerSource", "UNDEFINED_RUN_ID",
]

#: the run id of an :class:`AppRun` made outside a tx job (no ``TX_JOB_ID``)
UNDEFINED_RUN_ID = "<UNDEFINED>"


@attrs.frozen
class TrackerSource:
    """A source of a run: the run ``source_run_id`` (and, when given, its artifact
    ``artifact_name``) that the run consumed."""

    source_run_id: str
    artifact_name: Optional[str] = None


@attrs.frozen
class TrackerArtifact:
    """An artifact of a run.

    Attributes:
        name: the artifact's name, unique within its run (a later artifact of the same name
            replaces the earlier one).
        path: where it is: a local path or a URL (``s3://...``), as recorded; trackers that
            store a copy (MLflow) give the copy's location.
        metadata: what describes it (JSON-like values), or None.
    """

    name: str
    path: str
    metadata: Optional[Mapping[str, object]] = None


@attrs.frozen
class LineageRun:
    """A run linked to another in a :class:`Lineage`, with its artifacts.

    Attributes:
        run_id: the linked run.
        artifact_name: the artifact the link is about (for a parent: the parent's artifact
            the run consumed; for a child: the run's artifact the child consumed), or None
            when the whole run is the source.
        artifacts: the linked run's artifacts, by name.
    """

    run_id: str
    artifact_name: Optional[str]
    artifacts: Mapping[str, TrackerArtifact]


@attrs.frozen
class Lineage:
    """Where a run came from and what came of it (TorchX declared this class but never
    filled it in; tx does).

    Attributes:
        run_id: the run.
        artifacts: its artifacts, by name.
        parents: the runs it consumed (its sources), in the order they were recorded.
        children: the runs that name it as a source.
    """

    run_id: str
    artifacts: Mapping[str, TrackerArtifact]
    parents: List[LineageRun]
    children: List[LineageRun]

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict: ``{"run_id", "artifacts": {name: {...}}, "parents": [...],
        "children": [...]}``."""
        return attrs.asdict(self, recurse=True)


class TrackerBase(ABC):
    """A tracker backend: stores runs' metadata, artifacts and sources.

    Implementations must be safe when every rank of a job writes to the same run at the
    same time, and keep nothing only in memory (a job's ranks are separate processes, the
    ``tx tracker`` command another one). Methods raise the backend's errors (``OSError`` for
    files, the backend SDK's exceptions) with a message that says what failed.
    """

    @abstractmethod
    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Optional[Mapping[str, object]] = None
    ) -> None:
        """Record artifact ``name`` of run ``run_id`` at ``path`` (a local path or URL),
        with ``metadata``; replaces an earlier artifact of the same name."""

    @abstractmethod
    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        """The artifacts of ``run_id`` by name (empty for an unknown run)."""

    @abstractmethod
    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        """Record metadata ``key=value`` pairs of ``run_id``."""

    @abstractmethod
    def metadata(self, run_id: str) -> Mapping[str, object]:
        """The metadata of ``run_id`` (empty for an unknown run)."""

    @abstractmethod
    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        """Record that ``run_id`` consumed run ``source_id`` (its artifact ``artifact_name``,
        or the whole run when None). Recording the same source twice keeps one."""

    @abstractmethod
    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        """The sources of ``run_id``, in the order they were recorded; with
        ``artifact_name``, only those about that artifact."""

    @abstractmethod
    def run_ids(self, **kwargs: str) -> Iterable[str]:
        """The run ids this tracker knows. Filter ``parent_run_id=ID``: only the runs that
        name ``ID`` as a source (its children).

        Raises:
            ValueError: an unsupported filter.
        """

    def lineage(self, run_id: str) -> Lineage:
        """Parents and children of ``run_id``, each with its artifacts (one level in each
        direction; follow a parent's or child's run id for more). Built from
        :meth:`sources`, :meth:`artifacts` and :meth:`run_ids`; backends may do better."""
        parents = [
            LineageRun(s.source_run_id, s.artifact_name, dict(self.artifacts(s.source_run_id)))
            for s in self.sources(run_id)
        ]
        children: List[LineageRun] = []
        for child in self.run_ids(parent_run_id=run_id):
            arts = None
            for s in self.sources(child):
                if s.source_run_id == run_id:
                    if arts is None:
                        arts = dict(self.artifacts(child))
                    children.append(LineageRun(child, s.artifact_name, arts))
        return Lineage(run_id, dict(self.artifacts(run_id)), parents, children)


@attrs.frozen
class AppRunTrackableSource:
    """A source of an :class:`AppRun`: the parent run and, when given, its artifact."""

    parent: "AppRun"
    artifact_name: Optional[str]


def is_rank0(environ: Optional[Mapping[str, str]] = None) -> bool:
    """True in the one process of a job that creates its run for the others to join: in
    role 0 (``TX_ROLE_IDX`` unset or 0), global rank 0 of a ``torchrun`` job (``RANK``),
    else replica 0 (``TX_REPLICA_ID``); outside a job (none of these set) True. TorchX's
    names (``TORCHX_ROLE_IDX``, ``TORCHX_REPLICA_IDX``) are read too. Reads the
    environment only (no torch import)."""
    e = os.environ if environ is None else environ
    role = _getenv(_env.ROLE_IDX, e)
    if role is not None and role.strip() not in ("", "0"):
        return False
    if e.get("RANK", "").strip():
        return e["RANK"].strip() == "0"
    replica = _getenv(_env.REPLICA_ID, e)
    return replica is None or replica.strip() in ("", "0")


@attrs.define
class AppRun:
    """The run of the job this process belongs to, recorded in every configured tracker.

    Attributes:
        id: the run id (``TX_JOB_ID``, the job's app handle).
        backends: the trackers it records to; with none every method does nothing (and
            the queries return nothing).
    """

    id: str
    backends: List[TrackerBase] = attrs.field(factory=list, converter=list)

    @staticmethod
    def run_from_env() -> "AppRun":
        """The run of the current job, from the environment the Runner set in the replica:
        the id from ``TX_JOB_ID`` (``<UNDEFINED>`` outside a tx job), the trackers from
        ``TX_TRACKERS`` and ``TX_TRACKER_<NAME>_CONFIG`` (TorchX's ``TORCHX_*`` names are
        read too), and the parent run from ``TX_PARENT_RUN_ID``, recorded as a source of
        this run (by rank 0, :func:`is_rank0`). Made once per process and environment.

        Raises:
            tx.plugins.PluginError: a configured tracker is installed but cannot be loaded.
        """
        e = os.environ
        trackers = _getenv(_env.TRACKERS, e) or ""
        configs = tuple(
            (n, _getenv(_env.tracker_config_var(n), e)) for n in _split_names(trackers)
        )
        return _run_from_env(
            _getenv(_env.JOB_ID, e) or UNDEFINED_RUN_ID, configs,
            _getenv(_env.PARENT_RUN_ID, e) or None, is_rank0(e),
        )

    def add_metadata(self, **kwargs: object) -> None:
        """Record metadata of this run in every tracker."""
        for b in self.backends:
            b.add_metadata(self.id, **kwargs)

    def add_artifact(self, name: str, path: str, metadata: Optional[Mapping[str, object]] = None) -> None:
        """Record artifact ``name`` at ``path`` (local path or URL) in every tracker."""
        for b in self.backends:
            b.add_artifact(self.id, name, path, metadata)

    def job_id(self) -> str:
        """The run id (the job's app handle)."""
        return self.id

    def add_source(self, source_id: str, artifact_name: Optional[str] = None) -> None:
        """Record that this run consumed run ``source_id`` (its artifact ``artifact_name``)."""
        for b in self.backends:
            b.add_source(self.id, source_id, artifact_name)

    def sources(self) -> List[AppRunTrackableSource]:
        """This run's sources across its trackers (each source once)."""
        seen: Dict[Tuple[str, Optional[str]], AppRunTrackableSource] = {}
        for b in self.backends:
            for s in b.sources(self.id):
                key = (s.source_run_id, s.artifact_name)
                if key not in seen:
                    seen[key] = AppRunTrackableSource(AppRun(s.source_run_id, [b]), s.artifact_name)
        return list(seen.values())

    def children(self) -> List["AppRun"]:
        """The runs that name this run as a source, across its trackers (each once)."""
        found: Dict[str, List[TrackerBase]] = {}
        for b in self.backends:
            for child in b.run_ids(parent_run_id=self.id):
                found.setdefault(child, []).append(b)
        return [AppRun(child, backends) for child, backends in found.items()]


def _split_names(text: str) -> List[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


_lock = threading.Lock()


@functools.lru_cache(maxsize=8)
def _run_from_env(
    run_id: str, configs: Tuple[Tuple[str, Optional[str]], ...], parent: Optional[str], rank0: bool
) -> AppRun:
    with _lock:
        run = AppRun(run_id, build_trackers(dict(configs)))
        if parent and rank0 and run.backends:
            run.add_source(parent)
        return run


def app_run_from_env() -> AppRun:
    """:meth:`AppRun.run_from_env`."""
    return AppRun.run_from_env()


def build_trackers(factory_and_config: Mapping[str, Optional[str]]) -> List[TrackerBase]:
    """Make the trackers ``{name: config}`` names, in order, through the factories that
    plugins registered with ``tx_register_trackers`` (``factory(config)``). A name may also
    be a dotted path ``pkg.module:factory`` (as in TorchX). A name that is neither is
    skipped with a warning that says what to install.

    Raises:
        tx.plugins.PluginError: a registered tracker cannot be loaded (its SDK is missing).
        TypeError: a factory did not return a :class:`TrackerBase`.
    """

    registry = get_registry()
    trackers: List[TrackerBase] = []
    for name, config in factory_and_config.items():
        reg = registry.get("trackers", name)
        if reg is not None:
            missing = reg.missing_requirements()
            if missing:
                hint = reg.install or pip_install(reg.distribution)
                raise PluginError(
                    f"tracker {name!r} needs {', '.join(missing)}, which is not installed here: {hint}"
                )
            factory = reg.load()
        elif ":" in name:
            try:
                factory = import_object(name)
            except ImportError as e:
                _warn_skipped(name, f"cannot import its factory: {e}")
                continue
        else:
            hint = not_installed_hint("trackers", name)
            known = ", ".join(registry.names("trackers")) or "none"
            _warn_skipped(name, f"not installed: {hint}" if hint else f"unknown tracker (installed: {known})")
            continue
        tracker = factory(config or None)
        if not isinstance(tracker, TrackerBase):
            raise TypeError(f"tracker {name!r}: factory returned {type(tracker).__name__}, not a TrackerBase")
        trackers.append(tracker)
    return trackers


def _warn_skipped(name: str, why: str) -> None:

    get_logger(__name__).warning("tracker_skipped", tracker=name, reason=why)


def trackers_from_environ(environ: Optional[Mapping[str, str]] = None) -> List[TrackerBase]:
    """The trackers named in ``TX_TRACKERS`` (comma separated) with their
    ``TX_TRACKER_<NAME>_CONFIG``; ``[]`` when unset. See :func:`build_trackers`."""
    e = os.environ if environ is None else environ
    names = _split_names(_getenv(_env.TRACKERS, e) or "")
    return build_trackers({n: _getenv(_env.tracker_config_var(n), e) for n in names})


def get_configured_trackers() -> Dict[str, Optional[str]]:
    """``{name: config}`` of the trackers in effect for this process, in order: the names
    from ``TX_TRACKERS`` when it is set (even empty: no tracker), else the keys of the
    ``[tx:tracker]`` section of ``.txconfig``; each config from ``TX_TRACKER_<NAME>_CONFIG``
    when set, else ``config`` of the ``[tracker:<NAME>]`` section, else None. TorchX's
    ``TORCHX_*`` variables are read where the ``TX_*`` ones are unset.

    Raises:
        tx.config.ConfigError: a ``.txconfig`` file cannot be read.
    """
    return configured_trackers()
