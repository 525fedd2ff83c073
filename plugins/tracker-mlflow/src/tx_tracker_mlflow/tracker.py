"""The ``mlflow`` tracker: tx runs recorded as MLflow runs (https://mlflow.org/docs/latest/).

Mapping (names follow TorchX's ``torchx.tracker.mlflow``):

==========================  =====================================================================
tx                          MLflow
==========================  =====================================================================
run id (the job's handle)   the run **name** (``attributes.run_name``) and tag ``tx.run_id``;
                            one MLflow run per tx run, found by name in every active experiment
experiment                  ``experiment_name`` of the config, else ``TX_TRACKING_EXPERIMENT_NAME``
                            (``dist.ddp --name EXP/RUN`` sets it), else ``default-experiment``
metadata                    params (nested mappings flattened to ``a.b.c``; values as strings;
                            MLflow does not let a param change its value)
artifact NAME               a local file or directory is uploaded under artifact path ``NAME``;
                            tags ``tx.artifact/NAME/path`` (where it is: the upload, or the
                            URL given) and ``tx.artifact/NAME/metadata/KEY`` (JSON values)
source                      tag ``tx.source/<hash>`` (JSON ``{"source_run_id", "artifact_name"}``)
                            and ``tx.parent/<hash of the source>`` = the source's run id; when
                            the source is an MLflow run too, ``mlflow.parentRunId`` (the UI nests
                            the run under it)
==========================  =====================================================================

One run per job, also when every rank writes: only the creating process (rank 0:
:func:`tx.tracker.is_rank0`) creates the run, when the tracker is made inside a job
(``TX_JOB_ID`` set, TorchX's "priming") or on its first write; the other ranks wait up to
``join_timeout`` seconds for it to appear and then write to it. The job's run is RUNNING
while its rank 0 lives and ended when that process exits (FINISHED, or FAILED after an
uncaught exception); a run created by a write from outside a job is FINISHED at once.

Config (``TX_TRACKER_MLFLOW_CONFIG``, or ``config`` of ``[tracker:mlflow]``): the tracking
URI, optionally followed by ``;key=value`` options: ``experiment_name``,
``artifact_location`` (of a new experiment), ``join_timeout`` (seconds, default 120)::

    [tracker:mlflow]
    config = http://mlflow.internal:5000;experiment_name=vision

Without a tracking URI, MLflow's own default applies (``MLFLOW_TRACKING_URI``, ...).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from tx import UserError
from tx.config import JOB_ID, getenv
from tx.tracker import TrackerArtifact, TrackerBase, TrackerSource, is_rank0
from tx_tracker_mlflow._client import TrackingServerUnreachable as TrackingServerUnreachable  # raised by the tracker
from tx_tracker_mlflow._client import make_client

if TYPE_CHECKING:
    from mlflow.entities import Run

#: the experiment when none is configured (dist.ddp's default experiment name)
DEFAULT_EXPERIMENT = "default-experiment"
#: set by ``dist.ddp`` from ``--name EXPERIMENT/RUN`` (TorchX: TORCHX_TRACKING_EXPERIMENT_NAME)
ENV_EXPERIMENT = "TX_TRACKING_EXPERIMENT_NAME"
ENV_EXPERIMENT_TORCHX = "TORCHX_TRACKING_EXPERIMENT_NAME"
TAG_RUN_ID = "tx.run_id"
TAG_ARTIFACT = "tx.artifact/"
TAG_SOURCE = "tx.source/"
TAG_PARENT = "tx.parent/"
TAG_MLFLOW_PARENT = "mlflow.parentRunId"
CONFIG_KEYS = ("tracking_uri", "experiment_name", "artifact_location", "join_timeout")
#: MLflow's limit of params + tags per log_batch request
_BATCH = 100


class DuplicateRunError(UserError, ValueError):
    """More than one MLflow run has the name of a tx run."""


class RunNotCreatedError(UserError, TimeoutError):
    """A rank other than rank 0 waited ``join_timeout`` seconds for rank 0 to create the run."""


def parse_config(config: Optional[str]) -> Dict[str, Any]:
    """``"URI;key=value;..."`` -> keyword arguments of :class:`MLflowTracker`.

    ``"http://h:5000"`` -> ``{"tracking_uri": "http://h:5000"}``;
    ``"sqlite:///m.db;experiment_name=e;join_timeout=30"`` -> the URI, ``experiment_name``
    and ``join_timeout=30.0``; ``None`` or ``""`` -> ``{}``.

    Raises:
        ValueError: an unknown option, or a ``join_timeout`` that is not a number.
    """
    out: Dict[str, Any] = {}
    for i, part in enumerate(p.strip() for p in (config or "").split(";")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if sep and key.strip() in CONFIG_KEYS:
            out[key.strip()] = value.strip()
        elif i == 0:
            out["tracking_uri"] = part
        else:
            raise ValueError(
                f"mlflow tracker config {config!r}: unknown option {part!r}; "
                f"use URI;key=value with keys {', '.join(CONFIG_KEYS)}"
            )
    if "join_timeout" in out:
        try:
            out["join_timeout"] = float(out["join_timeout"])
        except ValueError:
            raise ValueError(f"mlflow tracker config: join_timeout={out['join_timeout']!r} is not a number") from None
    return out


def _quote(value: str) -> str:
    """``value`` as a string literal of MLflow's search syntax."""
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise ValueError(f"run ids with both ' and \" cannot be looked up in MLflow: {value!r}")


