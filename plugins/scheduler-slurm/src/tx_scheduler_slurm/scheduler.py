"""The ``slurm`` scheduler: apps as heterogeneous Slurm batch jobs.

* submit: ``sbatch --parsable`` of the script :mod:`tx_scheduler_slurm.request` builds; the
  job id is the app id (handle ``slurm://<session>/<jobid>``).
* status: ``squeue --states=all`` while slurmctld keeps the job (pending, running, and
  finished for ``MinJobAge`` seconds); then ``sacct`` where accounting is enabled, or the
  jobcomp/filetxt file where it is readable. Clusters without accounting work: a failing
  ``sacct`` only means "no record there".
* logs: ``slurm-<jobid>-<role>-<replica>.{out,err}`` in the job's working directory
  (``job_dir``, else the directory tx ran in), which must be visible from here (a shared
  filesystem, as on any Slurm cluster).
* cancel: ``scancel``.

Slurm docs: https://slurm.schedmd.com/sbatch.html, https://slurm.schedmd.com/squeue.html,
https://slurm.schedmd.com/sacct.html, https://slurm.schedmd.com/scontrol.html,
https://slurm.schedmd.com/heterogeneous_jobs.html.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
from typing import Any, Callable, Iterable, Iterator, List, Mapping, Optional, Tuple

from tx.log import get_logger
from tx.schedulers import DescribeAppResponse, ListAppResponse, Scheduler, Stream, filter_regex, split_lines
from tx.specs import AppDef, AppDryRunInfo, CfgVal, InvalidRunConfigException, is_terminal, runopts

from tx_scheduler_slurm import _cmd
from tx_scheduler_slurm._cmd import SlurmCommandError, SlurmError, SlurmNotInstalledError, SlurmTimeoutError
from tx_scheduler_slurm._cluster import ClusterInfo, query_cluster
from tx_scheduler_slurm._logs import iter_blocks
from tx_scheduler_slurm._parse import (
    SACCT_FIELDS, JobRecord, parse_config, parse_jobcomp, parse_sacct, parse_squeue, squeue_format,
)
from tx_scheduler_slurm._states import appstate_from_slurm
from tx_scheduler_slurm._status import build_describe, group_replicas
from tx_scheduler_slurm.options import check_cfg, slurm_runopts, workdir_of
from tx_scheduler_slurm.request import SlurmBatchRequest, build_request, log_file, total_replicas, validate_app

__all__ = [
    "SlurmCommandError", "SlurmError", "SlurmNotInstalledError", "SlurmScheduler", "SlurmTimeoutError",
    "create_scheduler",
]

log = get_logger(__name__)

_APP_ID = re.compile(r"^\d+$")
SCRIPT_NAME = "tx-sbatch.sh"


class SlurmScheduler(Scheduler[SlurmBatchRequest]):
    """Runs apps on the Slurm cluster whose client commands are on PATH (``SLURM_CONF``
    selects the cluster as for any Slurm command).

    Args:
        session_name: the session part of app handles.
        cluster: fixed cluster facts for dryrun (partitions, version) instead of asking
            ``sinfo``; for offline dryruns and tests.
        timeout: seconds each Slurm command may take (default ``$TX_SLURM_TIMEOUT`` or 30).

    Jobs run in ``job_dir`` or in the directory tx runs in, with the submitter's
    environment (sbatch's default ``--export=ALL``), so an activated virtualenv carries over.
    """

    #: ``--workspace DIR`` with run option ``job_dir``: the workspace is copied into the new
    #: job directory (core's ``dir`` kind, :class:`tx.workspace.dir_workspace.DirWorkspace`)
    workspace_kind = "dir"

    def __init__(self, session_name: str, cluster: Optional[ClusterInfo] = None,
                 timeout: Optional[float] = None) -> None:
        super().__init__("slurm", session_name)
        self._cluster = cluster
        self._timeout = timeout
        self._accounting: Optional[bool] = None  # learnt from the first sacct call
        self._jobcomp_path: Optional[str] = None  # "" once known to be unusable

    # -- options and dryrun ------------------------------------------------------------
    def _run_opts(self) -> runopts:
        return slurm_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without resources are allowed (Slurm's defaults apply); see
        :func:`tx_scheduler_slurm.request.validate_app` and
        :func:`tx_scheduler_slurm.options.check_cfg` for what is rejected."""
        validate_app(app)
        check_cfg(cfg)

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[SlurmBatchRequest]:
        check_cfg(cfg)
        cluster = self._cluster if self._cluster is not None else query_cluster(self._timeout)
        name = str(cfg["partition"]) if cfg.get("partition") is not None else None
        self._check_partitions(app, cluster, name, cfg)
        req = build_request(
            app, cfg,
            workdir=workdir_of(cfg),
            nomem=cluster.nomem(name),
            gpus_per_node=cluster.gpus_per_node(),
        )
        return AppDryRunInfo(req, repr)

    @staticmethod
    def _check_partitions(app: AppDef, cluster: ClusterInfo, name: Optional[str], cfg: Mapping[str, CfgVal]) -> None:
        """Where ``sinfo`` answered: every named partition (``a,b`` lists several) exists,
        and the largest has a node for each replica (het components never share nodes)."""
        if not cluster.partitions:
            return
        names = [n for n in name.split(",") if n] if name is not None else [None]
        parts = []
        for n in names:
            p = cluster.partition(n)
            if n is not None and p is None:
                raise InvalidRunConfigException(
                    f"run option 'partition': no partition {n!r} on this cluster; "
                    f"partitions: {', '.join(sorted(cluster.partitions))}",
                    "partition", cfg,
                )
            if p is not None:
                parts.append(p)
        if not parts:
            return
        largest = max(parts, key=lambda p: p.nodes)
        needed = total_replicas(app)
        if needed > largest.nodes:
            per_role = ", ".join(f"{r.name}: {r.num_replicas}" for r in app.roles)
            raise ValueError(
                f"app {app.name!r} needs {needed} nodes ({per_role}) but partition "
                f"{largest.name!r} has {largest.nodes}: each replica is a component of a "
                "heterogeneous job and Slurm never puts two components on one node"
            )

    # -- submit ---------------------------------------------------------------------------
    def schedule(self, dryrun_info: AppDryRunInfo[SlurmBatchRequest]) -> str:
        """Submit the batch job; returns its job id.

        Raises:
            SlurmNotInstalledError: sbatch is not on PATH.
            SlurmCommandError: sbatch refused the job (its error in the message).
        """
        req = dryrun_info.request
        script = req.materialize()
        cmd = list(req.cmd)
        stdin: Optional[str] = script
        if req.job_dir:
            os.makedirs(req.job_dir, exist_ok=True)
            path = os.path.join(os.path.abspath(req.job_dir), SCRIPT_NAME)
            with open(path, "w", encoding="utf-8") as f:
                f.write(script)
            cmd.append(path)
            stdin = None
        out = _cmd.run(cmd, self._timeout, input=stdin)
        job_id = out.stdout.strip().split(";")[0].strip()
        if not _APP_ID.match(job_id):
            raise SlurmError(f"sbatch printed no job id (stdout {out.stdout.strip()!r})")
        log.info("slurm_submitted", app_id=job_id, components=len(req.replicas))
        return job_id

    # -- status ---------------------------------------------------------------------------
    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state, replicas (with exit codes and hosts) and rebuilt roles; None if
        Slurm does not know the job (or ``app_id`` is not a job id).

        Raises:
            SlurmNotInstalledError, SlurmTimeoutError, SlurmCommandError: squeue failed.
        """
        records, source = self._records(app_id)
        if not records:
            return None
        return build_describe(app_id, records, source)

    def _records(self, app_id: str) -> Tuple[List[JobRecord], str]:
        if not _APP_ID.match(app_id):
            return [], ""
        recs = [r for r in self._squeue(["--jobs", app_id]) if r.app_id == app_id]
        if recs:
            return recs, "squeue"
        recs = self._sacct(["--jobs", app_id], app_id)
        if recs:
            return recs, "sacct"
        recs = self._jobcomp(app_id)
        return (recs, "jobcomp") if recs else ([], "")

    def _squeue(self, extra: List[str]) -> List[JobRecord]:
        argv = ["squeue", "--noheader", "--noconvert", "--states=all", f"--Format={squeue_format()}", *extra]
        proc = _cmd.run(argv, self._timeout, check=False)
        if proc.returncode != 0:
            if "Invalid job id" in proc.stderr:  # purged from slurmctld's memory, or never was
                return []
            raise SlurmCommandError(argv, proc.returncode, proc.stderr)
        return parse_squeue(proc.stdout)

    def _sacct(self, extra: List[str], app_id: Optional[str] = None) -> List[JobRecord]:
        if self._accounting is False:
            return []
        argv = ["sacct", "--parsable2", "--noheader", "--allocations", f"--format={','.join(SACCT_FIELDS)}", *extra]
        try:
            proc = _cmd.run(argv, self._timeout, check=False)
        except SlurmError as e:  # sacct missing or hung: no accounting records
            log.debug("slurm_sacct_unavailable", error=str(e))
            self._accounting = False
            return []
        if proc.returncode != 0:
            err = proc.stderr.lower()
            if "accounting storage is disabled" in err or "not configured" in err:
                self._accounting = False
            else:
                log.warning("slurm_sacct_failed", error=" ".join(proc.stderr.split()))
            return []
        self._accounting = True
        recs = parse_sacct(proc.stdout)
        return [r for r in recs if r.app_id == app_id] if app_id is not None else recs

    def _jobcomp(self, app_id: str) -> List[JobRecord]:
        if self._jobcomp_path is None:
            self._jobcomp_path = ""
            try:
                conf = parse_config(_cmd.run(["scontrol", "show", "config"], self._timeout).stdout)
            except SlurmError as e:
                log.debug("slurm_config_unavailable", error=str(e))
                return []
            loc = conf.get("JobCompLoc", "")
            if conf.get("JobCompType") == "jobcomp/filetxt" and os.access(loc, os.R_OK):
                self._jobcomp_path = loc
        if not self._jobcomp_path:
            return []
        try:
            with open(self._jobcomp_path, encoding="utf-8", errors="replace") as f:
                return parse_jobcomp(f.read(), app_id)
        except OSError:
            return []

    def list(self) -> List[ListAppResponse]:
        """The current user's jobs: those slurmctld keeps (any state) and, with accounting,
        those in ``sacct`` since 1970; one entry per het job (its leader's job name)."""
        user = str(os.getuid())  # squeue and sacct take a uid; no passwd lookup needed
        apps = {}
        for rec in self._squeue(["--user", user]):
            if rec.job_id == rec.app_id:
                apps[rec.app_id] = ListAppResponse(rec.app_id, appstate_from_slurm(rec.state), name=rec.name)
        for rec in self._sacct(["--user", user, "--starttime=1970-01-01T00:00:01"]):
            if rec.offset == 0 and rec.app_id not in apps:
                apps[rec.app_id] = ListAppResponse(rec.app_id, appstate_from_slurm(rec.state), name=rec.name)
        return [apps[k] for k in sorted(apps, key=int)]

    def _cancel_existing(self, app_id: str) -> None:
        """``scancel`` the job (every component); a job that just ended is not an error."""
        proc = _cmd.run(["scancel", app_id], self._timeout, check=False)
        if proc.returncode != 0 and "already completing or completed" not in proc.stderr:
            raise SlurmCommandError(["scancel", app_id], proc.returncode, proc.stderr)
        log.info("slurm_cancelled", app_id=app_id)

    # -- logs -----------------------------------------------------------------------------
    def _log_path(self, app_id: str, role_name: str, k: int, streams: Optional[Any]) -> str:
        stream = Stream(streams) if streams is not None else Stream.STDOUT
        if stream == Stream.COMBINED:
            raise ValueError(
                "the slurm scheduler keeps stdout and stderr in separate files: "
                "use streams=stdout or streams=stderr"
            )
        records, _ = self._records(app_id)
        work_dir = os.getcwd()
        if records:
            replicas = group_replicas(records)
            if not any(idx == k for idx, _ in replicas.get(role_name, [])):
                known = ", ".join(f"{r}/{i}" for r, reps in replicas.items() for i, _ in reps)
                raise ValueError(f"app {app_id} has no replica {role_name}/{k}; replicas: {known}")
            work_dir = min(records, key=lambda r: r.offset).work_dir or work_dir
        ext = "out" if stream == Stream.STDOUT else "err"
        return os.path.join(work_dir, log_file(app_id, role_name, k, ext))

    def _done(self, app_id: str) -> Callable[[], bool]:
        def done() -> bool:
            records, _ = self._records(app_id)
            if not records:
                return True
            return is_terminal(appstate_from_slurm(min(records, key=lambda r: r.offset).state))

        return done

    def log_iter_blocks(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[bytes]:
        """The replica's log file as byte blocks of whole lines; with ``should_tail``,
        followed until the app is terminal (requeues included).

        Args:
            streams: ``stdout`` (default: the program's output) or ``stderr``.

        Raises:
            ValueError: ``streams`` is ``combined``, or the app has no such replica.
        """
        path = self._log_path(app_id, role_name, k, streams)
        return iter_blocks(path, self._done(app_id) if should_tail else None)

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[_dt.datetime] = None,
        until: Optional[_dt.datetime] = None,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[str]:
        """Lines (each with its ``\\n``) of ``slurm-<app_id>-<role>-<k>.out`` (or ``.err``).

        Args:
            regex: keep only lines where it is found.
            since, until: ignored: Slurm's log files carry no times (logged at debug level).
            should_tail: follow the file until the app is terminal.
            streams: ``stdout`` (default) or ``stderr``; ``combined`` is not kept.

        Raises:
            ValueError: ``streams`` is ``combined``, or the app has no such replica.
        """
        if since or until:
            log.debug("slurm_log_times_ignored", app_id=app_id)
        blocks = self.log_iter_blocks(app_id, role_name, k, should_tail, streams)
        return filter_regex(regex, _lines(blocks))


def _lines(blocks: Iterable[bytes]) -> Iterator[str]:
    for block in blocks:
        yield from split_lines(block.decode("utf-8", "replace"))


def create_scheduler(
    session_name: str,
    cluster: Optional[ClusterInfo] = None,
    timeout: Optional[float] = None,
    **kwargs: Any,
) -> SlurmScheduler:
    """Factory registered as ``slurm`` (see :class:`SlurmScheduler` for the arguments).
    Other keyword arguments (scheduler parameters meant for other schedulers) are ignored."""
    if kwargs:
        log.debug("slurm_ignored_scheduler_params", params=sorted(kwargs))
    return SlurmScheduler(session_name, cluster=cluster, timeout=timeout)
