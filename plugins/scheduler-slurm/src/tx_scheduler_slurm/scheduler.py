"""The ``slurm`` scheduler: apps as heterogeneous Slurm batch jobs.

* submit: ``sbatch --parsable`` of the script :mod:`tx_scheduler_slurm.request` builds; the
  job id is the app id (handle ``slurm://<session>/<jobid>``).
* status: ``squeue --states=all`` while slurmctld keeps the job (pending, running, and
  finished for ``MinJobAge`` seconds), one ``squeue --user <uid>`` for every app followed,
  shared by the tx processes of the host for a short time (:mod:`tx_scheduler_slurm._plane`);
  then ``sacct`` where accounting is enabled, or the
  jobcomp/filetxt file where it is readable. Clusters without accounting work: a failing
  ``sacct`` only means "no record there".
* logs: ``slurm-<jobid>-<role>-<replica>.{out,err}`` in the job's working directory
  (``job_dir``, else the directory tx ran in), which must be visible from here (a shared
  filesystem, as on any Slurm cluster): :mod:`tx_scheduler_slurm._logs`.
* cancel: ``scancel``.

Slurm docs: https://slurm.schedmd.com/sbatch.html, https://slurm.schedmd.com/squeue.html,
https://slurm.schedmd.com/sacct.html, https://slurm.schedmd.com/scontrol.html,
https://slurm.schedmd.com/heterogeneous_jobs.html.
"""
from __future__ import annotations

import os
import time

import attrs
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tx import get_logger
from tx.schedulers import DescribeAppResponse, ListAppResponse, PartialListError, Scheduler, read_text, write_atomic
from tx.specs import AppDef, AppDryRunInfo, AppState, CfgVal, read_stored_appdef_and_options, runopts

from tx_scheduler_slurm import _client, _index, _plane, _sbatch
from tx_scheduler_slurm._sbatch import SCRIPT_NAME  # noqa: F401 - its home before _sbatch
from tx_scheduler_slurm._attempts import build_attempts, read_attempts_file
from tx_scheduler_slurm._preempt import parse_grace, preempted_reason, read_preempted
from tx_scheduler_slurm._client import SlurmCommandError, SlurmError, SlurmNotInstalledError, SlurmTimeoutError
from tx_scheduler_slurm._cluster import ClusterInfo, check_partitions, hostnames, query_cluster
from tx_scheduler_slurm._logs import LogFiles
from tx_scheduler_slurm._parse import (
    APP_ID, SACCT_FIELDS, JobRecord, in_array_tasks, jobcomp_history, parse_config, parse_jobcomp, parse_sacct,
    parse_squeue, squeue_format,
)
from tx_scheduler_slurm._states import appstate_from_slurm
from tx_scheduler_slurm._status import build_describe
from tx_scheduler_slurm.options import check_cfg, slurm_runopts, workdir_of
from tx_scheduler_slurm._array import SlurmArrayRequest, array_unsupported, scancel_words
from tx_scheduler_slurm.request import SlurmBatchRequest, appdef_file, attempts_file, build_request, validate_app

__all__ = [
    "SlurmCommandError", "SlurmError", "SlurmNotInstalledError", "SlurmScheduler", "SlurmTimeoutError",
    "create_scheduler",
]

log = get_logger(__name__)


def _id_key(app_id: str) -> Tuple[int, ...]:
    """Sort key of app ids: numeric, an array's tasks after their array job id."""
    return tuple(int(p) for p in app_id.split("_"))


#: seconds a dryrun reuses the cluster facts ``sinfo`` gave (a sweep's trials share them)
CLUSTER_TTL_S = 30.0


