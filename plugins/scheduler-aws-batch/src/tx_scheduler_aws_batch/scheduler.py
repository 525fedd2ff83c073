"""The ``aws_batch`` scheduler: apps as AWS Batch multi-node parallel jobs.

* submit: ``register_job_definition`` (one node range per role, see
  :mod:`tx_scheduler_aws_batch.request`) then ``submit_job``; a submit that fails after the
  registration deregisters the job definition. App id: ``<queue>:<job name>`` (handle
  ``aws_batch://<session>/<queue>:<job name>``, as in TorchX).
* status: ``list_jobs`` (by job name) and ``describe_jobs`` of the job and of its nodes
  (``<jobId>#<node>``); every state and message comes from Batch, so any process with the
  same AWS configuration sees the same app.
* logs: CloudWatch Logs, the log stream of node ``role start + k``.
* cancel: ``terminate_job`` with a reason tx recognizes later (Batch has no CANCELLED
  state: a terminated job is FAILED with that reason, reported as CANCELLED).
* sweeps: one array job (:class:`tx_scheduler_aws_batch.request.BatchArrayJob`) for
  single-replica trials without ``--max_parallel``; trial ``i`` is child ``i`` (app id
  ``<queue>:<array job name>:<i>``). Their states: one ``list_jobs`` for the array job,
  then one ``describe_jobs`` per 100 children (:meth:`AwsBatchScheduler.states_of`).

AWS API reference: https://docs.aws.amazon.com/batch/latest/APIReference/Welcome.html and
https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_GetLogEvents.html.
"""
from __future__ import annotations

import datetime as _dt
import time
from typing import Any, Dict, Generator, Iterable, Iterator, List, Mapping, Optional, Tuple

from tx.log import get_logger
from tx.schedulers import DescribeAppResponse, ListAppResponse, Scheduler, Stream, filter_regex
from tx.schedulers import env as env_contract
from tx.schedulers.api import add_infra_retries_opt
from tx.schedulers.ids import make_unique
from tx.schedulers.why import names_cause, root_cause
from tx.specs import (
    NONE, AppDef, AppDryRunInfo, AppState, Attempt, CfgVal, FailureKind, ReplicaStatus, Resource, Role, RoleStatus, is_terminal, macros,
    runopts,
)
from tx.specs.files import read_stored_appdef_and_options
from tx.specs.status import RootCause

from tx_scheduler_aws_batch._client import AwsClients, call, error_code, explain
from tx_scheduler_aws_batch._states import CANCEL_REASON, appstate_from_batch
from tx_scheduler_aws_batch.request import (
    APPDEF_LIMIT, DEFAULT_LOG_GROUP, HOST_FAILURE_REASON, MAX_ARRAY_SIZE, PARAM_APPDEF, REPLICA_ID_TOKEN, TAG_VERSION,
    BatchArrayJob, BatchJob, array_unsupported, build_array, build_request, job_name, make_trial_id, parse_app_id,
    parse_trial_id, unwrap_command,
)
from tx_scheduler_aws_batch.resources import K8S_ITYPE

__all__ = ["AwsBatchScheduler", "create_scheduler", "CANCEL_REASON", "appstate_from_batch", "batch_attempts"]

log = get_logger(__name__)

#: log events (lines) of a failed node read for its root cause (tx.schedulers.why): torchrun
#: prints its report after the failed worker's traceback
CAUSE_TAIL_LINES = 1000
#: log lines of a failed node quoted in ``structured_error_msg`` when no root cause is named
ERROR_TAIL_LINES = 3

def _ms(t: Optional[_dt.datetime]) -> Optional[int]:
    """Milliseconds since the epoch (CloudWatch's unit); naive datetimes are local time."""
    if t is None:
        return None
    return int(t.timestamp() * 1000)


def _range(target: str, num_nodes: int) -> Tuple[int, int]:
    start, sep, end = target.partition(":")
    if not sep:
        return int(start), int(start)
    return int(start or 0), int(end) if end else num_nodes - 1