def _digest(*parts: Optional[str]) -> str:
    return hashlib.sha1("\0".join(p or "" for p in parts).encode()).hexdigest()[:16]


def _flatten(values: Mapping[str, object], prefix: str = "") -> Iterator[Tuple[str, object]]:
    for k, v in values.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            yield from _flatten(v, key + ".")
        else:
            yield key, v


def _check_artifact_name(name: str) -> None:
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ValueError(f"artifact name {name!r}: use a non-empty name without '/' (MLflow artifact path)")


class MLflowTracker(TrackerBase):
    """A :class:`tx.tracker.TrackerBase` over one MLflow tracking server or store.

    Args:
        experiment_name: experiment of new runs (see the module doc for the default).
        tracking_uri: ``http(s)://host:port`` of a tracking server, ``sqlite:///path.db``,
            ``databricks``, ...; None: MLflow's default (``MLFLOW_TRACKING_URI``).
        artifact_location: where a new experiment keeps its artifacts (MLflow's default
            when None).
        join_timeout: seconds a rank other than rank 0 waits for rank 0 to create the run.

    Raises:
        TrackingServerUnreachable: an ``http(s)`` tracking server does not answer (checked
            once, with a 5 s timeout).
        ImportError: mlflow is not installed (``pip install tx-tracker-mlflow``).
    """

    def __init__(
        self,
        experiment_name: Optional[str] = None,
        tracking_uri: Optional[str] = None,
        artifact_location: Optional[str] = None,
        join_timeout: float = 120.0,
    ) -> None:
        self.client = make_client(tracking_uri)
        self.tracking_uri: str = self.client.tracking_uri
        self.experiment_name = (
            experiment_name or os.environ.get(ENV_EXPERIMENT) or os.environ.get(ENV_EXPERIMENT_TORCHX)
            or DEFAULT_EXPERIMENT
        )
        self.artifact_location = artifact_location
        self.join_timeout = float(join_timeout)
        self._runs: Dict[str, str] = {}  # tx run id -> MLflow run id, for writes
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MLflowTracker(tracking_uri={self.tracking_uri!r}, experiment_name={self.experiment_name!r})"

    # -- experiments and runs ---------------------------------------------------------------
    def _experiment_ids(self) -> List[str]:
        """Ids of every active experiment."""
        from mlflow.entities import ViewType

        ids: List[str] = []
        token = None
        while True:
            page = self.client.search_experiments(view_type=ViewType.ACTIVE_ONLY, max_results=1000, page_token=token)
            ids.extend(e.experiment_id for e in page)
            token = page.token
            if not token:
                return ids

    def _search(self, filter_string: str, max_results: int = 1000) -> Iterator["Run"]:
        """Active runs of every active experiment that match ``filter_string``."""
        from mlflow.entities import ViewType

        ids = self._experiment_ids()
        if not ids:
            return
        token = None
        while True:
            page = self.client.search_runs(ids, filter_string=filter_string, run_view_type=ViewType.ACTIVE_ONLY,
                                           max_results=max_results, page_token=token)
            yield from page
            token = page.token
            if not token:
                return

    def find_run(self, run_id: str) -> Optional["Run"]:
        """The MLflow run named ``run_id`` (in any active experiment), or None.

        Raises:
            DuplicateRunError: several runs have that name.
        """
        if not isinstance(run_id, str) or not run_id:
            raise ValueError(f"a run id must be a non-empty string, got {run_id!r}")
        runs = list(self._search(f"attributes.run_name = {_quote(run_id)}", max_results=50))
        if len(runs) > 1:
            where = ", ".join(f"{r.info.run_id} (experiment {r.info.experiment_id})" for r in runs)
            raise DuplicateRunError(
                f"{len(runs)} MLflow runs are named {run_id!r}: {where}; tx keeps one MLflow run per "
                f"tx run: delete the extra ones (`mlflow runs delete --run-id ID`) at {self.tracking_uri}"
            )
        return runs[0] if runs else None

    def _experiment_id(self) -> str:
        """The id of :attr:`experiment_name`, created when missing."""
        from mlflow.exceptions import MlflowException

        exp = self.client.get_experiment_by_name(self.experiment_name)
        if exp is None:
            try:
                return str(self.client.create_experiment(self.experiment_name, self.artifact_location))
            except MlflowException:  # created by another job at the same moment
                exp = self.client.get_experiment_by_name(self.experiment_name)
                if exp is None:
                    raise
        if exp.lifecycle_stage != "active":
            raise ValueError(
                f"MLflow experiment {self.experiment_name!r} is deleted: restore it "
                f"(`mlflow experiments restore --experiment-id {exp.experiment_id}`) or use another experiment_name"
            )
        return str(exp.experiment_id)

    def _write_run(self, run_id: str, prime: bool = False) -> str:
        """The MLflow run id to write ``run_id``'s records to. Rank 0 finds or creates the
        run; other ranks wait for it (:attr:`join_timeout`).

        Raises:
            RunNotCreatedError: not rank 0 and the run did not appear in time.
        """
        with self._lock:
            mid = self._runs.get(run_id)
            if mid is not None:
                return mid
            run = self.find_run(run_id)
            if run is None and is_rank0():
                run = self.client.create_run(self._experiment_id(), run_name=run_id, tags={TAG_RUN_ID: run_id})
                if prime:  # the job's own run: RUNNING while this process lives
                    _finish_at_exit(self.client, run.info.run_id)
                else:  # a record made from outside the job
                    self.client.set_terminated(run.info.run_id, status="FINISHED")
            elif run is None:
                deadline = time.monotonic() + self.join_timeout
                while run is None:
                    if time.monotonic() >= deadline:
                        raise RunNotCreatedError(
                            f"MLflow run {run_id!r} did not appear within {self.join_timeout:g} s at "
                            f"{self.tracking_uri}: rank 0 creates it (when it calls AppRun.run_from_env() "
                            "or writes first); raise join_timeout in the tracker config if rank 0 starts later"
                        )
                    time.sleep(0.5)
                    run = self.find_run(run_id)
            elif prime and is_rank0() and run.info.status != "RUNNING":
                self.client.update_run(run.info.run_id, status="RUNNING")  # a retried job
                _finish_at_exit(self.client, run.info.run_id)
            assert run is not None
            self._runs[run_id] = run.info.run_id
            return run.info.run_id

    def _read_run(self, run_id: str) -> Optional["Run"]:
        mid = self._runs.get(run_id)
        return self.client.get_run(mid) if mid is not None else self.find_run(run_id)

    def _log(self, mid: str, params: Iterable[Tuple[str, str]] = (), tags: Iterable[Tuple[str, str]] = ()) -> None:
        from mlflow.entities import Param, RunTag
        from mlflow.exceptions import MlflowException

        entities: List[Any] = [Param(k, v) for k, v in params] + [RunTag(k, v) for k, v in tags]
        for i in range(0, len(entities), _BATCH):
            chunk = entities[i:i + _BATCH]
            params_ = [e for e in chunk if isinstance(e, Param)]
            tags_ = [e for e in chunk if isinstance(e, RunTag)]
            try:
                try:
                    self.client.log_batch(mid, params=params_, tags=tags_)
                except MlflowException as e:
                    if e.error_code == "INVALID_PARAMETER_VALUE":
                        raise
                    # every rank of a job logs the same params: two inserts of one param at
                    # once fail in the store (sqlite: "UNIQUE constraint failed"); the first
                    # has committed, and logging a param again with its value is allowed
                    self.client.log_batch(mid, params=params_, tags=tags_)
            except MlflowException as e:
                if e.error_code == "INVALID_PARAMETER_VALUE":
                    msg = str(e.message).removeprefix("INVALID_PARAMETER_VALUE: ")
                    raise ValueError(f"MLflow refused: {msg}") from None
                raise

    # -- TrackerBase ----------------------------------------------------------------------------
    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        """Log ``kwargs`` as params of the run (nested mappings flattened to ``a.b``).

        Raises:
            ValueError: MLflow refused a param (a changed value, a bad key or a too long value).
        """
        if not kwargs:
            return
        self._log(self._write_run(run_id), params=[(k, str(v)) for k, v in _flatten(kwargs)])

    def metadata(self, run_id: str) -> Mapping[str, object]:
        """The run's params (strings), or {} for an unknown run."""
        run = self._read_run(run_id)
        return dict(run.data.params) if run is not None else {}

    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Optional[Mapping[str, object]] = None
    ) -> None:
        """Upload ``path`` under artifact path ``name`` when it is a local file or directory
        (else record the URL as it is), and tag the run with its location and ``metadata``.

        Raises:
            ValueError: a bad artifact name or metadata key.
        """
        _check_artifact_name(name)
        mid = self._write_run(run_id)
        local = str(path)[len("file://"):] if str(path).startswith("file://") else str(path)
        where = str(path)
        if "://" not in local and os.path.exists(local):
            run = self.client.get_run(mid)
            if os.path.isdir(local):
                self.client.log_artifacts(mid, local, artifact_path=name)
                where = f"{run.info.artifact_uri}/{name}"
            else:
                self.client.log_artifact(mid, local, artifact_path=name)
                where = f"{run.info.artifact_uri}/{name}/{os.path.basename(local)}"
        prefix = f"{TAG_ARTIFACT}{name}/"
        tags = [(prefix + "path", where)]
        tags += [(f"{prefix}metadata/{k}", json.dumps(v, default=str)) for k, v in (metadata or {}).items()]
        stale = [k for k in self.client.get_run(mid).data.tags
                 if k.startswith(prefix + "metadata/") and k not in dict(tags)]
        for key in stale:  # an artifact recorded again replaces the old metadata
            self.client.delete_tag(mid, key)
        self._log(mid, tags=tags)

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        """The artifacts recorded by :meth:`add_artifact` (by name), {} for an unknown run."""
        run = self._read_run(run_id)
        if run is None:
            return {}
        paths: Dict[str, str] = {}
        metas: Dict[str, Dict[str, object]] = {}
        for key, value in run.data.tags.items():
            if not key.startswith(TAG_ARTIFACT):
                continue
            name, _, rest = key[len(TAG_ARTIFACT):].partition("/")
            if rest == "path":
                paths[name] = value
            elif rest.startswith("metadata/"):
                try:
                    metas.setdefault(name, {})[rest[len("metadata/"):]] = json.loads(value)
                except ValueError:
                    metas.setdefault(name, {})[rest[len("metadata/"):]] = value
        return {n: TrackerArtifact(n, p, metas.get(n)) for n, p in sorted(paths.items())}

    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        """Tag the run with its source (idempotent); see the module doc."""
        mid = self._write_run(run_id)
        record = json.dumps({"source_run_id": source_id, "artifact_name": artifact_name, "time_ns": time.time_ns()})
        tags = [(TAG_SOURCE + _digest(source_id, artifact_name), record), (TAG_PARENT + _digest(source_id), source_id)]
        run = self.client.get_run(mid)
        if TAG_MLFLOW_PARENT not in run.data.tags:
            parent = self.find_run(source_id)
            if parent is not None and parent.info.run_id != mid:
                tags.append((TAG_MLFLOW_PARENT, parent.info.run_id))
        self._log(mid, tags=tags)

    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        run = self._read_run(run_id)
        if run is None:
            return []
        found = []
        for key, value in run.data.tags.items():
            if key.startswith(TAG_SOURCE):
                rec = json.loads(value)
                if artifact_name is None or rec.get("artifact_name") == artifact_name:
                    found.append((rec.get("time_ns", 0), TrackerSource(rec["source_run_id"], rec.get("artifact_name"))))
        return [s for _, s in sorted(found, key=lambda t: t[0])]

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        """Names of the runs tx recorded (tag ``tx.run_id``), sorted; ``parent_run_id=ID``:
        those with source ``ID``.

        Raises:
            ValueError: another filter.
        """
        unknown = set(kwargs) - {"parent_run_id"}
        if unknown:
            raise ValueError(f"unsupported run_ids filter(s) {sorted(unknown)}: the mlflow tracker filters by parent_run_id")
        parent = kwargs.get("parent_run_id")
        if parent is not None:
            flt = f"tags.`{TAG_PARENT}{_digest(parent)}` = {_quote(parent)}"
        else:
            flt = f"tags.`{TAG_RUN_ID}` LIKE '%'"
        return sorted({r.data.tags.get(TAG_RUN_ID) or r.info.run_name for r in self._search(flt)})