class SlurmScheduler(LogFiles, Scheduler[SlurmBatchRequest]):
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
    #: roles with mounts are refused (validate); the torchx command drops them with a warning
    supports_mounts = False

    def __init__(self, session_name: str, cluster: Optional[ClusterInfo] = None,
                 timeout: Optional[float] = None) -> None:
        super().__init__("slurm", session_name)
        self._cluster = cluster
        self._timeout = timeout
        self._accounting: Optional[bool] = None  # learnt from the first sacct call
        self._jobcomp_path: Optional[str] = None  # "" once known to be unusable
        self._acct_configured: Optional[bool] = None
        self._queried: Optional[Tuple[float, ClusterInfo]] = None  # (when, query_cluster's answer)
        self._partitions: Optional[Tuple[float, str]] = None  # (when, scontrol show partition's answer)
        self._config_limits: Optional[Tuple[float, Dict[str, int]]] = None  # (when, MaxArraySize...)

    # -- options and dryrun ------------------------------------------------------------
    def _run_opts(self) -> runopts:
        return slurm_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without resources are allowed (Slurm's defaults apply); see
        :func:`tx_scheduler_slurm.request.validate_app` and
        :func:`tx_scheduler_slurm.options.check_cfg` for what is rejected (a sweep's ``cfg``: once)."""
        validate_app(app)
        if not self._many:
            check_cfg(cfg)

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[SlurmBatchRequest]:
        if not self._many:  # else checked once for all, and app validated just before (_validate)
            check_cfg(cfg)
        cluster = self._cluster_info()
        name = str(cfg["partition"]) if cfg.get("partition") is not None else None
        check_partitions(app, cluster, name, cfg)
        nodes = None
        if cfg.get("nodelist") is not None:
            nodes = hostnames(str(cfg["nodelist"]), self._timeout)
        req = build_request(
            app, cfg,
            workdir=workdir_of(cfg),
            nomem=cluster.nomem(name),
            gpus_per_node=cluster.gpus_per_node(),
            nodes=nodes,
            grace=self._grace(name) if cfg.get("signal") is None else None,
            defer_appdef=self._many, validated=self._many,
        )
        return AppDryRunInfo(req, repr)

    def submit_dryrun_many(self, apps: Any, cfg: Mapping[str, CfgVal]) -> List[AppDryRunInfo[SlurmBatchRequest]]:
        """:meth:`tx.schedulers.Scheduler.submit_dryrun_many` (raises as it does), each trial's
        stored AppDef (``SlurmBatchRequest.appdef``: an array's tasks keep none) made on first
        use: the first's now (one that cannot be stored is refused at dryrun), the others'
        where :meth:`submit_sweep_dryrun` finds they are one job each, or :meth:`schedule`."""
        check_cfg(self.run_opts().resolve(cfg))  # the same for every trial: once
        infos = super().submit_dryrun_many(apps, cfg)  # (with _many: trials' AppDefs deferred)
        if infos:
            _ = infos[0].request.appdef  # noqa: F841 - made now (TypeError: it cannot be stored)
        return infos

    def _grace(self, name: Optional[str]) -> Optional[int]:
        """The preemption ``GraceTime`` (s) of partition ``name`` (``a,b``: the shortest;
        None: the default partition) from ``scontrol show partition``, asked once per
        dryrun and kept for :data:`CLUSTER_TTL_S` (a sweep's trials share one answer; the
        cluster facts' own answer where they were read from it, :func:`query_cluster`);
        None where scontrol is missing or fails, or the fixed cluster facts were given (no
        cluster to ask), and without asking where the cluster facts say every one of those
        partitions has ``PreemptMode=OFF`` (no preemption, so no grace)."""
        if self._cluster is not None:
            return None
        cluster = self._cluster_info()
        parts = [cluster.partition(n) for n in (name.split(",") if name else [None])]
        if parts and all(p is not None and p.preempt_mode == "OFF" for p in parts):
            return None
        out = cluster.partition_text  # asked with the facts (as fresh as they are), else once per TTL
        now = time.monotonic()
        if out is None and (self._partitions is None or now - self._partitions[0] > CLUSTER_TTL_S):
            try:
                out = _client.run(["scontrol", "show", "partition", "--oneliner"], self._timeout).stdout
            except SlurmError as e:
                log.debug("slurm_grace_unknown", error=str(e))
                out = ""
            self._partitions = (now, out)
        out = self._partitions[1] if out is None else out  # type: ignore[index]
        graces = [g for g in (parse_grace(out, n) for n in (name.split(",") if name else [None])) if g is not None]
        return min(graces) if graces else None

    def _cluster_info(self) -> ClusterInfo:
        """The cluster facts dryruns check against: the fixed ones given, else :func:`query_cluster`'s,
        asked again after :data:`CLUSTER_TTL_S` (a sweep's trials share one answer)."""
        if self._cluster is not None:
            return self._cluster
        now = time.monotonic()
        if self._queried is None or now - self._queried[0] > CLUSTER_TTL_S:
            self._queried = (now, query_cluster(self._timeout))
        return self._queried[1]

    # -- sweeps: one job array ---------------------------------------------------------
    #: the limit :attr:`sweep_array_limit` gives, as the refusal names it
    sweep_limit_name = "MaxJobCount (each array task is one of the jobs slurmctld holds)"

    def _limits(self) -> Dict[str, int]:
        """The cluster's ``MaxArraySize`` and ``MaxJobCount`` (only those it states): from
        slurm.conf where readable (no call), else one ``scontrol show config``, kept for
        :data:`CLUSTER_TTL_S` as the other cluster facts; {} where neither answers or the
        cluster facts are fixed (offline dryruns: no limit, one array)."""
        if self._cluster is not None:
            return {}
        now = time.monotonic()
        if self._config_limits is None or now - self._config_limits[0] > CLUSTER_TTL_S:
            found = _index.limits_in_conf()
            if found is None:
                try:
                    conf = parse_config(_client.run(["scontrol", "show", "config"], self._timeout).stdout)
                    found = {k: int(conf[k]) for k in _index.DEFAULT_LIMITS if conf.get(k, "").isdigit()}
                except SlurmError as e:
                    log.debug("slurm_config_unavailable", error=str(e))
                    found = {}
            self._config_limits = (now, found)
        return self._config_limits[1]

    @property
    def sweep_array_limit(self) -> Optional[int]:  # type: ignore[override]
        """The most trials of one sweep: the cluster's ``MaxJobCount`` (each task of an
        array is one of the jobs slurmctld holds; https://slurm.schedmd.com/job_array.html),
        so that a sweep that cannot fit is refused before anything is submitted; None when
        it cannot be read. A sweep larger than ``MaxArraySize`` is several arrays
        (:meth:`submit_sweep_dryrun`)."""
        return self._limits().get("MaxJobCount")

    def _not_an_array(self, reqs: List[Any]) -> Optional[str]:
        """Why these trials cannot be job arrays (:func:`array_unsupported`, or a cluster
        whose ``MaxArraySize`` is 0: arrays disabled), else None."""
        why = array_unsupported(reqs)
        if why is None and self._limits().get("MaxArraySize") == 0:
            why = "the cluster's MaxArraySize is 0 (job arrays disabled)"
        return why

    def submit_sweep_dryrun(self, trials: Any, max_parallel: Optional[int]) -> Optional[AppDryRunInfo[Any]]:
        """One ``sbatch --array`` for trials of one replica each, or the fewest arrays of at
        most the cluster's ``MaxArraySize`` tasks
        (:class:`tx_scheduler_slurm._array.SlurmArrayRequest`); None (one job per trial)
        for heterogeneous apps, which Slurm cannot put in an array."""
        reqs = [t.request for t in trials]
        why = self._not_an_array(reqs)
        if why is not None:
            log.info("slurm_sweep_not_an_array", reason=why)
            for r in reqs:  # each trial is a job that keeps its AppDef: made now, at dryrun
                _ = r.appdef  # noqa: F841
            return None
        return AppDryRunInfo(SlurmArrayRequest(reqs, max_parallel, self._limits().get("MaxArraySize")), repr)

    def sweep_not_an_array(self, trials: Any) -> str:
        """Why these trials are one job each (:func:`tx_scheduler_slurm._array.array_unsupported`)."""
        return self._not_an_array([t.request for t in trials]) or "slurm has no array for these trials"

    def schedule_sweep(self, dryrun_info: AppDryRunInfo[Any]) -> List[str]:
        """Submit the array with one ``sbatch`` (one per array where the trials are more than
        ``MaxArraySize``: one line says so); returns ``<array job id>_<i>`` for each trial,
        in trial order. An sbatch refused cancels the arrays submitted before it and removes
        the table: nothing is left behind.

        Raises:
            SlurmNotInstalledError, SlurmCommandError: as :meth:`schedule`.
        """
        req: SlurmArrayRequest = dryrun_info.request
        req.write_table()  # the tasks read their rows from it: before sbatch
        arrays = req.arrays
        jobs: List[str] = []
        try:
            for k in range(len(arrays)):
                after = jobs[-1] if jobs and req.max_parallel else None
                jobs.append(self._sbatch(req.array_cmd(k, after), req.materialize(k), req.job_dir))
        except BaseException:
            try:
                if jobs:
                    self.cancel_many(jobs)
            finally:
                req.remove_table()  # a refused array leaves nothing behind
            raise
        ids = [f"{job}_{i}" for job, (_, size) in zip(jobs, arrays) for i in range(size)]
        log.info("slurm_submitted_array", app_id=jobs[0], arrays=len(jobs), tasks=len(ids))
        if len(jobs) > 1:
            log.warning(f"{req.split_line()}: jobs {', '.join(jobs)}")
        # one index entry per array: its tasks' replicas are alike (array_unsupported)
        for job in jobs:
            _index.record(job, req.workdir, [(r.role, r.replica_id) for r in req.trials[0].replicas.values()])
        return ids

    # -- submit ---------------------------------------------------------------------------
    def schedule(self, dryrun_info: AppDryRunInfo[SlurmBatchRequest]) -> str:
        """Submit the batch job; returns its job id.

        Raises:
            SlurmNotInstalledError: sbatch is not on PATH.
            SlurmCommandError: sbatch refused the job (its error in the message).
        """
        req = dryrun_info.request
        job_id = self._sbatch(list(req.cmd), req.materialize(), req.job_dir)
        log.info("slurm_submitted", app_id=job_id, components=len(req.replicas))
        if req.appdef and req.workdir:
            write_atomic(os.path.join(req.workdir, appdef_file(job_id)), req.appdef,
                         "slurm: the AppDef is not kept")
        _index.record(job_id, req.workdir, [(r.role, r.replica_id) for r in req.replicas.values()])
        return job_id

    def _sbatch(self, cmd: List[str], script: str, job_dir: Optional[str]) -> str:
        """:func:`tx_scheduler_slurm._sbatch.sbatch` with this scheduler's timeout and cancel."""
        return _sbatch.sbatch(cmd, script, job_dir, self._timeout, self.cancel_many)

    # -- status ---------------------------------------------------------------------------
    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state, replicas (with exit codes and hosts) and rebuilt roles; None if
        Slurm does not know the job (or ``app_id`` is not a job id).

        Raises:
            SlurmNotInstalledError, SlurmTimeoutError, SlurmCommandError: squeue failed.
        """
        records, source, fetched_at = self._records(app_id)
        if not records:
            if "_" in app_id and APP_ID.match(app_id) and _index.cancelled(app_id):
                return DescribeAppResponse(app_id=app_id, state=AppState.CANCELLED, msg=(
                    "cancelled by tx before it started (slurmctld keeps no record of a pending array task "
                    "it cancels)"))
            return None
        desc = build_describe(app_id, records, source)
        desc.metadata["status_fetched_at"] = fetched_at  # epoch s; the status is at most this old
        leader = min(records, key=lambda r: r.offset)
        work_dir = desc.metadata.get("work_dir") or ""
        stored = read_text(os.path.join(work_dir, appdef_file(app_id))) if work_dir else None
        desc.app, why, desc.metadata["run_options"] = read_stored_appdef_and_options(
            stored, f"{appdef_file(app_id)} in the job's working directory {work_dir or '(unknown)'}")
        ckpt = next((r.env.get("TX_CHECKPOINT_DIR") for r in (desc.app.roles if desc.app else [])
                     if r.env.get("TX_CHECKPOINT_DIR")), None)
        desc.attempts = build_attempts(
            desc.num_restarts, desc.state, leader.state,
            read_attempts_file(work_dir, app_id),
            self._jobcomp_history(app_id) if desc.num_restarts != 0 else [],
            {k: preempted_reason(app_id, t, ckpt)
             for k, t in read_preempted(work_dir, attempts_file(app_id)).items()} if work_dir else {},
        )
        desc.metadata["attempts"] = [a.to_json() for a in desc.attempts]
        if why:
            desc.metadata["app_not_stored"] = why
        if desc.state == AppState.PENDING and desc.num_restarts > 0 and "BeginTime" in desc.msg:
            down = self._down_nodes(leader.partition)
            if down:  # requeued, maybe after a node failure: Slurm does not say which node
                desc.msg += f"; nodes down or drained now: {down}"
        return desc

    def _down_nodes(self, partition: str = "") -> str:
        """``node4 (Not responding), node5 (drained: maint)`` from ``sinfo -R`` of the job's
        ``partition`` (a comma-separated list; "": every partition's nodes); "" when none or
        sinfo fails."""
        where = [f"--partition={partition}"] if partition else []
        try:
            out = _client.run(["sinfo", "--list-reasons", "--noheader", "--format=%N\x1f%E", *where],
                              self._timeout).stdout
        except SlurmError as e:
            log.debug("slurm_sinfo_failed", error=str(e))
            return ""
        parts = [line.split("\x1f") for line in out.splitlines() if "\x1f" in line]
        return ", ".join(f"{nodes.strip()} ({why.strip()})" for nodes, why in parts)

    def states_of(self, app_ids: Any) -> Optional[Dict[str, AppState]]:  # type: ignore[override]
        """The states of many apps (a sweep's trials): from the shared snapshot of the user's
        jobs (one ``squeue``), those it lacks from one ``sacct`` per 500 where accounting is
        configured; apps neither knows are left out (the Runner describes them).

        Raises:
            SlurmTimeoutError, SlurmCommandError: squeue failed.
        """
        snap = self._user_snapshot()
        out: Dict[str, AppState] = {}
        missing: List[str] = []
        for app_id in app_ids:
            recs = _plane.find(snap.items, app_id) if APP_ID.match(app_id) else []
            if recs:
                out[app_id] = appstate_from_slurm(min(recs, key=lambda r: r.offset).state)
            elif APP_ID.match(app_id):
                missing.append(app_id)
        for i in range(0, len(missing), 500):
            wanted = set(missing[i:i + 500])
            for rec in self._sacct(["--jobs", ",".join(missing[i:i + 500])]):
                if rec.app_id in wanted and rec.offset == 0:
                    out[rec.app_id] = appstate_from_slurm(rec.state)
        return out

    def _user_snapshot(self) -> Any:
        """The shared snapshot of this user's jobs: one ``squeue --user <uid>`` (every app
        followed on this host at once), at most ``status_max_age_s`` old
        (:mod:`tx.schedulers.plane`); a squeue that failed is shared as long (SlurmError).

        Raises:
            SlurmError: squeue failed, here or in the shared look of another process."""
        user = str(os.getuid())  # squeue takes a uid; no passwd lookup needed
        return _plane.plane().get(lambda: _plane.to_items(self._squeue(["--user", user])), shared_failure=SlurmError)

    def _records(self, app_id: str) -> Tuple[List[JobRecord], str, float]:
        """The app's records, where they came from, and when they were asked (epoch s)."""
        if not APP_ID.match(app_id):
            return [], "", time.time()
        snap = self._user_snapshot()
        recs = _plane.find(snap.items, app_id)
        if recs:
            return recs, "squeue", snap.fetched_at
        # not among the user's jobs as the snapshot saw them: submitted since, another
        # user's, or gone from slurmctld's memory: asked on its own
        asked = time.time()
        recs = [r for r in self._squeue(["--jobs", app_id]) if r.app_id == app_id]
        if recs:
            return recs, "squeue", asked
        if "_" in app_id:  # a task with no record of its own yet: its array's record
            array, task = app_id.split("_", 1)
            recs = [attrs.evolve(r, job_id=app_id, app_id=app_id) for r in self._squeue(["--jobs", array])
                    if r.job_id == array and in_array_tasks(int(task), r.array_tasks)]
            if recs:
                return recs, "squeue", asked
        recs = self._sacct(["--jobs", app_id], app_id)
        if recs:
            return recs, "sacct", asked
        recs = self._jobcomp(app_id)
        return (recs, "jobcomp", asked) if recs else ([], "", asked)

    def _squeue(self, extra: List[str]) -> List[JobRecord]:
        # --array: one line per task of a job array (a sweep's trials), pending ones too
        argv = ["squeue", "--array", "--noheader", "--noconvert", "--states=all", f"--Format={squeue_format()}",
                *extra]
        proc = _client.run(argv, self._timeout, check=False)
        if proc.returncode != 0:
            if "Invalid job id" in proc.stderr:  # purged from slurmctld's memory, or never was
                return []
            raise SlurmCommandError(argv, proc.returncode, proc.stderr)
        return parse_squeue(proc.stdout)

    def _sacct(self, extra: List[str], app_id: Optional[str] = None, strict: bool = False) -> List[JobRecord]:
        """``sacct`` records; none where accounting is not configured. A sacct that hangs
        raises :class:`SlurmTimeoutError` with ``strict`` (listing), else is logged."""
        if self._accounting is False or not self.accounting_configured():
            return []
        # one app: its steps too, which say OUT_OF_MEMORY where the allocation says FAILED
        scope = [] if app_id is not None else ["--allocations"]
        argv = ["sacct", "--parsable2", "--noheader", *scope, f"--format={','.join(SACCT_FIELDS)}", *extra]
        try:
            proc = _client.run(argv, self._timeout, check=False)
        except SlurmTimeoutError as e:
            if strict:
                raise SlurmTimeoutError(f"{e}; finished jobs that only sacct knows cannot be listed") from None
            log.warning("slurm_sacct_timeout", error=str(e))
            return []
        except SlurmError as e:  # sacct missing: no accounting records
            log.debug("slurm_sacct_unavailable", error=str(e))
            self._accounting = False
            return []
        if proc.returncode != 0:
            err = proc.stderr.lower()
            if "accounting storage is disabled" in err or "not configured" in err:
                self._accounting = False
            elif strict:
                failed = SlurmCommandError(argv, proc.returncode, proc.stderr)
                raise SlurmError(f"{failed}; finished jobs that only sacct knows cannot be listed")
            else:
                log.warning("slurm_sacct_failed", error=" ".join(proc.stderr.split()))
            return []
        self._accounting = True
        recs = parse_sacct(proc.stdout)
        return [r for r in recs if r.app_id == app_id] if app_id is not None else recs

    def _jobcomp(self, app_id: str) -> List[JobRecord]:
        text = self._jobcomp_text()
        return parse_jobcomp(text, app_id) if text else []

    def _jobcomp_history(self, app_id: str) -> List[str]:
        """Slurm's state of each ended attempt of ``app_id`` (jobcomp), [] where unreadable."""
        text = self._jobcomp_text()
        return jobcomp_history(text, app_id) if text else []

    def _jobcomp_text(self) -> str:
        """The jobcomp/filetxt log, "" where the cluster keeps none or it is unreadable."""
        if self._jobcomp_path is None:
            self._jobcomp_path = ""
            try:
                conf = parse_config(_client.run(["scontrol", "show", "config"], self._timeout).stdout)
            except SlurmError as e:
                log.debug("slurm_config_unavailable", error=str(e))
                return []
            loc = conf.get("JobCompLoc", "")
            if conf.get("JobCompType") == "jobcomp/filetxt" and os.access(loc, os.R_OK):
                self._jobcomp_path = loc
        if not self._jobcomp_path:
            return ""
        try:
            with open(self._jobcomp_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def list(self) -> List[ListAppResponse]:
        """The current user's jobs that tx submitted (job names ``<app>@<role>-<k>``, see
        :func:`tx_scheduler_slurm.request.component_name`), named by their app: those
        slurmctld keeps (any state) and, where accounting is configured, those in ``sacct``
        since 1970. One ``squeue`` call (and one ``sacct``) whatever the number of jobs;
        other jobs of the user are counted in a warning.

        Raises:
            PartialListError: squeue answered but sacct did not answer or failed: the apps
                squeue knows are its ``apps``; finished jobs that only sacct knows are missing.
            SlurmTimeoutError: squeue did not answer.
            SlurmCommandError: squeue failed.
        """
        user = str(os.getuid())  # squeue and sacct take a uid; no passwd lookup needed
        apps = {}
        others = set()
        for rec in (JobRecord(**d) for recs in self._user_snapshot().items.values() for d in recs):
            if rec.job_id != rec.app_id:
                continue
            if not rec.is_tx:
                others.add(rec.app_id)
                continue
            apps[rec.app_id] = ListAppResponse(rec.app_id, appstate_from_slurm(rec.state), name=rec.app_name)
        if self.accounting_configured():
            try:
                recs = self._sacct(["--user", user, "--starttime=1970-01-01T00:00:01"], strict=True)
            except SlurmError as e:
                raise PartialListError(str(e), [apps[k] for k in sorted(apps, key=_id_key)]) from None
            for rec in recs:
                if rec.offset != 0 or rec.app_id in apps:
                    continue
                if not rec.is_tx:
                    others.add(rec.app_id)
                    continue
                apps[rec.app_id] = ListAppResponse(rec.app_id, appstate_from_slurm(rec.state), name=rec.app_name)
        if others:
            log.warning(
                f"slurm: {len(others)} job(s) of this user were not submitted by tx and are not listed "
                f"(e.g. {min(others, key=_id_key)}); see squeue or sacct",
            )
        return [apps[k] for k in sorted(apps, key=_id_key)]

    def accounting_configured(self) -> bool:
        """Whether the cluster has accounting (``AccountingStorageType`` other than
        ``accounting_storage/none``): read from ``$SLURM_CONF`` (default
        ``/etc/slurm/slurm.conf``) where readable, else from ``scontrol show config``.
        Without accounting ``sacct`` is never run."""
        if self._acct_configured is None:
            self._acct_configured = _index.accounting_in_conf()
            if self._acct_configured is None:
                try:
                    conf = parse_config(_client.run(["scontrol", "show", "config"], self._timeout).stdout)
                    self._acct_configured = conf.get("AccountingStorageType", "accounting_storage/none") \
                        != "accounting_storage/none"
                except SlurmError as e:
                    log.debug("slurm_config_unavailable", error=str(e))
                    self._acct_configured = True  # ask sacct, which says whether it works
        return self._acct_configured

    def _cancel_existing(self, app_id: str) -> None:
        """``scancel`` the job (every component); a job that just ended is not an error. An
        array task is recorded as cancelled first (:func:`_index.mark_cancelled`)."""
        if "_" in app_id:
            _index.mark_cancelled(app_id)
        try:
            proc = _client.run(["scancel", app_id], self._timeout, check=False)
        finally:
            _plane.plane().invalidate()  # the next look asks Slurm
        if proc.returncode != 0 and "already completing or completed" not in proc.stderr:
            raise SlurmCommandError(["scancel", app_id], proc.returncode, proc.stderr)
        log.info("slurm_cancelled", app_id=app_id)

    def cancel_many(self, app_ids: Any) -> None:
        """``scancel ID ID ...`` (500 words a call): a sweep's trials in one call, a job
        array's tasks ``<array>_<i>`` as one word ``<array>_[ranges]``
        (:func:`~tx_scheduler_slurm._array.scancel_words`); jobs that ended or are gone are
        not errors."""
        app_ids = list(app_ids)
        ids = scancel_words(app_ids)
        for i in range(0, len(ids), 500):
            argv = ["scancel", *ids[i:i + 500]]
            try:
                proc = _client.run(argv, self._timeout, check=False)
            finally:
                _plane.plane().invalidate()  # the next look asks Slurm
            errors = [ln for ln in proc.stderr.splitlines() if ln.strip()
                      and "already completing or completed" not in ln and "Invalid job id" not in ln]
            if proc.returncode != 0 and errors:
                raise SlurmCommandError(argv[:1] + ids[i:i + 1] + ["..."], proc.returncode, "\n".join(errors))
        log.info("slurm_cancelled", apps=len(app_ids), words=len(ids))

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

