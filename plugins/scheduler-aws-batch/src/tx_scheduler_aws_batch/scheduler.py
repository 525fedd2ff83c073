"""The ``aws_batch`` scheduler: apps as AWS Batch multi-node parallel jobs.

* submit: ``register_job_definition`` (one node range per role, see
  :mod:`tx_scheduler_aws_batch.request`) then ``submit_job``; a submit that fails after the
  registration deregisters the job definition. App id: ``<queue>:<job name>`` (handle
  ``aws_batch://<session>/<queue>:<job name>``, as in TorchX).
* status: from the job queue's shared snapshot (:mod:`tx_scheduler_aws_batch._plane`: one
  ``list_jobs`` of the queue and ``describe_jobs`` by 100 of its jobs and their nodes
  ``<jobId>#<node>``, for every app followed on the host at once); an app the snapshot lacks
  (submitted since) is asked on its own. Every state and message comes from Batch, so any
  process with the same AWS configuration sees the same app (replicas and failures:
  :mod:`tx_scheduler_aws_batch._status`; attempts: :mod:`tx_scheduler_aws_batch._attempts`).
* logs: CloudWatch Logs, the log stream of node ``role start + k``
  (:mod:`tx_scheduler_aws_batch._logs`).
* cancel: ``terminate_job`` with a reason tx recognizes later (Batch has no CANCELLED
  state: a terminated job is FAILED with that reason, reported as CANCELLED).
* sweeps: one array job (:class:`tx_scheduler_aws_batch._array.BatchArrayJob`) for
  single-replica trials without ``--max_parallel``; trial ``i`` is child ``i`` (app id
  ``<queue>:<array job name>:<i>``). Their states: one ``list_jobs`` for the array job,
  then one ``describe_jobs`` per 100 children (:meth:`AwsBatchScheduler.states_of`).

AWS API reference: https://docs.aws.amazon.com/batch/latest/APIReference/Welcome.html and
https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_GetLogEvents.html.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tx import get_logger
from tx.schedulers import (
    DescribeAppResponse, ListAppResponse, Scheduler, add_infra_retries_opt, failure_once, make_unique)
from tx.specs import NONE, AppDef, AppDryRunInfo, AppState, CfgVal, read_stored_appdef_and_options, runopts

from tx_scheduler_aws_batch import _plane
from tx_scheduler_aws_batch._attempts import batch_attempts, saves_of
from tx_scheduler_aws_batch._client import AwsClients, call, error_code, explain
from tx_scheduler_aws_batch._list import ended_children, list_apps
from tx_scheduler_aws_batch._logs import CloudWatchLogs
from tx_scheduler_aws_batch._states import CANCEL_REASON, appstate_from_batch
from tx_scheduler_aws_batch._status import CAUSE_TAIL_LINES, ERROR_TAIL_LINES, failure, replica_statuses
from tx_scheduler_aws_batch._array import MAX_ARRAY_SIZE, BatchArrayJob, array_unsupported, build_array, parse_trial_id
from tx_scheduler_aws_batch.request import (
    APPDEF_LIMIT, DEFAULT_PREEMPT_GRACE, PARAM_APPDEF, PREEMPT_GRACE_OPT, BatchJob, build_request, job_name, parse_app_id,
)

__all__ = ["AwsBatchScheduler", "create_scheduler", "CANCEL_REASON", "appstate_from_batch", "batch_attempts",
           "CAUSE_TAIL_LINES", "ERROR_TAIL_LINES"]

log = get_logger(__name__)


class AwsBatchScheduler(CloudWatchLogs, Scheduler[BatchJob]):
    """Runs apps on AWS Batch (the account, region and endpoint that boto3 finds; see
    :mod:`tx_scheduler_aws_batch._client`).

    Args:
        session_name: the session part of app handles.
        region: AWS region (default: ``AWS_DEFAULT_REGION`` or the profile's).
        endpoint_url: AWS endpoint for both services (default: ``AWS_ENDPOINT_URL``,
            ``AWS_ENDPOINT_URL_BATCH``, ``AWS_ENDPOINT_URL_LOGS``).
        poll_interval: seconds between polls while tailing logs.
    """

    #: ``--workspace DIR``: the ``docker`` workspace kind (tx-scheduler-docker) builds an
    #: image with the workspace and pushes it to ``image_repo``
    workspace_kind = "docker"

    def __init__(self, session_name: str, region: Optional[str] = None, endpoint_url: Optional[str] = None,
                 poll_interval: float = 2.0) -> None:
        super().__init__("aws_batch", session_name)
        self._aws = AwsClients(region, endpoint_url)
        self.poll_interval = poll_interval
        self._array_ids: Dict[Tuple[str, str], str] = {}  # (queue, array job name) -> its job id
        # a sweep's FAILED trials, described for why they failed: array child id -> its
        # describe_jobs record (FAILED is final: it never changes), and array job id -> the
        # indexes of its children a look saw FAILED and nobody described yet (described by
        # 100 at the first describe of one of them)
        self._failed_records: Dict[str, Dict[str, Any]] = {}
        self._failed_seen: Dict[str, List[int]] = {}

    # -- options and dryrun ------------------------------------------------------------
    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("queue", type_=str, required=True, help="job queue to submit the job to (name or ARN)")
        opts.add("user", type_=str, default=None, help="user name in the job's tags (default: the current user)")
        opts.add("privileged", type_=bool, default=False, help="run the containers privileged")
        opts.add("share_id", type_=str, default=None,
                 help="fair-share identifier of the job (queues with a scheduling policy); also ends the job name")
        opts.add("priority", type_=int, default=0,
                 help="scheduling priority within the share (only with share_id; higher runs first)")
        opts.add("job_role_arn", type_=str, default=None, help="IAM role the containers' AWS calls use")
        opts.add("execution_role_arn", type_=str, default=None,
                 help="IAM role the container agent uses (pulling images, writing logs)")
        opts.add("image_repo", type_=str, default=None,
                 help="(with --workspace) image repository the docker workspace pushes the built image to, "
                      "e.g. an ECR repository URI")
        opts.add(PREEMPT_GRACE_OPT, type_=int, default=DEFAULT_PREEMPT_GRACE,
                 help="seconds ECS waits between SIGTERM and SIGKILL when it stops the job's containers (a Spot "
                      "reclaim, a terminated job): set it to your compute environment's ECS_CONTAINER_STOP_TIMEOUT "
                      "(30 s unless its launch template sets it); TX_PREEMPT_GRACE in the containers' env")
        add_infra_retries_opt(opts)
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[BatchJob]:
        from tx import __version__ as tx_version

        share_id = str(cfg["share_id"]) if cfg.get("share_id") else None
        if cfg.get("priority") and not share_id:
            log.warning("aws_batch_priority_ignored", reason="priority only applies with share_id")
        name = make_unique(job_name(app.name, share_id))
        req = build_request(app, cfg, name, self.session_name, tx_version, defer_appdef=self._many)
        return AppDryRunInfo(req, repr)

    def submit_dryrun_many(self, apps: Any, cfg: Mapping[str, CfgVal]) -> List[AppDryRunInfo[BatchJob]]:
        """:meth:`tx.schedulers.Scheduler.submit_dryrun_many` (raises as it does), each trial's
        stored AppDef (``BatchJob.submit``'s ``parameters``: an array job keeps none) made on
        first use: the first's now (one that cannot be stored is refused at dryrun), the
        others' where they are submitted one job each."""
        infos = super().submit_dryrun_many(apps, cfg)  # (with _many: trials' AppDefs deferred)
        if infos:
            _ = infos[0].request.submit  # noqa: F841 - made now (TypeError: it cannot be stored)
        return infos

    # -- sweeps: array jobs -------------------------------------------------------------
    #: AWS Batch's largest array job (arrayProperties.size)
    sweep_array_limit = MAX_ARRAY_SIZE

    def _array_why(self, trials: Any, max_parallel: Optional[int]) -> Optional[str]:
        if max_parallel is not None and len(trials) > max_parallel:
            return ("AWS Batch array jobs have no bound on running children: with --max_parallel each trial is "
                    "its own job, at most max_parallel submitted at once by tx's supervisor")
        return array_unsupported([t.request for t in trials])

    def submit_sweep_dryrun(self, trials: Any, max_parallel: Optional[int]) -> Optional[AppDryRunInfo[Any]]:
        """One array job (:func:`tx_scheduler_aws_batch._array.build_array`) for trials of one
        replica each, when ``max_parallel`` does not bound them (Batch runs an array's children
        as compute allows); None (one job per trial, at most ``max_parallel`` at once under
        tx's supervisor) otherwise: multi-node trials, which Batch cannot array, too.

        Raises:
            ValueError: the array's job definition is larger than AWS Batch takes.
        """
        self._why = self._array_why(trials, max_parallel)
        if self._why is not None:
            log.info("aws_batch_sweep_not_an_array", reason=self._why)
            return None
        return AppDryRunInfo(build_array([t.request for t in trials]), repr)

    def sweep_not_an_array(self, trials: Any) -> str:
        """Why the last :meth:`submit_sweep_dryrun` gave one job per trial."""
        return getattr(self, "_why", None) or array_unsupported([t.request for t in trials]) or "no array"

    def schedule_sweep(self, dryrun_info: AppDryRunInfo[Any]) -> List[str]:
        """Register the array's job definition and submit it (2 AWS calls); returns each
        trial's app id ``<queue>:<name>:<index>``.

        Raises:
            SchedulerError: as :meth:`schedule`.
        """
        req: BatchArrayJob = dryrun_info.request
        try:
            self._register_and_submit(req)
        finally:
            _plane.plane(req.queue).invalidate()  # the next look asks Batch
        log.info("aws_batch_submitted_array", name=req.name, children=len(req.app_ids))
        return list(req.app_ids)

    def _array_job_id(self, queue: str, name: str) -> Optional[str]:
        """The job id of array job ``name`` in ``queue`` (one ``list_jobs`` the first time), None
        if unknown. Kept once found: tx's job names are unique (a random suffix) and a job's id
        never changes, so a sweep's failed trials described one by one look it up once."""
        found = self._array_ids.get((queue, name))
        if found is None:
            job = self._array_job(queue, name)
            if job is None:
                return None
            found = self._array_ids[(queue, name)] = str(job["jobId"])
        return found

    def _array_job(self, queue: str, name: str) -> Optional[Dict[str, Any]]:
        """The ``JobSummary`` of array job ``name`` in ``queue`` (one ``list_jobs``), None if unknown."""
        batch = self._aws.batch
        from botocore.exceptions import ClientError

        try:
            resp = batch.list_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}])
        except ClientError as e:
            if error_code(e) == "ClientException" and "does not exist" in str(e):
                return None
            raise explain(e, f"looking up array job {name} in queue {queue}") from None
        except Exception as e:  # noqa: BLE001 - botocore errors become one line
            raise explain(e, f"looking up array job {name} in queue {queue}") from None
        # the parent has no ':' in its id (moto lists the children in the queue too)
        jobs = [j for j in resp.get("jobSummaryList", []) if j.get("jobName") == name and ":" not in j["jobId"]]
        return max(jobs, key=lambda j: j.get("createdAt", 0)) if jobs else None

    def states_of(self, app_ids: Any) -> Optional[Dict[str, AppState]]:
        """The states of a sweep's trials: per array job, one ``list_jobs`` (by name) to find
        it; where every child has ended, the FAILED ones from one ``list_jobs`` of the array
        and the others SUCCEEDED (:func:`tx_scheduler_aws_batch._list.ended_children`: the
        parent's child counts from its summary, or one ``describe_jobs`` of it), else one
        ``describe_jobs`` per 100 of its children (``<array job id>:<index>``;
        https://docs.aws.amazon.com/batch/latest/APIReference/API_DescribeJobs.html: ``list_jobs``
        by ``arrayJobId`` would give only RUNNING children without a status filter, and takes
        no filter for them). None when some ids are not array children (the Runner then
        lists or describes them)."""
        parsed = [parse_trial_id(a) for a in app_ids]
        if not parsed or any(p is None for p in parsed):
            return None
        out: Dict[str, AppState] = {}
        arrays: Dict[Tuple[str, str], List[int]] = {}
        for p in parsed:
            if p is not None:
                arrays.setdefault((p[0], p[1]), []).append(p[2])
        for (queue, name), indexes in sorted(arrays.items()):
            summary = self._array_job(queue, name)
            if summary is None:
                continue
            parent = self._array_ids[(queue, name)] = str(summary["jobId"])
            ended = ended_children(self._aws.batch, name, parent, summary, ask_parent=True)
            if ended is not None:
                wanted = set(indexes)
                self._failed_seen[parent] = [k for k, st, _why in ended if st == "FAILED" and k in wanted
                                             and f"{parent}:{k}" not in self._failed_records]
                out.update({f"{queue}:{name}:{k}": appstate_from_batch(st, why) for k, st, why in ended if k in wanted})
                continue
            ids = [f"{parent}:{i}" for i in sorted(set(indexes))]
            for k in range(0, len(ids), 100):
                for j in call(f"describing the children of array job {name}", self._aws.batch.describe_jobs,
                              jobs=ids[k:k + 100])["jobs"]:
                    index = (j.get("arrayProperties") or {}).get("index")
                    if index is None:
                        index = int(str(j["jobId"]).rpartition(":")[2])
                    out[f"{queue}:{name}:{index}"] = appstate_from_batch(
                        str(j.get("status", "")), str(j.get("statusReason", "")))
                    if j.get("status") == "FAILED":
                        self._failed_records[str(j["jobId"])] = j
        return out

    def _child_record(self, parent: str, name: str, index: int) -> Optional[Dict[str, Any]]:
        """The ``describe_jobs`` record of child ``index`` of array job ``parent``, None if
        Batch does not know it: a FAILED one kept (final), else, where a look saw it FAILED
        (:meth:`states_of`), described with every other child that look saw FAILED, by 100
        (a sweep status describes each failed trial for why it failed: 100 failed trials
        were 100 calls), else one ``describe_jobs`` of it."""
        child = f"{parent}:{index}"
        if child not in self._failed_records and index in self._failed_seen.get(parent, ()):
            ids = [f"{parent}:{k}" for k in self._failed_seen.pop(parent)]
            for i in range(0, len(ids), 100):
                for j in call(f"describing the failed children of array job {name}", self._aws.batch.describe_jobs,
                              jobs=ids[i:i + 100])["jobs"]:
                    if j.get("status") == "FAILED":
                        self._failed_records[str(j["jobId"])] = j
        if child in self._failed_records:
            return self._failed_records[child]
        jobs = call("describing array child", self._aws.batch.describe_jobs, jobs=[child])["jobs"]
        if jobs and jobs[0].get("status") == "FAILED":
            self._failed_records[child] = jobs[0]
        return jobs[0] if jobs else None

    def cancel_many(self, app_ids: Any) -> None:
        """Cancel a sweep's trials: ``terminate_job`` of the array job where all its children
        are named (Batch ends every child), else of each child; other apps as :meth:`cancel`."""
        ids = list(app_ids)
        by_array: Dict[Tuple[str, str], List[int]] = {}
        rest = []
        for a in ids:
            p = parse_trial_id(a)
            if p is None:
                rest.append(a)
            else:
                by_array.setdefault((p[0], p[1]), []).append(p[2])
        for (queue, name), indexes in by_array.items():
            parent = self._array_job_id(queue, name)
            if parent is None:
                continue
            size = int(((call("describing array job", self._aws.batch.describe_jobs, jobs=[parent])["jobs"] or [{}])[0]
                        .get("arrayProperties") or {}).get("size", 0))
            targets = [parent] if sorted(indexes) == list(range(size)) else [f"{parent}:{i}" for i in indexes]
            for job_id in targets:
                call(f"terminating job {job_id}", self._aws.batch.terminate_job, jobId=job_id, reason=CANCEL_REASON)
            _plane.plane(queue).invalidate()  # the next look asks Batch
            log.info("aws_batch_cancelled", array=name, children=len(indexes))
        for a in rest:
            self.cancel(a)

    # -- submit ---------------------------------------------------------------------------
    def _register_and_submit(self, req: Any) -> None:
        batch = self._aws.batch
        reg = call(f"registering job definition {req.name}", batch.register_job_definition, **req.job_def)
        arn = reg["jobDefinitionArn"]
        try:
            batch.submit_job(jobDefinition=arn, **req.submit)
        except Exception as e:
            try:
                batch.deregister_job_definition(jobDefinition=arn)
            except Exception as de:  # noqa: BLE001 - report the submit error, note this one
                log.warning("aws_batch_deregister_failed", job_definition=arn, error=str(de))
            if type(e).__module__.startswith("botocore"):
                raise explain(e, f"submitting job {req.name} to queue {req.queue}") from None
            raise
        log.debug("aws_batch_registered", job_definition=arn)

    def schedule(self, dryrun_info: AppDryRunInfo[BatchJob]) -> str:
        """Register the job definition and submit the job; returns ``<queue>:<name>``.

        Raises:
            SchedulerError: AWS refused either call (unknown queue, access denied, expired
                credentials, throttling beyond the retries ...), in one line. The job
                definition is deregistered when the submit fails.
        """
        req = dryrun_info.request
        try:
            self._register_and_submit(req)
        finally:
            _plane.plane(req.queue).invalidate()  # the next look asks Batch
        log.info("aws_batch_submitted", app_id=req.app_id)
        return req.app_id

    # -- status ---------------------------------------------------------------------------
    def _find_job(self, app_id: str) -> Optional[Dict[str, Any]]:
        """The ``describe_jobs`` record of the app (of the array child for a sweep's trial),
        None if Batch does not know it."""
        trial = parse_trial_id(app_id)
        if trial is not None:
            parent = self._array_job_id(trial[0], trial[1])
            return None if parent is None else self._child_record(parent, trial[1], trial[2])
        parsed = parse_app_id(app_id)
        if parsed is None:
            return None
        queue, name = parsed
        batch = self._aws.batch
        from botocore.exceptions import ClientError

        try:
            pages = batch.get_paginator("list_jobs").paginate(
                jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}]
            )
            summaries = {j["jobId"]: j for page in pages for j in page.get("jobSummaryList", []) if j.get("jobName") == name}
            ids = list(summaries)
        except ClientError as e:
            if error_code(e) == "ClientException" and "does not exist" in str(e):
                return None  # the queue is gone (or never was): so is the app
            raise explain(e, f"looking up job {name} in queue {queue}") from None
        except Exception as e:  # noqa: BLE001 - botocore errors become one line
            raise explain(e, f"looking up job {name} in queue {queue}") from None
        if not ids:
            return None
        jobs = call(f"describing job {name}", batch.describe_jobs, jobs=ids[:100])["jobs"]
        jobs = [j for j in jobs if j.get("jobName") == name]
        if not jobs:
            return None
        job = max(jobs, key=lambda j: j.get("createdAt", 0))
        # the job summary's container (exitCode, reason) where describe_jobs has none
        # (a multi-node parent job; moto drops it there too)
        summary = summaries.get(job["jobId"], {}).get("container") or {}
        container = dict(job.get("container") or {})
        for key in ("exitCode", "reason"):
            if key in summary and key not in container:
                container[key] = summary[key]
        if container:
            job["container"] = container
        return job

    def _nodes(self, job: Dict[str, Any]) -> Dict[int, Dict[str, Any]]:
        """Node index -> ``describe_jobs`` record of node ``<jobId>#<index>`` (AWS creates
        them when the job starts; empty where the backend has none, as moto)."""
        num = int(job.get("nodeProperties", {}).get("numNodes", 0))
        if not num or job.get("status") not in ("STARTING", "RUNNING", "SUCCEEDED", "FAILED"):
            return {}
        ids = [f"{job['jobId']}#{i}" for i in range(num)]
        out: Dict[int, Dict[str, Any]] = {}
        for i in range(0, len(ids), 100):
            for rec in call("describing job nodes", self._aws.batch.describe_jobs, jobs=ids[i:i + 100])["jobs"]:
                idx = rec.get("nodeDetails", {}).get("nodeIndex")
                if idx is None:
                    idx = int(str(rec.get("jobId", "")).rpartition("#")[2] or -1)
                out[int(idx)] = rec
        return out

    def _queue_snapshot(self, queue: str) -> Any:
        """The shared snapshot of ``queue`` (:mod:`tx_scheduler_aws_batch._plane`), None if
        Batch has no such queue.

        Raises:
            SchedulerError: an AWS call failed (throttling beyond botocore's retries:
                :class:`tx.schedulers.budget.ThrottledError`).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        batch, p = self._aws.batch, _plane.plane(queue)

        def fetch() -> Dict[str, Any]:
            last = p.last()
            return _plane.fetch_queue(batch, queue, last.items if last is not None else None,
                                      self._compute_env_problem)
        try:
            return p.get(fetch)
        except ClientError as e:
            if error_code(e) == "ClientException" and "does not exist" in str(e):
                return None  # the queue is gone (or never was): so are its apps
            raise explain(e, f"listing the jobs of queue {queue}") from None
        except BotoCoreError as e:
            raise explain(e, f"listing the jobs of queue {queue}") from None

    def _lookup(self, app_id: str) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[int, Any]], Optional[str], float]:
        """The app's job record, its node records (None: not in a snapshot), its queue's
        problem (None: not known) and when they were asked (epoch s)."""
        parsed = parse_app_id(app_id) if parse_trial_id(app_id) is None else None
        if parsed is None:
            asked = time.time()
            return self._find_job(app_id), None, None, asked
        queue, name = parsed
        snap = self._queue_snapshot(queue)
        if snap is None:
            return None, None, None, time.time()
        jobs = snap.items.get("jobs") or {}
        found = [jobs[i] for i in (snap.items.get("names") or {}).get(name, ()) if i in jobs]
        if not found:  # submitted since the snapshot (or another queue's ARN form): asked on its own
            asked = time.time()
            return self._find_job(app_id), None, None, asked
        job = max(found, key=lambda j: j.get("createdAt", 0))
        nodes = (snap.items.get("nodes") or {}).get(job["jobId"])
        return (job, {int(k): v for k, v in nodes.items()} if nodes is not None else None,
                snap.items.get("queue_problem"), snap.fetched_at)

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state, per-replica states (from the node jobs where Batch has them,
        else the job's), why it waits or failed, its roles and its console URL; None if
        Batch does not know it. From the queue's shared snapshot (``metadata
        ["status_fetched_at"]``: when Batch was asked, epoch s).

        Raises:
            SchedulerError: an AWS call failed (one line); throttling beyond botocore's
                retries is :class:`tx.schedulers.budget.ThrottledError`, never a failed app.
        """
        job, nodes, problem, fetched_at = self._lookup(app_id)
        if job is None:
            return None
        status = str(job.get("status", ""))
        reason = str(job.get("statusReason", ""))
        state = appstate_from_batch(status, reason)
        roles_statuses, roles, failed = replica_statuses(
            job, nodes if nodes is not None else self._nodes(job), state, reason)
        msg = self._message(job, state, status, reason, problem)
        err, cause = NONE, None
        if state == AppState.FAILED:
            err, cause = self._failure(job, failed, reason, roles_statuses)
        attempts = job.get("attempts") or []
        history = batch_attempts(attempts, state, reason, saves_of(job))
        kept = (job.get("parameters") or {}).get(PARAM_APPDEF)
        stored, why, run_options = read_stored_appdef_and_options(kept, f"the job's parameter {PARAM_APPDEF}", APPDEF_LIMIT)
        desc = DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=max(0, len(attempts) - 1) if attempts else 0,
            msg=msg,
            structured_error_msg=err,
            root_cause=cause,
            ui_url=self._ui_url(job),
            roles_statuses=roles_statuses,
            roles=roles,
            metadata={"job_id": job.get("jobId"), "batch_status": status,
                      "attempts": [a.to_json() for a in history], **({"app_not_stored": why} if why else {}),
                      "run_options": run_options},
            attempts=history,
            app=stored,
        )
        desc.metadata["status_fetched_at"] = fetched_at  # epoch s; the status is at most this old
        return desc

    def _failure(self, job: Dict[str, Any], failed: Any, reason: str, statuses: Any) -> Any:
        """:func:`failure` of an ended job, read from its logs once per process while its
        failed nodes are the same (a failed job's logs do not change): following 1,000
        failed apps reads their logs once, not every tick."""
        key = (str(job.get("jobId")), len(job.get("attempts") or []), tuple((f.node, f.ended) for f in failed))
        return failure_once(self.__dict__.setdefault("_failures", {}), key, statuses,
                            lambda: failure(job, failed, reason, statuses, lambda node: self._cause_lines(job, node)))

    def _message(self, job: Dict[str, Any], state: AppState, status: str, reason: str,
                 problem: Optional[str] = None) -> str:
        if status == "RUNNABLE":
            why = self._compute_env_problem(job) if problem is None else problem
            parts = [f"RUNNABLE: waiting for compute in queue {job.get('jobQueue', '?').rpartition('/')[2]}"]
            if reason:
                parts.append(reason)
            if why:
                parts.append(why)
            return "; ".join(parts)
        if state == AppState.CANCELLED:
            return f"cancelled: {reason}"
        return f"{status}: {reason}" if reason else status

    def _compute_env_problem(self, job: Dict[str, Any]) -> str:
        """Why the queue's compute environments cannot run the job, where they say so
        (disabled, invalid, no vCPUs left), else an empty string."""
        batch = self._aws.batch
        try:
            queues = batch.describe_job_queues(jobQueues=[job["jobQueue"]])["jobQueues"]
            if not queues:
                return ""
            q = queues[0]
            problems = []
            if q.get("state") != "ENABLED":
                problems.append(f"queue {q.get('jobQueueName')} is {q.get('state')}")
            arns = [c["computeEnvironment"] for c in q.get("computeEnvironmentOrder", [])]
            if arns:
                for ce in batch.describe_compute_environments(computeEnvironments=arns)["computeEnvironments"]:
                    name = ce.get("computeEnvironmentName")
                    if ce.get("state") != "ENABLED":
                        problems.append(f"compute environment {name} is {ce.get('state')}")
                    elif ce.get("status") not in (None, "VALID"):
                        problems.append(f"compute environment {name} is {ce.get('status')}: {ce.get('statusReason', '')}".rstrip(": "))
                    else:
                        res = ce.get("computeResources") or {}
                        if res.get("maxvCpus") is not None and res.get("maxvCpus") == 0:
                            problems.append(f"compute environment {name} has maxvCpus 0")
            return "; ".join(problems)
        except Exception as e:  # noqa: BLE001 - the message is a hint; never fail describe for it
            log.debug("aws_batch_compute_env_unknown", error=str(e))
            return ""

    def _ui_url(self, job: Dict[str, Any]) -> str:
        region = str(job.get("jobArn", "")).split(":")[3] if job.get("jobArn", "").count(":") >= 4 else ""
        region = region or self._aws.region
        return f"https://console.aws.amazon.com/batch/home?region={region}#jobs/mnp-job/{job.get('jobId')}"

    def list(self) -> List[ListAppResponse]:
        """Jobs tagged by tx in every job queue of the region (:mod:`tx_scheduler_aws_batch._list`):
        ``describe_job_queues``, then one ``list_jobs`` per queue and page, whose summaries
        give every job's state; ``describe_jobs`` per 100 only of the jobs not met before,
        to read their tags once (a job's tags, name and array size never change; kept in
        the process and in a file under tx's state directory). A sweep's array job is listed
        as its trials (ids ``<queue>:<name>:<index>``, as the sweep submitted them), read by
        ``describe_jobs`` per 100 children (an ended array's once), so that ``tx list``
        folds them into the sweep's row and shows no extra row for the array."""
        return list_apps(self._aws.batch)

    def _cancel_existing(self, app_id: str) -> None:
        """``terminate_job`` (Batch cancels a job that has not started and stops a running
        one) unless it already ended."""
        job = self._find_job(app_id)
        if job is None or job.get("status") in ("SUCCEEDED", "FAILED"):
            return
        call(f"terminating job {job.get('jobName')}", self._aws.batch.terminate_job,
             jobId=job["jobId"], reason=CANCEL_REASON)
        parsed = parse_app_id(app_id) or parse_trial_id(app_id)
        if parsed:
            _plane.plane(parsed[0]).invalidate()  # the next look asks Batch
        log.info("aws_batch_cancelled", app_id=app_id)

    def close(self) -> None:
        """Nothing to release (boto3 clients close with the process)."""


def create_scheduler(session_name: str, **kwargs: Any) -> AwsBatchScheduler:
    """TorchX's factory: ``create_scheduler(session_name, **kwargs)``; ``kwargs`` are
    :class:`AwsBatchScheduler`'s (region, endpoint_url, poll_interval)."""
    return AwsBatchScheduler(session_name, **kwargs)


