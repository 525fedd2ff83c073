"""``torchx.tracker.mlflow``: tx-tracker-mlflow's MLflow tracker, with TorchX 0.7.0's
``MLflowTracker`` surface (:class:`MLflowTracker`) and its factory :func:`create_tracker`.

tx's tracker writes through an ``MlflowClient`` by run id, never through MLflow's "active
run", so ``get_run`` does not start a run that later MLflow calls of the process log into,
and ``close`` has no active run to end (differences in docs/migrating-from-torchx.md)."""
import dataclasses
import getpass
import os
import socket
from typing import Any, Mapping, Optional, Sequence

from tx.config import get_configs
from tx_torchx_compat._missing import reexport

_mlflow = reexport(globals(), "tx_tracker_mlflow.tracker", "tx-tracker-mlflow")

#: the variables that name the experiment when the constructor is given none
_EXPERIMENT_VARS = ("TX_TRACKING_EXPERIMENT_NAME", "TORCHX_TRACKING_EXPERIMENT_NAME")


class MLflowTracker(_mlflow.MLflowTracker):  # type: ignore[misc,valid-type]
    """tx's MLflow tracker with TorchX 0.7.0's public members.

    Args:
        experiment_name: the experiment runs are created in (None:
            ``$TX_TRACKING_EXPERIMENT_NAME``, ``$TORCHX_TRACKING_EXPERIMENT_NAME``, else
            :meth:`default_experiment_name`, TorchX's default).
        tracking_uri: MLflow's tracking URI (None: MLflow's default, ``$MLFLOW_TRACKING_URI``
            or ``./mlruns``; TorchX's default is ``file://<tmp>/torchx/mlruns``).
        artifact_location: the artifact root of an experiment this tracker creates.
        kwargs: tx's other options (``join_timeout``).

    Raises:
        TrackingServerUnreachable: an ``http(s)`` tracking server does not answer.
    """

    def __init__(self, experiment_name: Optional[str] = None, tracking_uri: Optional[str] = None,
                 artifact_location: Optional[str] = None, **kwargs: Any) -> None:
        if experiment_name is None and not any(os.environ.get(v) for v in _EXPERIMENT_VARS):
            experiment_name = self.default_experiment_name()
        super().__init__(experiment_name=experiment_name, tracking_uri=tracking_uri,
                         artifact_location=artifact_location, **kwargs)

    @staticmethod
    def default_experiment_name() -> str:
        """TorchX's default experiment: ``default-experiment/<user>/<host FQDN>``."""
        return f"default-experiment/{getpass.getuser()}/{socket.getfqdn()}"

    @property
    def experiment(self) -> Any:
        """The ``mlflow.entities.Experiment`` of :attr:`experiment_name` (created when missing)."""
        return self.client.get_experiment(self._experiment_id())

    @property
    def experiment_id(self) -> str:
        """The id of :attr:`experiment_name` (created when missing)."""
        return self._experiment_id()

    def get_run(self, run_name: str) -> Any:
        """The ``mlflow.entities.Run`` named ``run_name`` (a tx run id), created in
        :attr:`experiment_name` when there is none; read afresh on every call.

        Raises:
            RuntimeError: several runs have that name (TorchX's error).
        """
        try:
            mid = self._write_run(run_name)
        except _mlflow.DuplicateRunError as e:
            raise RuntimeError(f"More than 1 run found for run_name `{run_name}` in experiment "
                               f"`{self.experiment_name}`: {e}") from None
        return self.client.get_run(mid)

    def get_run_id(self, run_name: str) -> str:
        """MLflow's id of the run :meth:`get_run` returns."""
        return str(self.get_run(run_name).info.run_id)

    def close(self) -> None:
        """Forget the runs this tracker looked up (the next call reads them again). tx's
        writes name their run, so there is no MLflow active run to end; the job's own run
        ends when its process exits."""
        self._runs.clear()

    def log_params_flat(self, run_name: str, cfg: Any, key: str = "") -> None:
        """Log ``cfg`` (a dataclass, mapping or sequence) as params of run ``run_name``,
        flattened as TorchX does: mapping keys and dataclass fields joined with ``.``, the
        elements of a sequence of non-primitives as ``<key>._<index>``; a sequence of
        primitives, an empty container and a primitive are logged as their ``str()``.

        Raises:
            ValueError: MLflow refused a param (a changed value, a bad key, a long value).
        """
        params: list = []
        _flat(cfg, key, params)
        self._log(self._write_run(run_name), params=params)


def _primitive(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool))


def _flat(cfg: Any, key: str, out: list) -> None:
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        cfg = dataclasses.asdict(cfg)
    prefix = f"{key}." if key else ""
    if not cfg or _primitive(cfg):
        out.append((key, str(cfg)))
    elif isinstance(cfg, Mapping):
        for k, v in cfg.items():
            if _primitive(v):
                out.append((f"{prefix}{k}", str(v)))
            else:
                _flat(v, f"{prefix}{k}", out)
    elif isinstance(cfg, (Sequence, set)):
        if _primitive(next(iter(cfg))):
            out.append((key, str(cfg)))
        else:
            for i, e in enumerate(cfg):
                _flat(e, f"{prefix}_{i}", out)
    else:
        out.append((key, str(cfg)))


def create_tracker(config: str) -> MLflowTracker:
    """TorchX 0.7.0's entry point: an :class:`MLflowTracker` whose keyword arguments
    (``tracking_uri``, ``artifact_location``, ``experiment_name``) are the keys of the
    ``[tracker:mlflow]`` section of the ``.torchxconfig`` in directory ``config`` (its
    ``config`` key is skipped); ``$TORCHX_TRACKING_EXPERIMENT_NAME`` wins over the
    section's ``experiment_name``.

    Raises:
        TypeError: the section has a key ``MLflowTracker`` does not take.
    """
    kwargs = dict(get_configs(prefix="tracker", name="mlflow", dirs=[config]))
    kwargs.pop("config", None)
    experiment = os.getenv("TORCHX_TRACKING_EXPERIMENT_NAME", kwargs.pop("experiment_name", None))
    return MLflowTracker(experiment_name=experiment, **kwargs)