class AwsBatchScheduler(Scheduler[BatchJob]):
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
        add_infra_retries_opt(opts)
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[BatchJob]:
        from tx.version import __version__ as tx_version

        share_id = str(cfg["share_id"]) if cfg.get("share_id") else None
        if cfg.get("priority") and not share_id:
            log.warning("aws_batch_priority_ignored", reason="priority only applies with share_id")
        name = make_unique(job_name(app.name, share_id))
        req = build_request(app, cfg, name, self.session_name, tx_version)
        return AppDryRunInfo(req, repr)

    # -- sweeps: array jobs -------------------------------------------------------------
    #: AWS Batch's largest array job (arrayProperties.size)
    sweep_array_limit = MAX_ARRAY_SIZE

    def _array_why(self, trials: Any, max_parallel: Optional[int]) -> Optional[str]:
        if max_parallel is not None and len(trials) > max_parallel:
            return ("AWS Batch array jobs have no bound on running children: with --max_parallel each trial is "
                    "its own job, at most max_parallel submitted at once by tx's supervisor")
        return array_unsupported([t.request for t in trials])

    def submit_sweep_dryrun(self, trials: Any, max_parallel: Optional[int]) -> Optional[AppDryRunInfo[Any]]:
        """One array job (:func:`tx_scheduler_aws_batch.request.build_array`) for trials of one
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
        self._register_and_submit(req)
        log.info("aws_batch_submitted_array", name=req.name, children=len(req.app_ids))
        return list(req.app_ids)

    def _array_job_id(self, queue: str, name: str) -> Optional[str]:
        """The job id of array job ``name`` in ``queue`` (one ``list_jobs``), None if unknown."""
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
        return max(jobs, key=lambda j: j.get("createdAt", 0))["jobId"] if jobs else None

    def states_of(self, app_ids: Any) -> Optional[Dict[str, AppState]]:
        """The states of a sweep's trials: per array job, one ``list_jobs`` (by name) to find
        it, then one ``describe_jobs`` per 100 of its children (``<array job id>:<index>``;
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
            parent = self._array_job_id(queue, name)
            if parent is None:
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
        return out

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
        self._register_and_submit(req)
        log.info("aws_batch_submitted", app_id=req.app_id)
        return req.app_id

    # -- status ---------------------------------------------------------------------------
    def _find_job(self, app_id: str) -> Optional[Dict[str, Any]]:
        """The ``describe_jobs`` record of the app (of the array child for a sweep's trial),
        None if Batch does not know it."""
        trial = parse_trial_id(app_id)
        if trial is not None:
            parent = self._array_job_id(trial[0], trial[1])
            if parent is None:
                return None
            jobs = call("describing array child", self._aws.batch.describe_jobs, jobs=[f"{parent}:{trial[2]}"])["jobs"]
            return jobs[0] if jobs else None
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

    @staticmethod
    def _role_ranges(job: Dict[str, Any]) -> List[Tuple[str, int, int, Dict[str, Any]]]:
        """``(role name, first node, last node, container)`` per node range; an array child
        (a ``container`` job) is one replica of the role its env names."""
        if not job.get("nodeProperties") and job.get("container"):
            container = job["container"]
            env = {e["name"]: e["value"] for e in container.get("environment", [])}
            return [(env.get(env_contract.ROLE_NAME) or "node0", 0, 0, container)]
        props = job.get("nodeProperties", {})
        num = int(props.get("numNodes", 0))
        out = []
        for i, rng in enumerate(props.get("nodeRangeProperties", [])):
            container = rng.get("container", {})
            env = {e["name"]: e["value"] for e in container.get("environment", [])}
            name = env.get(env_contract.ROLE_NAME) or env.get("TORCHX_ROLE_NAME") or f"node{i}"
            start, end = _range(str(rng.get("targetNodes", "0")), num)
            out.append((name, start, end, container))
        return out

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state, per-replica states (from the node jobs where Batch has them,
        else the job's), why it waits or failed, its roles and its console URL; None if
        Batch does not know it.

        Raises:
            SchedulerError: an AWS call failed (one line).
        """
        job = self._find_job(app_id)
        if job is None:
            return None
        status = str(job.get("status", ""))
        reason = str(job.get("statusReason", ""))
        state = appstate_from_batch(status, reason)
        nodes = self._nodes(job)
        roles_statuses = []
        roles = []
        first_failure: Optional[str] = None
        first_node: Optional[Tuple[str, int, int, Any]] = None  # role, replica, node index, exit code
        for name, start, end, container in self._role_ranges(job):
            replicas = []
            for idx in range(start, end + 1):
                node = nodes.get(idx)
                if node is not None:
                    nstatus = str(node.get("status", ""))
                    nreason = str(node.get("statusReason", ""))
                    rstate = appstate_from_batch(nstatus, nreason or reason)
                    ncontainer = node.get("container") or {}
                    exit_code = ncontainer.get("exitCode")
                    nics = ncontainer.get("networkInterfaces") or [{}]
                    host = str(nics[0].get("privateIpv4Address", ""))
                    if rstate == AppState.FAILED and first_failure is None:
                        why = ncontainer.get("reason") or nreason
                        first_failure = (
                            f"{name}[{idx - start}] (node {idx}) failed"
                            + (f" with exit code {exit_code}" if exit_code is not None else "")
                            + (f": {why}" if why else "")
                        )
                        first_node = (name, idx - start, idx, exit_code)
                else:
                    rstate, exit_code, host = state, None, ""
                replicas.append(ReplicaStatus(id=idx - start, state=rstate, role=name, hostname=host, exit_code=exit_code))
            roles_statuses.append(RoleStatus(name, replicas))
            roles.append(self._role_of(name, start, end, container))
        msg = self._message(job, state, status, reason)
        err, cause = NONE, None
        if state == AppState.FAILED:
            err, cause = self._failure(job, first_failure, first_node, reason, roles_statuses)
        attempts = job.get("attempts") or []
        history = batch_attempts(attempts, state)
        kept = (job.get("parameters") or {}).get(PARAM_APPDEF)
        stored, why, run_options = read_stored_appdef_and_options(kept, f"the job's parameter {PARAM_APPDEF}", APPDEF_LIMIT)
        return DescribeAppResponse(
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

    def _message(self, job: Dict[str, Any], state: AppState, status: str, reason: str) -> str:
        if status == "RUNNABLE":
            why = self._compute_env_problem(job)
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

    def _failure(self, job: Dict[str, Any], first_failure: Optional[str],
                 first_node: Optional[Tuple[str, int, int, Any]], reason: str,
                 statuses: List[RoleStatus]) -> Tuple[str, Optional[RootCause]]:
        """Why the job failed: the root cause the end of the first failed node's log names
        (a torchrun worker's exception, :mod:`tx.schedulers.why`), set on its replica too;
        else one line with the first failed node (exit code, reason) or the job's, and its
        last log lines. Without node jobs (moto) the job's own log and exit code stand for
        its replica when it has only one; with several, which one failed is unknown and no
        root cause is named."""
        name = job.get("jobName", "")
        container = job.get("container", {}) or {}
        if first_failure is None:
            code = container.get("exitCode")
            why = container.get("reason") or reason
            first_failure = f"job {name} failed" + (f" with exit code {code}" if code is not None else "") + (
                f": {why}" if why else "")
        reps = [(rs.role, r) for rs in statuses for r in rs.replicas]
        who: Optional[Tuple[str, int, Any]] = None
        stream = ""
        if first_node is not None:
            who = first_node[0], first_node[1], first_node[3]
            stream = self._node_stream_quiet(job, first_node[2])
        elif len(reps) == 1:
            who = reps[0][0], reps[0][1].id, container.get("exitCode")
            stream = self._stream_of(job)
        else:
            stream = self._stream_of(job)
        lines = self._last_lines(job, stream, CAUSE_TAIL_LINES)
        if who is not None:
            role, k, code = who
            cause = root_cause(role, k, "\n".join(lines), exit_code=code if isinstance(code, int) else None)
            if names_cause(cause):
                for r_role, rep in reps:
                    if (r_role, rep.id) == (role, k):
                        rep.structured_error_msg, rep.root_cause = cause.text, cause
                return cause.text, cause
        tail = [" ".join(ln.split())[:200] for ln in lines if ln.strip()][-ERROR_TAIL_LINES:]
        return first_failure + (f"; last lines: {' | '.join(tail)}" if tail else ""), None

    def _node_stream_quiet(self, job: Dict[str, Any], index: int) -> str:
        try:
            return self._node_stream(job, index)
        except Exception:  # noqa: BLE001 - a hint only: the job's stream instead
            return self._stream_of(job)

    def _last_lines(self, job: Dict[str, Any], stream: str, n: int) -> List[str]:
        """The last ``n`` (at most 10000) log events of ``stream``, oldest first; [] when it
        cannot be read (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_GetLogEvents.html)."""
        if not stream:
            return []
        try:
            ev = self._aws.logs.get_log_events(
                logGroupName=self._log_group(job), logStreamName=stream, startFromHead=False, limit=n
            )["events"]
        except Exception:  # noqa: BLE001 - a hint only
            return []
        return [str(e.get("message", "")).rstrip("\n") for e in ev[-n:]]

    def _ui_url(self, job: Dict[str, Any]) -> str:
        region = str(job.get("jobArn", "")).split(":")[3] if job.get("jobArn", "").count(":") >= 4 else ""
        region = region or self._aws.region
        return f"https://console.aws.amazon.com/batch/home?region={region}#jobs/mnp-job/{job.get('jobId')}"

    @staticmethod
    def _role_of(name: str, start: int, end: int, container: Dict[str, Any]) -> Role:
        env = {e["name"]: e["value"] for e in container.get("environment", [])}
        env = {
            k: v.replace(REPLICA_ID_TOKEN, macros.replica_id) for k, v in env.items()
            if env_contract.torchx_name(k) is None and not k.startswith("TORCHX_")
        }
        entrypoint, args = unwrap_command(list(container.get("command", [])))
        reqs = {r["type"]: r["value"] for r in container.get("resourceRequirements", [])}
        caps = {K8S_ITYPE: container["instanceType"]} if container.get("instanceType") else {}
        resource = Resource(
            cpu=int(float(reqs.get("VCPU", container.get("vcpus", 1)))),
            gpu=int(reqs.get("GPU", 0)),
            memMB=int(reqs.get("MEMORY", container.get("memory", 0))),
            capabilities=caps,
        )
        return Role(name, image=str(container.get("image", "")), entrypoint=entrypoint, args=args, env=env,
                    num_replicas=end - start + 1, resource=resource)

    def list(self) -> List[ListAppResponse]:
        """Jobs tagged by tx in every job queue of the region (one ``list_jobs`` per queue
        and page, then ``describe_jobs`` per 100 jobs to read their tags). A sweep's array
        job is listed as its trials (ids ``<queue>:<name>:<index>``, as the sweep submitted
        them), read by ``describe_jobs`` per 100 children, so that ``tx list`` folds them
        into the sweep's row and shows no extra row for the array."""
        batch = self._aws.batch
        out: List[ListAppResponse] = []
        queues = [q for page in call("listing job queues", lambda: list(
            batch.get_paginator("describe_job_queues").paginate())) for q in page.get("jobQueues", [])]
        for q in queues:
            qname = q["jobQueueName"]
            summaries = call(f"listing jobs of queue {qname}", lambda: [
                j for page in batch.get_paginator("list_jobs").paginate(
                    jobQueue=q["jobQueueArn"], filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}])
                for j in page.get("jobSummaryList", [])
            ])
            # an array's children have ids "<array job id>:<index>" (moto lists them in the queue too)
            ids = [j["jobId"] for j in summaries if ":" not in j["jobId"]]
            arrays: List[Dict[str, Any]] = []
            for i in range(0, len(ids), 100):
                for job in call("describing jobs", batch.describe_jobs, jobs=ids[i:i + 100])["jobs"]:
                    if TAG_VERSION not in (job.get("tags") or {}):
                        continue
                    if (job.get("arrayProperties") or {}).get("size"):
                        arrays.append(job)
                        continue
                    out.append(ListAppResponse(
                        app_id=f"{qname}:{job['jobName']}",
                        state=appstate_from_batch(str(job.get("status", "")), str(job.get("statusReason", ""))),
                        name=job["jobName"],
                    ))
            for job in arrays:
                children = [f"{job['jobId']}:{k}" for k in range(int(job["arrayProperties"]["size"]))]
                for i in range(0, len(children), 100):
                    for child in call(f"describing the children of array job {job['jobName']}",
                                      batch.describe_jobs, jobs=children[i:i + 100])["jobs"]:
                        index = (child.get("arrayProperties") or {}).get("index")
                        if index is None:
                            index = int(str(child["jobId"]).rpartition(":")[2])
                        out.append(ListAppResponse(
                            app_id=make_trial_id(qname, job["jobName"], int(index)),
                            state=appstate_from_batch(str(child.get("status", "")), str(child.get("statusReason", ""))),
                            name=job["jobName"],
                        ))
        return out

    def _cancel_existing(self, app_id: str) -> None:
        """``terminate_job`` (Batch cancels a job that has not started and stops a running
        one) unless it already ended."""
        job = self._find_job(app_id)
        if job is None or job.get("status") in ("SUCCEEDED", "FAILED"):
            return
        call(f"terminating job {job.get('jobName')}", self._aws.batch.terminate_job,
             jobId=job["jobId"], reason=CANCEL_REASON)
        log.info("aws_batch_cancelled", app_id=app_id)

    # -- logs -----------------------------------------------------------------------------
    @staticmethod
    def _log_group(job: Dict[str, Any]) -> str:
        opts = ((job.get("container") or {}).get("logConfiguration") or {}).get("options") or {}
        if not job.get("nodeProperties") and opts.get("awslogs-group"):
            return str(opts["awslogs-group"])
        for rng in job.get("nodeProperties", {}).get("nodeRangeProperties", []):
            opts = (rng.get("container", {}).get("logConfiguration") or {}).get("options") or {}
            if opts.get("awslogs-group"):
                return str(opts["awslogs-group"])
        return DEFAULT_LOG_GROUP

    @staticmethod
    def _stream_of(job: Dict[str, Any]) -> str:
        name = (job.get("container") or {}).get("logStreamName")
        if not name:
            for attempt in reversed(job.get("attempts") or []):
                name = (attempt.get("container") or {}).get("logStreamName")
                if name:
                    break
        return str(name or "")

    @staticmethod
    def _streams_of(job: Dict[str, Any]) -> List[str]:
        """The log streams of every attempt of a job, oldest first: each ended attempt's
        (``attempts[].container.logStreamName``, AttemptDetail:
        https://docs.aws.amazon.com/batch/latest/APIReference/API_AttemptDetail.html), then
        the current one's (``container.logStreamName``); CloudWatch keeps every one."""
        names = [(a.get("container") or {}).get("logStreamName") for a in job.get("attempts") or []]
        names.append((job.get("container") or {}).get("logStreamName"))
        return [str(n) for i, n in enumerate(names) if n and n not in names[:i]]

    def _node_streams(self, job: Dict[str, Any], index: int) -> List[str]:
        """:meth:`_streams_of` of node ``index`` (see :meth:`_node_stream`)."""
        if not job.get("nodeProperties"):
            return self._streams_of(job)
        recs = call("describing job node", self._aws.batch.describe_jobs, jobs=[f"{job['jobId']}#{index}"])["jobs"]
        return self._streams_of(recs[0] if recs else job)

    def _node_stream(self, job: Dict[str, Any], index: int) -> str:
        """The log stream of node ``index``: its node job's (AWS), else the job's own
        (backends without node jobs, such as moto, keep one stream per job; an array child
        has one stream)."""
        if not job.get("nodeProperties"):
            return self._stream_of(job)
        recs = call("describing job node", self._aws.batch.describe_jobs, jobs=[f"{job['jobId']}#{index}"])["jobs"]
        if recs:
            return self._stream_of(recs[0])
        return self._stream_of(job)

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
        """Lines (each ending in ``\\n``) that replica ``k`` of ``role_name`` wrote, from
        CloudWatch Logs (the ``awslogs-group`` of the job definition, default
        ``/aws/batch/job``), node index = the role's first node + ``k``.

        Args:
            since, until: only events in that window (CloudWatch times, milliseconds).
            should_tail: keep polling until the job is terminal.
            streams: None or ``combined`` (CloudWatch keeps stdout and stderr together).

        Raises:
            ValueError: another stream asked for, an unknown role, ``k`` out of range, an
                unknown app.
            SchedulerError: an AWS call failed.
        """
        if streams not in (None, Stream.COMBINED, "combined"):
            raise ValueError(f"aws_batch keeps one combined log per replica (CloudWatch); got streams={streams!r}")
        job = self._find_job(app_id)
        if job is None:
            raise ValueError(f"unknown app {app_id!r}")
        ranges = self._role_ranges(job)
        match = [(s, e) for n, s, e, _ in ranges if n == role_name]
        if not match:
            raise ValueError(f"app {app_id} has no role {role_name!r}; roles: {', '.join(r[0] for r in ranges)}")
        start, end = match[0]
        if not 0 <= k <= end - start:
            raise ValueError(f"role {role_name!r} of {app_id} has replicas 0..{end - start}, not {k}")
        lines = self._events(job, start + k, _ms(since), _ms(until), should_tail)
        return filter_regex(regex, lines)

    def _events(self, job: Dict[str, Any], index: int, start_ms: Optional[int], end_ms: Optional[int],
                tail: bool) -> Iterator[str]:
        """The node's log lines, every attempt's stream in turn, oldest first (a retry writes
        a new stream: the ones before it are read to their end, a followed one included)."""
        group = self._log_group(job)
        tokens: Dict[str, Optional[str]] = {}  # where reading each stream got to
        ended: List[str] = []  # streams of attempts that ended, read to their end
        while True:
            streams = self._node_streams(job, index)
            finished = is_terminal(appstate_from_batch(str(job.get("status")), str(job.get("statusReason", ""))))
            for i, stream in enumerate(streams):
                if stream in ended:
                    continue
                tokens[stream] = yield from self._stream_events(group, stream, tokens.get(stream), start_ms, end_ms)
                if i < len(streams) - 1:
                    ended.append(stream)
            if not tail or finished:
                return
            time.sleep(self.poll_interval)
            fresh = call("describing job", self._aws.batch.describe_jobs, jobs=[job["jobId"]])["jobs"]
            if not fresh:
                return
            job = fresh[0]

    def _stream_events(self, group: str, stream: str, token: Optional[str], start_ms: Optional[int],
                       end_ms: Optional[int]) -> Generator[str, None, Optional[str]]:
        """Lines of one log stream from ``token`` on (GetLogEvents:
        https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_GetLogEvents.html);
        returns the token to go on from (None: the stream does not exist yet).

        Raises:
            SchedulerError: the call failed.
        """
        from botocore.exceptions import BotoCoreError, ClientError  # botocore with the clients

        # the window goes with every page: a token continues the same query
        kwargs: Dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
        if token:
            kwargs["nextToken"] = token
        if start_ms is not None:
            kwargs["startTime"] = start_ms
        if end_ms is not None:
            kwargs["endTime"] = end_ms
        while True:
            try:
                resp = self._aws.logs.get_log_events(**kwargs)
            except (ClientError, BotoCoreError) as e:
                if error_code(e) == "ResourceNotFoundException":
                    return token  # the stream is not created yet (or there is none)
                raise explain(e, f"reading log stream {stream}") from None
            for ev in resp.get("events", []):
                yield ev["message"] if ev["message"].endswith("\n") else ev["message"] + "\n"
            nxt = resp.get("nextForwardToken")
            if not nxt or nxt == kwargs.get("nextToken"):
                return kwargs.get("nextToken")
            kwargs["nextToken"] = nxt

    def close(self) -> None:
        """Nothing to release (boto3 clients close with the process)."""


def create_scheduler(session_name: str, **kwargs: Any) -> AwsBatchScheduler:
    """TorchX's factory: ``create_scheduler(session_name, **kwargs)``; ``kwargs`` are
    :class:`AwsBatchScheduler`'s (region, endpoint_url, poll_interval)."""
    return AwsBatchScheduler(session_name, **kwargs)


def batch_attempts(records: List[Dict[str, Any]], state: AppState) -> List[Attempt]:
    """Every attempt of a job with why it ended, from ``describe_jobs``' ``attempts``
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_AttemptDetail.html: the
    attempts that ended, oldest first). An attempt whose ``statusReason`` starts with
    ``Host EC2`` (a Spot reclaim, an instance lost) is an infrastructure failure; another
    failed one is the user's (its exit code, or the container's reason). ``state`` is the
    job's: the last ended attempt is its end when the job is terminal, else an attempt
    still going follows."""
    out = []
    terminal = state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)
    for i, rec in enumerate(records):
        reason = str(rec.get("statusReason") or "")
        container = rec.get("container") or {}
        code = container.get("exitCode")
        last = terminal and i == len(records) - 1
        if last and state != AppState.FAILED:
            out.append(Attempt(i, state, None, reason))
            continue
        if reason.startswith(HOST_FAILURE_REASON):
            kind = FailureKind.INFRA
        else:
            kind = FailureKind.USER
            reason = f"exit code {code}" if code is not None else str(container.get("reason") or reason)
        out.append(Attempt(i, AppState.FAILED, kind, reason, retried=not last))
    if not terminal:
        out.append(Attempt(len(records), state))
    return out
