"""``torchx.schedulers.slurm_scheduler``: tx-scheduler-slurm's ``tx_scheduler_slurm.scheduler``,
plus TorchX 0.7.0's ``SLURM_STATES`` (Slurm job state -> AppState), ``SlurmOpts`` and the
request classes ``SlurmBatchRequest`` / ``SlurmReplicaRequest`` (tx's, from
``tx_scheduler_slurm.request``; see :class:`SlurmReplicaRequest` for how their shape differs)."""
import importlib
import os
from typing import Any, List, Mapping, Optional, Tuple, TypedDict

from tx.specs.api import AppDef, AppState, Role
from tx_torchx_compat._missing import reexport
from tx_torchx_compat.scheduler_api import IgnoresMounts

_slurm = reexport(globals(), "tx_scheduler_slurm.scheduler", "tx-scheduler-slurm")
# by name, as reexport does (a plugin is never imported statically; it is importable once
# reexport returned): its request module is the same distribution's
_request = importlib.import_module("tx_scheduler_slurm.request")

#: tx's batch request: ``cmd``, ``replicas``, ``job_dir``, ``max_retries`` as TorchX's, plus
#: tx's ``workdir``, ``infra_retries`` and ``appdef``; ``materialize()`` gives the script
SlurmBatchRequest = _request.SlurmBatchRequest

SlurmOpts = TypedDict(
    "SlurmOpts",
    {
        "partition": str,
        "time": str,
        "comment": Optional[str],
        "constraint": Optional[str],
        "mail-user": Optional[str],
        "mail-type": Optional[str],
        "job_dir": Optional[str],
    },
    total=False,
)
SlurmOpts.__doc__ = "TorchX 0.7.0's run options of ``slurm`` (tx's ``slurm`` takes more: ``tx runopts slurm``)."


class SlurmReplicaRequest(_request.SlurmReplicaRequest):  # type: ignore[misc,valid-type]
    """tx's replica request (one het-job component), with TorchX 0.7.0's ``from_role`` and
    ``materialize``.

    Its fields are TorchX's (``name``, ``entrypoint``, ``args``, ``srun_opts``,
    ``sbatch_opts``, ``env``) plus tx's ``role``, ``replica_id`` and ``job_name``; the values
    are tx's: ``env`` carries tx's per-replica variables, ``srun_opts`` tx's log files, and the
    srun group runs the entrypoint through tx's launcher (see tx-scheduler-slurm).
    """

    @classmethod
    def from_role(cls, name: str, role: Role, cfg: Mapping[str, Any], nomem: bool) -> "SlurmReplicaRequest":
        """The request of replica 0 of ``role`` under the component name ``name``, built by
        tx's ``build_request`` with run options ``cfg``; ``nomem`` leaves ``--mem`` out.

        Raises:
            ValueError: a role tx cannot submit (no entrypoint, a bad role name).
        """
        app = AppDef(name=name, roles=[role])
        req = _request.build_request(app, cfg, workdir=os.getcwd(), nomem=nomem)
        first = next(iter(req.replicas.values()))
        fields = {f: getattr(first, f) for f in ("role", "replica_id", "job_name", "entrypoint", "args", "env",
                                                "sbatch_opts", "srun_opts")}
        return cls(name=name, **fields)

    def materialize(self) -> Tuple[List[str], List[str]]:
        """TorchX's pair: the component's sbatch options (``--job-name=...`` first) and its
        srun group (shell words, tx's launcher included)."""
        opts = [f"--{k}" if v is None else f"--{k}={v}" for k, v in self.sbatch_opts.items()]
        return [f"--job-name={self.job_name}", *opts], self.srun_words()


#: Slurm's job states (https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES) as
#: TorchX 0.7.0 maps them (tx-scheduler-slurm maps more states, the same way)
SLURM_STATES: Mapping[str, AppState] = {
    "BOOT_FAIL": AppState.FAILED,
    "CANCELLED": AppState.CANCELLED,
    "COMPLETED": AppState.SUCCEEDED,
    "DEADLINE": AppState.FAILED,
    "FAILED": AppState.FAILED,
    "NODE_FAIL": AppState.FAILED,
    "OUT_OF_MEMORY": AppState.FAILED,
    "PENDING": AppState.PENDING,
    "PREEMPTED": AppState.FAILED,
    "RUNNING": AppState.RUNNING,
    "REQUEUED": AppState.PENDING,
    "RESIZING": AppState.PENDING,
    "REVOKED": AppState.FAILED,
    "SUSPENDED": AppState.PENDING,
    "TIMEOUT": AppState.FAILED,
}


class SlurmScheduler(IgnoresMounts, _slurm.SlurmScheduler):  # type: ignore[misc,valid-type]
    """tx's Slurm scheduler (same arguments), as TorchX 0.7.0's: roles' mounts are dropped
    with a warning, as TorchX ignores them (tx's refuses them)."""


def create_scheduler(session_name: str, **kwargs: Any) -> SlurmScheduler:
    """TorchX 0.7.0's factory: a :class:`SlurmScheduler`; tx's keyword arguments
    (``cluster``, ``timeout``) are passed on, other scheduler params are ignored, as TorchX does."""
    own = {k: v for k, v in kwargs.items() if k in ("cluster", "timeout")}
    return SlurmScheduler(session_name, **own)
