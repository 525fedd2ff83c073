"""A local stand-in for the Google Cloud Batch v1 and Cloud Logging v2 REST APIs, for tests.

No Batch emulator exists, so the tests run the official client libraries against this
server. It implements the calls ``gcp_batch`` makes, over HTTP/JSON as the REST transports
send them, and parses every request body into the library's own proto messages (unknown
fields are an error), so a request the real service would not parse fails here too:

* Batch (https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs):
  ``jobs.create`` (``?jobId=``), ``jobs.get``, ``jobs.list``, ``jobs.delete``,
  ``jobs.cancel``, ``jobs.taskGroups.tasks.list`` / ``get``, ``operations.get`` /
  ``list``; ``jobs.list`` and ``tasks.list`` page (``pageSize``, ``nextPageToken``), ``tasks.list`` takes
  ``filter=State=<state>``, and both honour the
  ``X-Goog-FieldMask`` system parameter. As Batch documents, a job has exactly one task group. States move on events,
  never on a clock, and only forward (a move Batch never makes is recorded in
  :attr:`FakeGcp.errors`, which the tests' fixture checks): a job is QUEUED
  until VMs for all its tasks are free (:meth:`FakeGcp.vms` limits them; no limit by
  default), then SCHEDULED with its tasks ASSIGNED; a task is RUNNING once its process has
  started and the job RUNNING with its first task; a task ends SUCCEEDED or FAILED when its
  process exits (with its exit code; retried by ``max_retry_count`` and lifecycle
  policies), and the job SUCCEEDED or FAILED when its last task has ended. Tasks that
  never ran end UNEXECUTED. Every change is a ``STATUS_CHANGED`` status event worded as
  Batch words it (``Job state is set from QUEUED to SCHEDULED for job ...``), and
  ``status.taskGroups`` counts the tasks in each state; ``runDuration`` is set at the end.
* Long-running operations: ``jobs.cancel`` moves the job to CANCELLATION_IN_PROGRESS and
  stops its processes (SIGTERM, SIGKILL after ``kill_grace_s``); once they have exited the
  job is CANCELLED and the operation done (response ``CancelJobResponse``).
  ``jobs.delete`` moves the job to DELETION_IN_PROGRESS the same way; once its processes
  have exited the job is gone (404) and the operation done (response ``Empty``). Both
  carry ``OperationMetadata`` (target, verb, create and end time) and answer
  ``operations.get``, which is what the clients' ``Operation.result()`` polls.
* Tasks really run: each task runs its runnables in order as local subprocesses (a
  container runnable runs ``entrypoint + commands`` on this host; the image is not
  pulled), with ``BATCH_TASK_INDEX``, ``BATCH_TASK_COUNT``, ``BATCH_HOSTS_FILE``,
  ``BATCH_MAIN_NODE_HOSTNAME``, ``BATCH_TASK_RETRY_ATTEMPT`` and the task's environment;
  at most ``parallelism`` tasks of a job at once (a sweep's trials).
* Cloud Logging (https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list):
  ``entries:list`` of the ``batch_task_logs`` entries the tasks wrote (one entry per line,
  stdout with severity INFO, stderr ERROR; labels ``job_uid`` and ``task_id``), with the
  filter operators the scheduler uses (``=``, ``:``, ``<``, ``<=``, ``>``, ``>=`` on
  ``logName``, ``labels.*``, ``timestamp``, ``severity``, joined by ``AND``), ordering and
  paging.

Spot preemption: :meth:`FakeGcp.preempt` reclaims a running task's VM (with ``notice_s``,
SIGTERM then SIGKILL after the notice, as Compute Engine's 30 s; exit code 50001, or
another of Batch's reserved codes for a VM lost: 50002 reporting timeout, 50003 rebooted, 50006 recreated).
Failure injection, by project name: ``denied-project`` answers 403 PERMISSION_DENIED to
everything; ``unauthenticated-project`` 401 UNAUTHENTICATED (expired or revoked
credentials); ``quota-project`` answers 429 RESOURCE_EXHAUSTED to ``jobs.create``.

Counted at the server (issue 40): :attr:`FakeGcp.requests` counts the requests served by
method (``list_jobs``, ``get_job``, ``list_tasks`` ...), and ``throttled`` those answered
429; :meth:`FakeGcp.throttle` answers the next ``n`` Batch requests ``429
RESOURCE_EXHAUSTED`` (a rate quota, as https://cloud.google.com/batch/quotas describes).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import re
import subprocess
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from google.cloud import batch_v1
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from fake_gcp_tasks import TaskRunner
from fake_gcp_wire import (  # noqa: F401 - the tests import some of them from here
    ApiError, DENIED_PROJECT, JobState, QUOTA_PROJECT, TaskState, UNAUTHENTICATED_PROJECT, _JOB_ID,
    _PARENT, _now, _ns, _page, _parse_filter, _public, _to_json,
)

def count_calls(client: Any, monkeypatch: Any) -> List[str]:
    """The names of the Batch API calls ``client`` (a ``batch_v1.BatchServiceClient``) makes
    from here on, in order; each call still goes to the server. Counted at this client, not
    at the server, so that another process asking the same server counts for nothing.
    ``monkeypatch`` (pytest's) undoes it at the test's end."""
    calls: List[str] = []
    for name in ("create_job", "get_job", "list_jobs", "list_tasks", "get_task", "cancel_job"):
        real = getattr(client, name)

        def counted(*a: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls.append(_name)
            return _real(*a, **kw)

        monkeypatch.setattr(client, name, counted)
    return calls


class _Job:
    """A job and its tasks, as the server keeps them."""

    def __init__(self, job: Any, workdir: str) -> None:
        self.job = job
        self.workdir = workdir
        group = job.task_groups[0]
        n = len(group.task_environments) or group.task_count or 1
        self.tasks = [
            batch_v1.Task(name=f"{group.name}/tasks/{i}", status=batch_v1.TaskStatus(state=TaskState.PENDING))
            for i in range(n)
        ]
        self.procs: Dict[int, subprocess.Popen] = {}
        self.stop = threading.Event()  # cancel or delete asked: start nothing more, stop what runs
        self.deleting = False
        self.preempted: Dict[int, int] = {}  # task index -> the reserved exit code its lost VM ends it with
        self.vms = 0  # VMs (task slots) the job holds now
        self.started: set = set()  # tasks whose current attempt has started
        self.running_since: Optional[float] = None
        self.runner: Optional[threading.Thread] = None
        self.ops: List[str] = []  # names of the operations that end when the job's resources are cleaned up


#: the job state changes Batch makes (JobStatus.State docs); the server checks its own moves
_NEXT = {
    JobState.QUEUED: {JobState.SCHEDULED},
    JobState.SCHEDULED: {JobState.RUNNING, JobState.FAILED},
    JobState.RUNNING: {JobState.SUCCEEDED, JobState.FAILED},
    JobState.CANCELLATION_IN_PROGRESS: {JobState.CANCELLED},
}
_ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class FakeGcp(TaskRunner):
    """The server: ``start()`` it, point ``CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH`` and
    ``..._LOGGING`` at :attr:`url`, ``stop()`` it. ``created`` holds every job body that
    ``jobs.create`` accepted (as the ``batch_v1.Job`` the client sent).

    Args:
        workdir: where the jobs' working directories and hosts files go.
        capacity: how many VMs (one task each) may run at once over all jobs; None (the
            default) is no limit. A job waits QUEUED until all its tasks fit; see
            :meth:`vms`.
        kill_grace_s: seconds a task's processes get between SIGTERM and SIGKILL when
            its job is cancelled or deleted.
    """

    def __init__(self, workdir: str, capacity: Optional[int] = None, kill_grace_s: float = 10.0) -> None:
        self.workdir = workdir
        self.capacity = capacity
        self.kill_grace_s = kill_grace_s
        self.in_use = 0  # VMs held by admitted jobs
        self.jobs: Dict[str, _Job] = {}
        self.operations: Dict[str, Dict[str, Any]] = {}
        self.entries: List[Dict[str, Any]] = []
        self.created: List[Any] = []
        self.errors: List[str] = []  # the server's own mistakes (a job moved as Batch never moves one)
        self.requests: Dict[str, int] = {}  # requests served by method, and "throttled"
        self._throttle = 0
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # capacity freed, a job stopped
        self._insert = 0
        self._server: Any = None
        self._thread: Optional[threading.Thread] = None
        ops = _PARENT + r"/operations"
        self._routes: List[Tuple[str, re.Pattern, Callable[..., Any]]] = [
            ("POST", re.compile(_PARENT + r"/jobs$"), self.create_job),
            ("GET", re.compile(_PARENT + r"/jobs$"), self.list_jobs),
            ("GET", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+)$"), self.get_job),
            ("DELETE", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+)$"), self.delete_job),
            ("POST", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+):cancel$"), self.cancel_job),
            ("GET", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+)/taskGroups/(?P<group>[^/:]+)/tasks$"), self.list_tasks),
            ("GET", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+)/taskGroups/(?P<group>[^/:]+)/tasks/(?P<task>\d+)$"),
             self.get_task),
            ("GET", re.compile(ops + r"$"), self.list_operations),
            ("GET", re.compile(ops + r"/(?P<op>[^/:]+)$"), self.get_operation),
            ("POST", re.compile(r"^/v2/entries:list$"), self.list_entries),
        ]

    # -- server ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> "FakeGcp":
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log on stderr
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-gcp", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.lock:
            for rec in self.jobs.values():
                rec.stop.set()
                self._kill(rec)
            self.changed.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def set_capacity(self, capacity: Optional[int]) -> None:
        """How many VMs may run at once from now on (None: no limit); waiting jobs that now
        fit are admitted."""
        with self.lock:
            self.capacity = capacity
            self.changed.notify_all()

    @contextlib.contextmanager
    def vms(self, capacity: Optional[int]) -> Iterator["FakeGcp"]:
        """``with server.vms(0):`` the region has ``capacity`` VMs for the block (as when the
        project's quota is used up); the capacity before comes back after it."""
        before = self.capacity
        self.set_capacity(capacity)
        try:
            yield self
        finally:
            self.set_capacity(before)

    def throttle(self, n: int) -> None:
        """Answer the next ``n`` Batch requests 429 RESOURCE_EXHAUSTED."""
        with self.lock:
            self._throttle = n

    def _count_request(self, method: str) -> bool:
        """Count a request of ``method``; True when it is to be answered 429."""
        with self.lock:
            if self._throttle > 0 and method != "list_entries":
                self._throttle -= 1
                self.requests["throttled"] = self.requests.get("throttled", 0) + 1
                return True
            self.requests[method] = self.requests.get(method, 0) + 1
            return False

    def _wsgi(self, environ: Any, start_response: Any) -> Any:
        req = Request(environ)
        try:
            for method, pattern, fn in self._routes:
                m = pattern.match(req.path)
                if m and req.method == method:
                    if m.groupdict().get("project") == UNAUTHENTICATED_PROJECT:
                        raise ApiError(401, "UNAUTHENTICATED",
                                       "Request had invalid authentication credentials. Expected OAuth 2 access token")
                    if m.groupdict().get("project") == DENIED_PROJECT:
                        raise ApiError(403, "PERMISSION_DENIED",
                                       f"Permission 'batch.jobs.{fn.__name__}' denied on resource '{req.path}'")
                    if self._count_request(fn.__name__):
                        raise ApiError(429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Read requests' "
                                       "and limit 'Read requests per minute' of service 'batch.googleapis.com'")
                    body = fn(req, **m.groupdict())
                    resp = Response(body, content_type="application/json")
                    break
            else:
                raise ApiError(404, "NOT_FOUND", f"no such method: {req.method} {req.path}")
        except ApiError as e:
            resp = Response(json.dumps({"error": {"code": e.code, "message": e.message, "status": e.status}}),
                            status=e.code, content_type="application/json")
        return resp(environ, start_response)

    # -- Batch ---------------------------------------------------------------------------------
    def _rec(self, project: str, location: str, job: str) -> _Job:
        name = f"projects/{project}/locations/{location}/jobs/{job}"
        rec = self.jobs.get(name)
        if rec is None:
            raise ApiError(404, "NOT_FOUND", f"Job {name} not found")
        return rec

    def create_job(self, req: Request, project: str, location: str) -> str:
        if project == QUOTA_PROJECT:
            raise ApiError(429, "RESOURCE_EXHAUSTED",
                           "Quota 'CPUS' exceeded. Limit: 24.0 in region " + location)
        job_id = req.args.get("jobId", "")
        if not _JOB_ID.match(job_id):
            raise ApiError(400, "INVALID_ARGUMENT", f"job_id {job_id!r} does not match {_JOB_ID.pattern}")
        try:
            job = batch_v1.Job.from_json(req.get_data(as_text=True), ignore_unknown_fields=False)
        except Exception as e:  # noqa: BLE001 - the service answers 400
            raise ApiError(400, "INVALID_ARGUMENT", f"Invalid JSON payload: {e}") from None
        if len(job.task_groups) != 1:
            raise ApiError(400, "INVALID_ARGUMENT", "Only one TaskGroup is supported now")
        spec = job.task_groups[0].task_spec
        if not spec.runnables:
            raise ApiError(400, "INVALID_ARGUMENT", "task_spec.runnables is required")
        if not 0 <= spec.max_retry_count <= 10:
            raise ApiError(400, "INVALID_ARGUMENT", "max_retry_count must be in [0, 10]")
        if len(spec.lifecycle_policies) > 1:
            raise ApiError(400, "INVALID_ARGUMENT", "only one lifecycle policy is supported")
        return self._create(project, location, job_id, job)

    def add_queued(self, project: str, location: str, job_id: str, job: Any) -> str:
        """Store ``job`` (a ``batch_v1.Job`` as the client sends it) as ``jobs.create`` would,
        QUEUED for good (it never runs): the scale tests' setup of 1,000 waiting jobs without
        1,000 requests and threads. Returns its name."""
        self._create(project, location, job_id, batch_v1.Job(job), run=False)
        return f"projects/{project}/locations/{location}/jobs/{job_id}"

    def _create(self, project: str, location: str, job_id: str, job: Any, run: bool = True) -> str:
        name = f"projects/{project}/locations/{location}/jobs/{job_id}"
        with self.lock:
            if name in self.jobs:
                raise ApiError(409, "ALREADY_EXISTS", f"Job {name} already exists")
            self.created.append(batch_v1.Job(job))
            job.name = name
            job.uid = f"{job_id[:40]}-{uuid.uuid4().hex[:8]}"
            now = _now()
            job.create_time = now
            job.update_time = now
            job.task_groups[0].name = f"{name}/taskGroups/group0"
            job.status = batch_v1.JobStatus(state=JobState.QUEUED)  # Batch writes no event for QUEUED
            rec = _Job(job, tempfile.mkdtemp(prefix=job_id[:20] + "-", dir=self.workdir))
            self._count(rec)
            self.jobs[name] = rec
            if run:
                rec.runner = threading.Thread(target=self._run_job, args=(rec,), name=f"job-{job_id}", daemon=True)
                rec.runner.start()
            return _to_json(job)

    def get_job(self, req: Request, project: str, location: str, job: str) -> str:
        with self.lock:
            return _to_json(self._rec(project, location, job).job)

    def list_jobs(self, req: Request, project: str, location: str) -> str:
        """A page of the location's jobs in creation order: ``pageSize`` of them (Batch v1
        documents neither a default nor a maximum; here :data:`LIST_PAGE_SIZE` and
        :data:`LIST_MAX_PAGE_SIZE`, coerced as AIP-158 says), ``pageToken`` the
        ``nextPageToken`` of the page before; only the fields an ``X-Goog-FieldMask`` header
        names (a system parameter of every Google API, https://cloud.google.com/apis/docs/system-parameters)."""
        prefix = f"projects/{project}/locations/{location}/jobs/"
        with self.lock:
            return _page(req, batch_v1.ListJobsResponse, "jobs",
                         [batch_v1.Job.pb(r.job) for n, r in self.jobs.items() if n.startswith(prefix)])

    def delete_job(self, req: Request, project: str, location: str, job: str) -> str:
        """DELETION_IN_PROGRESS at once (a running job's tasks are stopped); the job is gone
        and the operation done once its processes have exited."""
        with self.lock:
            rec = self._rec(project, location, job)
            op = self._operation(rec, "delete", "google.protobuf.Empty")
            if not rec.deleting:
                rec.deleting = True
                self._set_job_state(rec, JobState.DELETION_IN_PROGRESS)
                rec.stop.set()
                self._kill(rec)
                self.changed.notify_all()
                threading.Thread(target=self._forget, args=(rec,), name=f"delete-{job}", daemon=True).start()
            return json.dumps(op)

    def _forget(self, rec: _Job) -> None:
        """Once the job's runner has ended (its processes exited, its VMs given back): the
        job is gone and its operations are done."""
        assert rec.runner is not None
        rec.runner.join()
        with self.lock:
            self.jobs.pop(rec.job.name, None)
            self._finish_ops(rec)

    def cancel_job(self, req: Request, project: str, location: str, job: str) -> str:
        """CANCELLATION_IN_PROGRESS at once (the tasks are stopped); CANCELLED and the
        operation done once the job's processes have exited."""
        with self.lock:
            rec = self._rec(project, location, job)
            state = rec.job.status.state
            if state in (*_ENDED, JobState.DELETION_IN_PROGRESS):
                raise ApiError(400, "FAILED_PRECONDITION", f"Job {rec.job.name} in state {state.name} cannot be cancelled")
            op = self._operation(rec, "cancel", "google.cloud.batch.v1.CancelJobResponse")
            if state != JobState.CANCELLATION_IN_PROGRESS:
                self._set_job_state(rec, JobState.CANCELLATION_IN_PROGRESS)
                rec.stop.set()
                self._kill(rec)
                self.changed.notify_all()
            return json.dumps(op)

    def list_tasks(self, req: Request, project: str, location: str, job: str, group: str) -> str:
        """A page of the task group's tasks in index order; ``filter`` is empty (every task)
        or ``State=<TaskStatus.State>`` (the only form Batch documents: "Filter string
        should be of the format State=TaskStatus.State e.g. State=RUNNING"); another is
        400 INVALID_ARGUMENT."""
        flt = req.args.get("filter") or ""
        state = None
        if flt:
            m = re.fullmatch(r"State=([A-Z_]+)", flt)
            if m is None or m.group(1) not in TaskState.__members__ or m.group(1) == "STATE_UNSPECIFIED":
                raise ApiError(400, "INVALID_ARGUMENT", f"invalid filter {flt!r}: the format is State=TaskStatus.State")
            state = m.group(1)
        with self.lock:
            rec = self._rec(project, location, job)
            if group != "group0":
                raise ApiError(404, "NOT_FOUND", f"task group {group} not found")
            return _page(req, batch_v1.ListTasksResponse, "tasks",
                         [batch_v1.Task.pb(t) for t in rec.tasks if state is None or t.status.state.name == state])

    def get_task(self, req: Request, project: str, location: str, job: str, group: str, task: str) -> str:
        with self.lock:
            rec = self._rec(project, location, job)
            if group != "group0" or int(task) >= len(rec.tasks):
                raise ApiError(404, "NOT_FOUND", f"task {task} not found")
            return _to_json(rec.tasks[int(task)])

    # -- long-running operations (google.longrunning.Operation, metadata OperationMetadata) ----
    def _operation(self, rec: _Job, verb: str, response_type: str) -> Dict[str, Any]:
        """A new operation on ``rec`` (not done: :meth:`_finish_ops` ends it), as JSON."""
        parent = rec.job.name.rsplit("/jobs/", 1)[0]
        op = {
            "name": f"{parent}/operations/operation-{time.time_ns() // 1_000_000}-{uuid.uuid4().hex[:12]}",
            "metadata": {"@type": "type.googleapis.com/google.cloud.batch.v1.OperationMetadata", "createTime": _now(),
                         "target": rec.job.name, "verb": verb, "apiVersion": "v1"},
            "done": False,
            "_response": {"@type": f"type.googleapis.com/{response_type}"},
        }
        self.operations[op["name"]] = op
        rec.ops.append(op["name"])
        return _public(op)

    def _finish_ops(self, rec: _Job) -> None:
        for name in rec.ops:
            op = self.operations[name]
            op["metadata"]["endTime"] = _now()
            op["response"] = op["_response"]
            op["done"] = True
        rec.ops = []

    def get_operation(self, req: Request, project: str, location: str, op: str) -> str:
        name = f"projects/{project}/locations/{location}/operations/{op}"
        with self.lock:
            if name not in self.operations:
                raise ApiError(404, "NOT_FOUND", f"Operation {name} not found")
            return json.dumps(_public(self.operations[name]))

    def list_operations(self, req: Request, project: str, location: str) -> str:
        prefix = f"projects/{project}/locations/{location}/operations/"
        with self.lock:
            ops = [_public(op) for name, op in self.operations.items() if name.startswith(prefix)]
        return json.dumps({"operations": ops})

    # -- running jobs --------------------------------------------------------------------------
    # Every move is made by an event: a job is QUEUED until its VMs are free (capacity), then
    # SCHEDULED with its tasks ASSIGNED; a task is RUNNING once its first runnable's process
    # has started, and the job RUNNING with its first task; a task ends when its process
    # exits, the job when its last task has ended (or, cancelled, when its processes have).
    @staticmethod
    def _event(msg: Any, description: str, **kw: Any) -> None:
        msg.status.status_events.append(
            batch_v1.StatusEvent(type_="STATUS_CHANGED", description=description, event_time=_now(), **kw))

    def _count(self, rec: _Job) -> None:
        """``status.taskGroups``: the tasks in each state, and the VMs the group asked for."""
        counts: Dict[str, int] = {}
        for t in rec.tasks:
            counts[t.status.state.name] = counts.get(t.status.state.name, 0) + 1
        policy = rec.job.allocation_policy.instances[0].policy if rec.job.allocation_policy.instances else None
        instances = []
        if policy is not None and rec.vms:
            instances.append(batch_v1.JobStatus.InstanceStatus(
                machine_type=policy.machine_type, provisioning_model=policy.provisioning_model,
                task_pack=rec.job.task_groups[0].task_count_per_node or 1))
        rec.job.status.task_groups = {"group0": batch_v1.JobStatus.TaskGroupStatus(counts=counts, instances=instances)}

    def _set_job_state(self, rec: _Job, state: Any, why: str = "") -> None:
        old = rec.job.status.state
        if state not in (JobState.CANCELLATION_IN_PROGRESS, JobState.DELETION_IN_PROGRESS) and (
                state not in _NEXT.get(old, ())):
            self.errors.append(f"{rec.job.name} moved from {old.name} to {state.name}, which Batch never does")
        rec.job.status.state = state
        rec.job.update_time = _now()
        if state == JobState.RUNNING:
            rec.running_since = time.monotonic()
        if state in _ENDED and rec.running_since is not None:
            rec.job.status.run_duration = dt.timedelta(seconds=time.monotonic() - rec.running_since)
        self._event(rec.job, f"Job state is set from {old.name} to {state.name} for job {rec.job.name}.{why}")
        self._count(rec)

    def _set_task(self, rec: _Job, i: int, state: Any, why: str = "", exit_code: Optional[int] = None,
                  count: bool = True) -> None:
        task = rec.tasks[i]
        old = task.status.state
        task.status.state = state
        kw: Dict[str, Any] = {"task_state": state}
        if exit_code is not None:
            kw["task_execution"] = batch_v1.TaskExecution(exit_code=exit_code)
        text = f"Task state is updated from {old.name} to {state.name} on zones/local-a/instances/vm-{i}"
        if exit_code is not None:
            text += f" with exit code {exit_code}"
        self._event(task, f"{text}.{(' ' + why) if why else ''}", **kw)
        if count:  # (a caller that moves many tasks counts once: a sweep's job has thousands)
            self._count(rec)

    # -- Cloud Logging -----------------------------------------------------------------------------
    def list_entries(self, req: Request) -> str:
        body = json.loads(req.get_data(as_text=True) or "{}")
        for rn in body.get("resourceNames", []):
            if rn == f"projects/{DENIED_PROJECT}":
                raise ApiError(403, "PERMISSION_DENIED", "Permission 'logging.logEntries.list' denied")
        projects = {rn.split("/", 1)[1] for rn in body.get("resourceNames", []) if rn.startswith("projects/")}
        if not projects:
            raise ApiError(400, "INVALID_ARGUMENT", "resourceNames is required")
        clauses = _parse_filter(body.get("filter", ""))
        with self.lock:
            rows = [e for e in self.entries if e["logName"].split("/")[1] in projects and all(c(e) for c in clauses)]
        rows.sort(key=lambda e: (_ns(e["timestamp"]), e["insertId"]), reverse="desc" in body.get("orderBy", "").lower())
        start = int(body.get("pageToken") or 0)
        size = int(body.get("pageSize") or 1000)
        out: Dict[str, Any] = {"entries": rows[start:start + size]}
        if start + size < len(rows):
            out["nextPageToken"] = str(start + size)
        return json.dumps(out)
