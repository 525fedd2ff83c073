"""The ``gcp_batch`` scheduler: apps as Google Cloud Batch jobs.

* submit: ``BatchServiceClient.create_job`` of the job :mod:`tx_scheduler_gcp_batch.request`
  builds; the app id is ``{project}:{location}:{job_id}`` (handle
  ``gcp_batch://<session>/<project>:<location>:<job_id>``, as in TorchX).
* status: from the location's shared snapshot (:mod:`tx_scheduler_gcp_batch._plane`: one
  ``list_jobs`` for every app followed on the host, ``list_tasks`` of the jobs that changed);
  a job it lacks is asked on its own: ``get_job`` (job state and status events) and
  ``list_tasks`` (one task per replica: state, exit code, events).
* logs: Cloud Logging ``entries.list`` of the log ``batch_task_logs``, by job uid and task
  (stdout entries have severity INFO, stderr ERROR).
* cancel: ``cancel_job`` (the job stays, CANCELLED, so ``tx status`` still answers).
* list: ``list_jobs`` in the configured location, jobs labelled ``tx_version``; only the fields
  list reads (:data:`LIST_FIELDS`, an ``X-Goog-FieldMask``).
* sweeps: single-replica trials are the tasks of one job (``task_count`` = trials,
  ``parallelism`` = ``--max_parallel``; trial ``i`` is task ``BATCH_TASK_INDEX`` = ``i``, app
  id ``{project}:{location}:{job_id}:{i}``); their states are one ``list_tasks`` per job.

Where the project, location, endpoints and credentials come from: :mod:`tx_scheduler_gcp_batch._client`.

References: https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs,
https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs.taskGroups.tasks,
https://cloud.google.com/batch/docs/analyze-job-using-logs,
https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

import attrs

from tx import get_logger
from tx.schedulers import (
    DescribeAppResponse, ListAppResponse, Scheduler, SchedulerError, add_infra_retries_opt, env as envc, failure_once,
    infra_retries, look_since)
from tx.specs import (
    AppDef, AppDryRunInfo, AppState, CfgVal, InvalidRunConfigException, read_stored_appdef_and_options, runopts)

from tx_scheduler_gcp_batch import _client, _plane
from tx_scheduler_gcp_batch._attempts import batch_attempts, retries
from tx_scheduler_gcp_batch._logs import LOG_NAME, TaskLogs
from tx_scheduler_gcp_batch._states import JOB_STATES, TASK_STATES
from tx_scheduler_gcp_batch._status import (CAUSE_TAIL_LINES, ERROR_TAIL_LINES, cause_failure, console_url, failure,
                                            replica_statuses, state_name)
from tx_scheduler_gcp_batch._sweep import (
    MAX_TASKS, SWEEP_TEMPLATE_ENV, TRIAL_SCRIPT_ENV, TrialJobs, build_sweep_job, fast_trials, is_sweep_job,
    make_trial_id, parse_trial_id, sweep_unsupported, trial_env, trial_words,
)
from tx_scheduler_gcp_batch._sweep_states import task_states
from tx_scheduler_gcp_batch.request import (
    APPDEF_LIMIT, ENV_APPDEF, GcpBatchJob, TaskInfo, build_job, parse_role_script, roles_of, task_layout,
)
from tx_scheduler_gcp_batch.version import __version__

__all__ = ["GcpBatchScheduler", "create_scheduler", "batch_attempts", "JOB_STATES", "TASK_STATES", "LOG_NAME",
           "CAUSE_TAIL_LINES", "ERROR_TAIL_LINES"]

log = get_logger(__name__)

PROVISIONING_MODELS = ("STANDARD", "SPOT")
#: ``list_jobs`` and a sweep's ``list_tasks`` page size asked (Batch v1 documents no default and no maximum)
LIST_PAGE_SIZE = 1000
#: the fields ``list`` reads of each job, sent as the ``X-Goog-FieldMask`` system parameter
#: (https://cloud.google.com/apis/docs/system-parameters): a job's whole body carries every
#: task's environment (the stored AppDef, the run options), which ``list`` does not need; the
#: runnable's commands tell a sweep's job (``is_sweep_job``)
LIST_FIELDS = ",".join(["jobs.name", "jobs.labels", "jobs.status.state",
                        "jobs.taskGroups.taskSpec.runnables.container.commands", "nextPageToken"])
#: the fields a sweep's trial states need of each task (``states_of``)
TASK_STATE_FIELDS = "tasks.name,tasks.status.state,nextPageToken"


class GcpBatchScheduler(TaskLogs, Scheduler[GcpBatchJob]):
    """Runs apps on Google Cloud Batch through the official client libraries.

    Args:
        session_name: the session part of app handles.
        project: default project (else the environment / credentials; see :mod:`._client`).
        location: default location for ``list`` (else ``$CLOUDSDK_BATCH_LOCATION`` or
            ``us-central1``).
        batch_client: a ``google.cloud.batch_v1.BatchServiceClient`` to use (default: one
            made on first use for ``$CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH`` or Google's
            endpoint, over REST).
        logging_client: a ``google.cloud.logging.Client`` to use (default: one made on first
            use for ``$CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING`` or Google's endpoint).
    """

    workspace_kind = "docker"
    #: roles with mounts are refused (Scheduler.ignored_mounts); the torchx command drops
    #: them with a warning, as TorchX ignores them
    supports_mounts = False
    mounts_advice = ("gcp_batch does not support mounts yet: remove them (the job can read gs:// paths "
                     "itself), or run on kubernetes or aws_batch")

    def __init__(
        self,
        session_name: str,
        project: Optional[str] = None,
        location: Optional[str] = None,
        batch_client: Any = None,
        logging_client: Any = None,
    ) -> None:
        super().__init__("gcp_batch", session_name)
        self._project = project
        self._location = location
        self._batch = batch_client
        self._logging = logging_client
        self._creds_project: Optional[str] = None
        self._given = (batch_client, logging_client)  # the caller's clients: never closed here
        self._trials: Optional[TrialJobs] = None  # in submit_dryrun_many: the trials' jobs (TrialJobs)
        # read during the current look (tx.schedulers.look_since), for the rest of it: a sweep's
        # job (sweep job app id -> (asked at, Job)), and its FAILED tasks (final: a task that is
        # retried stays RUNNING), sweep job app id -> index -> Task
        self._look_jobs: Dict[str, Tuple[float, Any]] = {}
        self._failed_tasks: Dict[str, Dict[int, Any]] = {}

    # -- clients ---------------------------------------------------------------------------
    def _batch_client(self) -> Any:
        if self._batch is None:
            self._batch, self._creds_project = _client.make_batch_client()
            _plane.with_budget(self._batch, self._endpoint())  # every request takes a token
        return self._batch

    @staticmethod
    def _endpoint() -> str:
        return _client.endpoint_from_env(_client.BATCH_ENDPOINT_ENV) or "https://batch.googleapis.com"

    def _logging_client(self, project: str) -> Any:
        if self._logging is None:
            self._logging = _client.make_logging_client(project)
        return self._logging

    def _project_for(self, cfg_project: Optional[str], dryrun: bool = False) -> str:
        if cfg_project or self._project or _client.env_project():
            return _client.resolve_project(cfg_project or self._project)
        try:
            self._batch_client()  # finds the credentials and their project
        except SchedulerError:
            if not dryrun:
                raise
            # a dryrun needs a project, never credentials: say how to give the project
            raise SchedulerError(f"gcp_batch: no Google Cloud project: {_client.SET_PROJECT} "
                                 "(a dryrun needs no credentials)") from None
        return _client.resolve_project(None, self._creds_project)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return _client.call(what, fn, *args, **kwargs)

    # -- run options -------------------------------------------------------------------------
    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("project", type_=str, help="GCP project (default: $GOOGLE_CLOUD_PROJECT, "
                 "$CLOUDSDK_CORE_PROJECT, or the project of the application default credentials)")
        opts.add("location", type_=str, default=self._location or _client.default_location(),
                 help="Batch location (region); default $CLOUDSDK_BATCH_LOCATION or us-central1")
        opts.add("service_account", type_=str, help="email of the service account the VMs run as")
        opts.add("network", type_=str, help="VPC network URL (projects/P/global/networks/N)")
        opts.add("subnetwork", type_=str, help="subnetwork URL (projects/P/regions/R/subnetworks/S)")
        opts.add("provisioning_model", type_=str, default="STANDARD", help="VM provisioning model: STANDARD or SPOT")
        add_infra_retries_opt(opts)
        opts.add("spot_retries", type_=int,
                 help="the former name of infra_retries, still read (it wins where both are set)")
        opts.add("machine_type", type_=str,
                 help="Compute Engine machine type (default: chosen by Batch; a2-highgpu-Ng for N GPUs)")
        return opts

    # -- submit ------------------------------------------------------------------------------
    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[GcpBatchJob]:
        model = str(cfg.get("provisioning_model") or "STANDARD").upper()
        if model not in PROVISIONING_MODELS:
            raise InvalidRunConfigException(
                f"provisioning_model must be STANDARD or SPOT, got {cfg.get('provisioning_model')!r}",
                "provisioning_model", cfg,
            )
        spot_retries = cfg.get("spot_retries")
        if isinstance(spot_retries, int) and spot_retries < 0:
            raise InvalidRunConfigException("spot_retries must be >= 0", "spot_retries", cfg)
        infra_retries(cfg)
        cfg = {**cfg, "provisioning_model": model}
        project = self._project_for(cfg.get("project"), dryrun=True)  # type: ignore[arg-type]
        location = str(cfg.get("location") or self._location or _client.default_location())
        req = self._trials.job(app, cfg, project, location) if self._trials is not None else build_job(
            app, cfg, project, location, __version__, _client.job_message)
        return AppDryRunInfo(req, fmt=str)

    def submit_dryrun_many(self, apps: Any, cfg: Mapping[str, CfgVal]) -> List[AppDryRunInfo[Any]]:
        """:meth:`tx.schedulers.Scheduler.submit_dryrun_many` (raises as it does); each trial's
        stored AppDef made on first use of its job (a sweep's job keeps none: 10,000 trials
        spent a fifth of their dryrun on them), and a trial alike the first one its job
        message too (:class:`tx_scheduler_gcp_batch._sweep.TrialJobs`)."""
        self._trials = TrialJobs(__version__, _client.job_message)
        try:
            return super().submit_dryrun_many(apps, cfg)
        finally:
            self._trials = None

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None) -> None:
        """Roles without a resource are allowed (Batch picks a machine type)."""

    def schedule(self, dryrun_info: AppDryRunInfo[GcpBatchJob]) -> str:
        """Create the job; return its app id ``{project}:{location}:{job_id}``.

        Raises:
            SchedulerError: Batch refused the job (permission, quota, invalid request) or
                cannot be reached; nothing is created then.
        """
        req = dryrun_info.request
        client = self._batch_client()
        try:
            self._call(f"create job {req.job_id} in {req.parent}", client.create_job,
                       parent=req.parent, job=req.job, job_id=req.job_id)
        finally:
            self._plane_of(req.app_id).invalidate()  # the next look asks Batch
        log.info("gcp_batch job created", app_id=req.app_id)
        return req.app_id

    # -- sweeps: one job whose tasks are the trials ---------------------------------------------
    #: Batch's most tasks in one task group (https://cloud.google.com/batch/quotas#job_limits)
    sweep_array_limit = MAX_TASKS

    def submit_sweep_dryrun(self, trials: Any, max_parallel: Optional[int]) -> Optional[AppDryRunInfo[Any]]:
        """One job whose tasks are the trials (:func:`tx_scheduler_gcp_batch.request.build_sweep_job`:
        ``task_count`` = trials, ``parallelism`` = ``max_parallel``) where each trial is one
        replica; None (one job per trial) otherwise.

        Raises:
            ValueError: more parallelism or a larger job than Batch takes.
        """
        reqs = [t.request for t in trials]
        fast = fast_trials(reqs)  # the trials alike trial 0: their messages are not made
        why = sweep_unsupported(reqs, fast)
        if why is not None:
            log.info("gcp_batch sweep is one job per trial", reason=why)
            return None
        return AppDryRunInfo(build_sweep_job(reqs, max_parallel, fast), fmt=str)

    def sweep_not_an_array(self, trials: Any) -> str:
        """Why the trials are one job each (:func:`tx_scheduler_gcp_batch.request.sweep_unsupported`)."""
        return sweep_unsupported([t.request for t in trials]) or "no array"

    def schedule_sweep(self, dryrun_info: AppDryRunInfo[Any]) -> List[str]:
        """Create the sweep's job (one call); returns trial ``i``'s app id
        ``{project}:{location}:{job_id}:{i}`` (task ``i``).

        Raises:
            SchedulerError: as :meth:`schedule`.
        """
        req: GcpBatchJob = dryrun_info.request
        self.schedule(dryrun_info)
        return [make_trial_id(req, i) for i in range(req.job.task_groups[0].task_count)]

    def _get_task(self, job: Any, index: int) -> Optional[Any]:
        from google.api_core import exceptions as gex

        group = job.task_groups[0].name if job.task_groups[0].name else f"{job.name}/taskGroups/group0"
        try:
            return self._batch_client().get_task(name=f"{group}/tasks/{index}")
        except gex.NotFound:
            return None
        except Exception as e:  # noqa: BLE001 - mapped to one line
            raise _client.translate(e, f"get task {index} of {job.name}") from None

    def _sweep_job(self, job_app_id: str) -> Optional[Any]:
        """The sweep's job: the one read during the current look (:func:`tx.schedulers.look_since`:
        a sweep status describes each failed trial after reading the job's counts), else
        ``get_job``."""
        since = look_since()
        kept = self._look_jobs.get(job_app_id)
        if since is not None and kept is not None and kept[0] >= since:
            return kept[1]
        asked = time.time()
        job = self._get_job(job_app_id)
        if job is not None:
            self._look_jobs[job_app_id] = (asked, job)
        return job

    def _describe_trial(self, app_id: str, job_app_id: str, index: int) -> Optional[DescribeAppResponse]:
        """A sweep trial: task ``index`` of the sweep's job, as an app of one replica."""
        job = self._sweep_job(job_app_id)
        group = job.task_groups[0] if job is not None else None
        if group is None or index >= (group.task_count or len(group.task_environments)):
            return None
        env = trial_env(job, index)
        info = TaskInfo(index, env.get(envc.ROLE_NAME, "task"), 0, 0)
        task = self._failed_tasks.get(job_app_id, {}).get(index) or self._get_task(job, index)
        job_state = JOB_STATES.get(job.status.state.name, AppState.UNKNOWN)
        statuses, failed = replica_statuses(job, {index: info}, [task] if task is not None else [], job_state)
        state = statuses[0].replicas[0].state
        events = list(task.status.status_events) if task is not None else []
        roles = roles_of(job)[:1]
        if roles:
            if SWEEP_TEMPLATE_ENV in group.task_spec.environment.variables:  # the trial's row of the job's table
                exports, words = trial_words(job, index)
                entrypoint, args = words[exports], words[exports + 1:]
            else:
                script = env.get(TRIAL_SCRIPT_ENV) or list(group.task_spec.runnables[0].container.commands)[
                    -1].replace(f"'\"${envc.APP_ID}\"'", app_id)
                entrypoint, args = parse_role_script(script)
            contract = set(envc.TORCHX_NAMES) | set(envc.TORCHX_NAMES.values()) | {TRIAL_SCRIPT_ENV}
            roles = [attrs.evolve(roles[0], entrypoint=entrypoint, args=args, num_replicas=1,
                                  env={k: v for k, v in env.items() if k not in contract})]
        desc = DescribeAppResponse(
            app_id=app_id, state=state, num_restarts=retries(task) if task is not None else 0,
            msg=events[-1].description if events else job.status.state.name,
            roles_statuses=statuses, roles=roles, ui_url=console_url(job.name),
            metadata={"batch_state": job.status.state.name, "job_name": job.name, "uid": job.uid, "task": index},
        )
        if state == AppState.FAILED:
            desc.structured_error_msg, desc.root_cause = failure(
                job, failed, statuses, lambda i, n: self._last_lines(job, i, n))
        desc.attempts = batch_attempts(job, {index: info}, [task] if task is not None else [], state,
                                       cause_failure(failed, desc.root_cause))
        desc.metadata["attempts"] = [a.to_json() for a in desc.attempts]
        return desc

    def states_of(self, app_ids: Any) -> Optional[Dict[str, AppState]]:
        """The states of a sweep's trials (:mod:`tx_scheduler_gcp_batch._sweep_states`):
        per sweep job, its task counts by state (one ``get_job``), then one ``list_tasks``
        (pages of 1,000) per state other than the most common one, filtered by state; None
        when some ids are not trials of a sweep job (the Runner lists or describes them)."""
        parsed = [parse_trial_id(a) for a in app_ids]
        if not parsed or any(p is None for p in parsed):
            return None
        out: Dict[str, AppState] = {}
        from google.api_core import exceptions as gex

        client = self._batch_client()
        for job_app_id in sorted({p[0] for p in parsed if p is not None}):
            name = self._job_name(job_app_id)
            job = self._sweep_job(job_app_id)
            if job is None:
                continue
            try:
                states, failed = task_states(client, job, f"{name}/taskGroups/group0", LIST_PAGE_SIZE, TASK_STATE_FIELDS)
            except gex.NotFound:
                continue
            except Exception as e:  # noqa: BLE001 - mapped to one line
                raise _client.translate(e, f"list tasks of {name}") from None
            self._failed_tasks.setdefault(job_app_id, {}).update(failed)
            for index, state in states.items():
                out[f"{job_app_id}:{index}"] = TASK_STATES.get(state, AppState.UNKNOWN)
        return out

    def cancel_many(self, app_ids: Any) -> None:
        """Cancel a sweep's trials: ``cancel_job`` of their job (Batch cancels no single
        task: the job's other unfinished trials end too); other apps as :meth:`cancel`."""
        jobs = []
        for a in app_ids:
            p = parse_trial_id(a)
            target = p[0] if p is not None else a
            if target not in jobs:
                jobs.append(target)
        for j in jobs:
            self.cancel(j)

    # -- queries -------------------------------------------------------------------------------
    def _job_name(self, app_id: str) -> str:
        parts = app_id.split(":")
        if len(parts) == 3 and all(parts):
            project, location, job_id = parts
        elif len(parts) == 1 and parts[0]:
            project, location, job_id = self._project_for(None), self._location or _client.default_location(), parts[0]
        else:
            raise ValueError(f"gcp_batch: app id {app_id!r} is not PROJECT:LOCATION:JOB_ID")
        return f"projects/{project}/locations/{location}/jobs/{job_id}"

    def _get_job(self, app_id: str) -> Optional[Any]:
        from google.api_core import exceptions as gex

        name = self._job_name(app_id)
        client = self._batch_client()
        try:
            return client.get_job(name=name)
        except gex.NotFound:
            return None
        except Exception as e:  # noqa: BLE001 - mapped to one line
            raise _client.translate(e, f"get job {name}") from None

    def _tasks(self, job: Any) -> Optional[List[Any]]:
        """The job's tasks; None where the job went away meanwhile (deleted)."""
        from google.api_core import exceptions as gex

        group = job.task_groups[0].name if job.task_groups and job.task_groups[0].name else f"{job.name}/taskGroups/group0"
        client = self._batch_client()
        try:
            return list(client.list_tasks(parent=group))
        except gex.NotFound:
            return None
        except Exception as e:  # noqa: BLE001 - mapped to one line
            raise _client.translate(e, f"list tasks of {job.name}") from None

    # -- the status plane ------------------------------------------------------------------------
    def _plane_of(self, app_id: str) -> Any:
        project, location = self._job_name(app_id).split("/")[1::2][:2]
        return _plane.plane(self._endpoint(), project, location)

    def _from_snapshot(self, app_id: str) -> Tuple[Optional[Any], Optional[List[Any]], float]:
        """The app's job and tasks from the location's shared snapshot and when Batch was
        asked (epoch s); ``(None, None, now)`` where the snapshot lacks them (created since,
        not tx's, a sweep's job).

        Raises:
            SchedulerError: Batch refused or cannot be reached;
                :class:`tx.schedulers.budget.ThrottledError`: it kept answering 429.
        """
        from google.api_core import exceptions as gex

        from tx.schedulers import ThrottledError

        name = self._job_name(app_id)
        parent, job_id = name.rsplit("/jobs/", 1)
        p = self._plane_of(app_id)
        client = self._batch_client()

        def fetch() -> Dict[str, Any]:
            last = p.last()
            return _plane.fetch_location(client, parent, last.items if last is not None else None, is_sweep_job)
        try:
            snap = p.get(fetch)
        except (gex.RetryError, gex.TooManyRequests, gex.ResourceExhausted) as e:
            raise ThrottledError(f"gcp_batch: list jobs in {parent}: Batch kept answering that it is rate limited "
                                 f"({_client._first_line(str(e))[:200]}); the apps' states are unknown, not failed") from None
        except gex.NotFound:
            return None, None, time.time()
        except Exception as e:  # noqa: BLE001 - mapped to one line
            raise _client.translate(e, f"list jobs in {parent}") from None
        rec = (snap.items.get("jobs") or {}).get(job_id)
        if rec is None or rec.get("tasks") is None:
            return None, None, time.time()
        return _plane.job_of(rec["job"]), [_plane.task_of(t) for t in rec["tasks"]], snap.fetched_at

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state from the Batch job and its tasks (the location's shared snapshot,
        ``metadata["status_fetched_at"]``: when Batch was asked, epoch s; a job it lacks is
        asked on its own); None for an unknown job.

        ``msg``: the job's latest status event (why it waits, or how it ended);
        ``structured_error_msg``: the failed replica that is the app's cause (the first
        that failed, unless it only lost a peer that failed within 10 s of it, or a task
        whose VM Batch lost ended within those 10 s: :func:`tx.schedulers.why.first_cause`,
        :func:`tx_scheduler_gcp_batch._status.known_failure`), its exit code and event, and its last
        stderr lines. Raises SchedulerError for API errors other than not found
        (:class:`tx.schedulers.budget.ThrottledError` when Batch kept throttling the look).
        """
        trial = parse_trial_id(app_id)
        if trial is not None:
            return self._describe_trial(app_id, *trial)
        job, tasks, fetched_at = self._from_snapshot(app_id)
        if job is None:
            job = self._get_job(app_id)
            if job is None:
                return None
            tasks = None
        state_name = job.status.state.name
        state = JOB_STATES.get(state_name, AppState.UNKNOWN)
        layout = {t.index: t for t in task_layout(job)}
        if tasks is None:
            tasks = self._tasks(job) if layout else []
        if tasks is None:
            return None
        roles_statuses, failed = replica_statuses(job, layout, tasks, state)
        events = list(job.status.status_events)
        msg = events[-1].description if events else state_name
        if state_name == "DELETION_IN_PROGRESS":
            msg = f"the job is being deleted ({msg})"
        desc = DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=max((retries(t) for t in tasks), default=0),
            msg=msg,
            roles_statuses=roles_statuses,
            roles=roles_of(job),
            ui_url=console_url(job.name),
            metadata={"batch_state": state_name, "job_name": job.name, "uid": job.uid,
                      "status_fetched_at": fetched_at},
        )
        env = job.task_groups[0].task_spec.environment.variables if job.task_groups else {}
        desc.app, why, desc.metadata["run_options"] = read_stored_appdef_and_options(
            env.get(ENV_APPDEF), f"the task spec's environment variable {ENV_APPDEF}", APPDEF_LIMIT)
        if why:
            desc.metadata["app_not_stored"] = why
        if state == AppState.FAILED:
            desc.structured_error_msg, desc.root_cause = self._failure(job, failed, roles_statuses)
        desc.attempts = batch_attempts(job, layout, tasks, state, cause_failure(failed, desc.root_cause))
        desc.metadata["attempts"] = [a.to_json() for a in desc.attempts]
        return desc


    def _failure(self, job: Any, failed: Any, statuses: Any) -> Any:
        """:func:`failure` of an ended job, its tasks' logs read once per process while its
        failed tasks are the same (the logs do not change)."""
        key = (job.uid, len(job.status.status_events), tuple((f[0].index, f[3]) for f in failed))
        return failure_once(self.__dict__.setdefault("_failures", {}), key, statuses,
                            lambda: failure(job, failed, statuses, lambda index, n: self._last_lines(job, index, n)))

    def list(self) -> List[ListAppResponse]:
        """Apps (jobs labelled ``tx_version``) in the configured project and location: one
        ``list_jobs`` (its pages). A sweep's job is listed as its trials (ids
        ``{project}:{location}:{job_id}:{task index}``, as the sweep submitted them), read by
        one ``list_tasks`` (its pages) per sweep job, so that ``tx list`` folds them into the
        sweep's row and shows no extra row for the job."""
        project = self._project_for(None)
        location = self._location or _client.default_location()
        parent = f"projects/{project}/locations/{location}"
        client = self._batch_client()

        def jobs() -> List[Any]:
            pager = client.list_jobs(request={"parent": parent, "page_size": LIST_PAGE_SIZE},
                                     metadata=[("x-goog-fieldmask", LIST_FIELDS)])
            # the raw protobuf messages: proto-plus wraps every attribute read
            return [job for page in pager.pages for job in type(page).pb(page).jobs]

        out = []
        for job in self._call(f"list jobs in {parent}", jobs):
            if "tx_version" not in job.labels:
                continue
            job_id = job.name.rsplit("/", 1)[-1]
            app_id = f"{project}:{location}:{job_id}"
            name = job.labels.get("tx_app_name", "")
            if is_sweep_job(job):
                states = self.states_of([f"{app_id}:0"]) or {}
                out += [ListAppResponse(app_id=trial, state=state, name=name)
                        for trial, state in sorted(states.items(), key=lambda kv: int(kv[0].rsplit(":", 1)[1]))]
                continue
            out.append(ListAppResponse(app_id=app_id, state=JOB_STATES.get(state_name(job.status), AppState.UNKNOWN),
                                       name=name))
        return out

    def _cancel_existing(self, app_id: str) -> None:
        """``cancel_job`` unless the job already ended or is being cancelled (non-blocking)."""
        from google.api_core import exceptions as gex

        job = self._get_job(app_id)
        if job is None or job.status.state.name in (
            "SUCCEEDED", "FAILED", "CANCELLED", "CANCELLATION_IN_PROGRESS", "DELETION_IN_PROGRESS",
        ):
            return
        client = self._batch_client()
        try:
            client.cancel_job(name=job.name)
        except (gex.BadRequest, gex.NotFound):
            pass  # ended (FAILED_PRECONDITION, HTTP 400) or went away meanwhile
        except Exception as e:  # noqa: BLE001 - mapped to one line
            raise _client.translate(e, f"cancel job {job.name}") from None
        finally:
            self._plane_of(app_id).invalidate()  # the next look asks Batch

    def close(self) -> None:
        """Close the HTTP sessions of the clients this scheduler made (new ones are made on
        next use); clients passed to the constructor are left open. Idempotent."""
        batch, self._batch = self._batch, self._given[0]
        logging_client, self._logging = self._logging, self._given[1]
        for client, closer in ((batch, getattr(getattr(batch, "transport", None), "close", None)),
                               (logging_client, getattr(getattr(logging_client, "_http", None), "close", None))):
            if closer is not None and client not in self._given:
                try:
                    closer()
                except Exception:  # noqa: BLE001 - best effort on shutdown
                    pass


def create_scheduler(session_name: str, **kwargs: Any) -> GcpBatchScheduler:
    """The factory tx calls (``gcp_batch`` in the plugin registry): ``kwargs`` are
    :class:`GcpBatchScheduler`'s (``project``, ``location``, ``batch_client``,
    ``logging_client``)."""
    return GcpBatchScheduler(session_name, **kwargs)