_to_finish: Dict[str, Any] = {}
_failed = {"flag": False}


def _finish_at_exit(client: Any, mlflow_run_id: str) -> None:
    """End the run when this process exits: FAILED after an uncaught exception, else FINISHED."""
    if not _to_finish:
        atexit.register(_finish_all)
        previous = sys.excepthook

        def hook(*exc: Any) -> None:
            _failed["flag"] = True
            previous(*exc)

        sys.excepthook = hook
    _to_finish[mlflow_run_id] = client


def _finish_all() -> None:
    """End the runs :func:`_finish_at_exit` registered. Bounded: one try of at most 10 s per
    run (MLflow's REST client otherwise retries for minutes when the server is gone)."""
    if not _to_finish:
        return
    status = "FAILED" if _failed["flag"] else "FINISHED"
    bounded = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    saved = {k: os.environ.get(k) for k in bounded}
    os.environ.update(bounded)
    try:
        for mid, client in list(_to_finish.items()):
            try:
                client.set_terminated(mid, status=status)
            except Exception:  # noqa: BLE001 - exiting anyway; the records are written
                pass
    finally:
        _to_finish.clear()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def create(config: Optional[str] = None) -> MLflowTracker:
    """The ``mlflow`` tracker's factory (``tx_register_trackers``): ``config`` as
    :func:`parse_config` reads it. Inside a tx job (``TX_JOB_ID`` set) rank 0 creates the
    job's run right away, so the other ranks find it (TorchX's "priming").

    Raises:
        ValueError: a bad config.
        TrackingServerUnreachable: the tracking server does not answer.
    """
    tracker = MLflowTracker(**parse_config(config))
    job_id = getenv(JOB_ID)
    if job_id and is_rank0():
        tracker._write_run(job_id, prime=True)
    return tracker
