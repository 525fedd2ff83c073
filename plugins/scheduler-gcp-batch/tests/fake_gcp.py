"""A local stand-in for the Google Cloud Batch v1 and Cloud Logging v2 REST APIs, for tests.

No Batch emulator exists, so the tests run the official client libraries against this
server. It implements the calls ``gcp_batch`` makes, over HTTP/JSON as the REST transports
send them, and parses every request body into the library's own proto messages (unknown
fields are an error), so a request the real service would not parse fails here too:

* Batch (https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs):
  ``jobs.create`` (``?jobId=``), ``jobs.get``, ``jobs.list``, ``jobs.delete``,
  ``jobs.cancel``, ``jobs.taskGroups.tasks.list`` / ``get``, ``operations.get`` /
  ``list``; ``jobs.list`` and ``tasks.list`` page (``pageSize``, ``nextPageToken``) and honour the
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
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from google.cloud import batch_v1
from google.protobuf import json_format
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

PREEMPTED_EXIT_CODE = 50001  # https://cloud.google.com/batch/docs/troubleshooting#reserved-exit-codes
DENIED_PROJECT = "denied-project"
UNAUTHENTICATED_PROJECT = "unauthenticated-project"
QUOTA_PROJECT = "quota-project"
_JOB_ID = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
_PARENT = r"/v1/projects/(?P<project>[^/:]+)/locations/(?P<location>[^/:]+)"
_SEVERITY = {"DEFAULT": 0, "DEBUG": 100, "INFO": 200, "NOTICE": 300, "WARNING": 400, "ERROR": 500,
             "CRITICAL": 600, "ALERT": 700, "EMERGENCY": 800}
JobState = batch_v1.JobStatus.State
TaskState = batch_v1.TaskStatus.State
LIST_PAGE_SIZE = 100  # jobs.list and tasks.list without pageSize (Batch v1 documents no default)
LIST_MAX_PAGE_SIZE = 1000  # a larger pageSize is coerced to this (AIP-158; Batch v1 documents no maximum)


class ApiError(Exception):
    def __init__(self, code: int, status: str, message: str) -> None:
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


def _now() -> str:
    t = time.time_ns()
    return dt.datetime.fromtimestamp(t // 1_000_000_000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{t % 1_000_000_000:09d}Z"


def _ns(ts: str) -> int:
    """RFC 3339 text -> nanoseconds since the epoch (any number of fraction digits)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", ts)
    if not m:
        raise ApiError(400, "INVALID_ARGUMENT", f"bad timestamp {ts!r}")
    base = dt.datetime.strptime(m.group(1) + (m.group(3) if m.group(3) != "Z" else "+00:00"), "%Y-%m-%dT%H:%M:%S%z")
    frac = (m.group(2) or "0")[:9].ljust(9, "0")
    return int(base.timestamp()) * 1_000_000_000 + int(frac)


def _to_json(msg: Any) -> str:
    return type(msg).to_json(msg, use_integers_for_enums=False)


def _page(req: Request, resp_type: Any, field: str, items: List[Any]) -> str:
    """A list method's answer as JSON: page ``pageToken`` (an offset) of ``pageSize`` of
    ``items`` (raw protobuf messages) in ``resp_type``'s ``field``, ``nextPageToken`` where
    more follow, only the fields of the ``X-Goog-FieldMask`` header (all without one)."""
    try:
        size = int(req.args.get("pageSize") or 0)
        start = int(req.args.get("pageToken") or 0)
    except ValueError:
        raise ApiError(400, "INVALID_ARGUMENT", "invalid page_size or page_token") from None
    if size < 0 or start < 0:
        raise ApiError(400, "INVALID_ARGUMENT", "page_size and page_token must not be negative")
    size = min(size or LIST_PAGE_SIZE, LIST_MAX_PAGE_SIZE)
    pb = resp_type.pb()
    mask = _mask_tree(req.headers.get("X-Goog-FieldMask", ""), pb.DESCRIPTOR)
    full = pb(**{field: items[start:start + size]})
    if start + size < len(items):
        full.next_page_token = str(start + size)
    resp = full
    if mask is not None:
        resp = pb()
        _masked(full, mask, resp)
    return json_format.MessageToJson(resp, indent=None)


def _mask_tree(header: str, desc: Any) -> Optional[Dict[str, Any]]:
    """An ``X-Goog-FieldMask`` value (comma-separated paths of JSON field names, such as
    ``jobs.name,nextPageToken``; a path through a repeated field applies to each element)
    as a tree of field names {name: subtree}, {} for a whole field; None when empty (every
    field). An unknown field is a 400, as the service answers."""
    paths = [p.strip() for p in header.split(",") if p.strip()]
    if not paths:
        return None
    tree: Dict[str, Any] = {}
    for path in paths:
        node, d = tree, desc
        for part in path.split("."):
            field = None if d is None else d.fields_by_camelcase_name.get(part) or d.fields_by_name.get(part)
            if field is None:
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid field mask path {path!r}")
            node = node.setdefault(field.name, {})
            d = field.message_type if not (field.message_type and field.message_type.GetOptions().map_entry) else None
    return tree


def _masked(src: Any, tree: Dict[str, Any], dst: Any) -> None:
    """Copies into protobuf message ``dst`` the fields of ``src`` that ``tree``
    (:func:`_mask_tree`) names."""
    for name, sub in tree.items():
        field = src.DESCRIPTOR.fields_by_name[name]
        value = getattr(src, name)
        if field.is_repeated:  # lists and maps
            if sub:
                for item in value:
                    _masked(item, sub, getattr(dst, name).add())
            else:
                getattr(dst, name).MergeFrom(value)
        elif field.message_type is None:
            setattr(dst, name, value)
        elif src.HasField(name) and sub:
            _masked(value, sub, getattr(dst, name))
        elif src.HasField(name):
            getattr(dst, name).CopyFrom(value)


def _public(op: Dict[str, Any]) -> Dict[str, Any]:
    """An operation as the API shows it (without the server's own ``_`` keys)."""
    return {k: v for k, v in op.items() if not k.startswith("_")}


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


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


class FakeGcp:
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
        with self.lock:
            rec = self._rec(project, location, job)
            if group != "group0":
                raise ApiError(404, "NOT_FOUND", f"task group {group} not found")
            return _page(req, batch_v1.ListTasksResponse, "tasks", [batch_v1.Task.pb(t) for t in rec.tasks])

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

    def _fits(self, rec: _Job) -> bool:
        return self.capacity is None or self.in_use + len(rec.tasks) <= self.capacity

    def _run_job(self, rec: _Job) -> None:
        with self.lock:
            while not rec.stop.is_set() and not self._fits(rec):
                self.changed.wait()
            if rec.stop.is_set():
                return self._end(rec)
            rec.vms = len(rec.tasks)
            self.in_use += rec.vms
            for i in range(len(rec.tasks)):
                self._set_task(rec, i, TaskState.ASSIGNED, count=False)
            self._count(rec)
            self._set_job_state(rec, JobState.SCHEDULED)
        try:
            hosts = os.path.join(rec.workdir, "hosts")
            with open(hosts, "w") as f:
                f.write("".join("127.0.0.1\n" for _ in rec.tasks))
            # at most `parallelism` tasks run at once (TaskGroup.parallelism; 0: all), in index order
            group = rec.job.task_groups[0]
            slots = threading.BoundedSemaphore(group.parallelism or len(rec.tasks))

            def run(i: int) -> None:
                with slots:
                    self._run_task(rec, i, hosts)

            threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(rec.tasks))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            with self.lock:
                self.in_use -= rec.vms
                rec.vms = 0
                self.changed.notify_all()
                self._end(rec)

    def _end(self, rec: _Job) -> None:
        """The job's tasks have all ended (or never started): its final state (under the lock)."""
        for i, t in enumerate(rec.tasks):
            if t.status.state in (TaskState.PENDING, TaskState.ASSIGNED):
                self._set_task(rec, i, TaskState.UNEXECUTED, count=False)
        self._count(rec)
        if rec.deleting:
            return  # _forget ends it
        if rec.job.status.state == JobState.CANCELLATION_IN_PROGRESS:
            self._set_job_state(rec, JobState.CANCELLED)
            self._finish_ops(rec)
            return
        failed = [i for i, t in enumerate(rec.tasks) if t.status.state == TaskState.FAILED]
        if failed:
            last = rec.tasks[failed[0]].status.status_events[-1].description
            self._set_job_state(rec, JobState.FAILED,
                                f"Job failed due to task failure. Specifically, task with index {failed[0]} "
                                f"failed due to the following task event: \"{last}\"")
        else:
            self._set_job_state(rec, JobState.SUCCEEDED)

    def _started(self, rec: _Job, i: int) -> None:
        """Task ``i``'s attempt has started (its first process runs): the task is RUNNING, and
        the job too if it was not yet (under the lock)."""
        if i in rec.started:
            return
        rec.started.add(i)
        self._set_task(rec, i, TaskState.RUNNING)
        if rec.job.status.state == JobState.SCHEDULED:
            self._set_job_state(rec, JobState.RUNNING)

    def _run_task(self, rec: _Job, i: int, hosts: str) -> None:
        group = rec.job.task_groups[0]
        spec = group.task_spec
        policy = spec.lifecycle_policies[0] if spec.lifecycle_policies else None
        attempt = 0
        while True:
            if rec.stop.is_set():
                return
            code = self._run_runnables(rec, i, attempt, hosts)
            with self.lock:
                rec.started.discard(i)
                if rec.stop.is_set():
                    if rec.tasks[i].status.state == TaskState.RUNNING:
                        self._set_task(rec, i, TaskState.FAILED, "The job was cancelled.", exit_code=code)
                    return
                if code == 0:
                    self._set_task(rec, i, TaskState.SUCCEEDED, exit_code=0)
                    return
                retry = attempt < spec.max_retry_count
                if retry and policy is not None:
                    match = code in list(policy.action_condition.exit_codes)
                    retry = match if policy.action == batch_v1.LifecyclePolicy.Action.RETRY_TASK else not match
                if not retry:
                    self._set_task(rec, i, TaskState.FAILED, exit_code=code)
                    return
                attempt += 1
                self._set_task(rec, i, TaskState.FAILED, f"Retrying the task (retry {attempt} of {spec.max_retry_count}).",
                               exit_code=code)

    def _run_runnables(self, rec: _Job, i: int, attempt: int, hosts: str) -> int:
        group = rec.job.task_groups[0]
        spec = group.task_spec
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
        env.update({"BATCH_TASK_INDEX": str(i), "BATCH_TASK_COUNT": str(len(rec.tasks)),
                    "BATCH_TASK_RETRY_ATTEMPT": str(attempt), "BATCH_MAIN_NODE_HOSTNAME": "127.0.0.1",
                    "BATCH_JOB_UID": rec.job.uid})
        if group.require_hosts_file:
            env["BATCH_HOSTS_FILE"] = hosts
        env.update(spec.environment.variables)
        if i < len(group.task_environments):
            env.update(group.task_environments[i].variables)
        for runnable in spec.runnables:
            if rec.stop.is_set():
                return 143
            if "container" in runnable:
                c = runnable.container
                argv = ([c.entrypoint] if c.entrypoint else []) + list(c.commands)
            elif "script" in runnable:
                argv = ["/bin/sh", "-c", runnable.script.text]
            else:  # a barrier: nothing to run here (one VM per task, all at once)
                with self.lock:
                    self._started(rec, i)
                continue
            code = self._exec(rec, i, attempt, argv, {**env, **runnable.environment.variables})
            if code >= 50000:  # a reserved code: the VM was lost, whatever ignore_exit_status says
                return code
            if code != 0 and not runnable.ignore_exit_status:
                return code
        return 0

    def _exec(self, rec: _Job, i: int, attempt: int, argv: List[str], env: Dict[str, str]) -> int:
        try:
            proc = subprocess.Popen(argv, env=env, cwd=rec.workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            self._log(rec, i, attempt, f"cannot start {argv[0]}: {e}", "ERROR")
            return 127
        with self.lock:
            rec.procs[i] = proc
            if rec.stop.is_set():  # cancelled while it started: _kill did not see it
                self._kill(rec)
            else:
                self._started(rec, i)
        readers = [threading.Thread(target=self._pump, args=(rec, i, attempt, pipe, sev), daemon=True)
                   for pipe, sev in ((proc.stdout, "INFO"), (proc.stderr, "ERROR"))]
        for t in readers:
            t.start()
        code = proc.wait()
        for t in readers:
            t.join()
        with self.lock:
            rec.procs.pop(i, None)
            if i in rec.preempted:
                return rec.preempted.pop(i)
        return code if code >= 0 else 128 - code

    def preempt(self, job_name: str, index: int, exit_code: int = PREEMPTED_EXIT_CODE,
                notice_s: Optional[float] = None) -> None:
        """Reclaim the Spot VM of task ``index``: its process is killed and the task ends
        with Batch's reserved exit code 50001, as when Compute Engine preempts a Spot VM;
        ``exit_code`` another reserved code ends it as that loss of its VM does (50002: Batch
        no longer hears from the VM, 50003: the VM rebooted, 50006: the VM was recreated;
        https://cloud.google.com/batch/docs/troubleshooting#reserved-exit-codes).
        ``notice_s``: Compute Engine's preemption notice
        (https://cloud.google.com/compute/docs/instances/spot#preemption-process: ACPI G2
        soft off, the guest shuts down and its processes get SIGTERM; 30 s later, G3, the
        power is cut): SIGTERM to the task's process group now, SIGKILL ``notice_s`` later
        if it is still there; the task ends 50001 however its process ended. None: the VM
        is gone at once (SIGKILL), as a VM lost without notice."""
        with self.lock:
            rec = self.jobs[job_name]
            proc = rec.procs.get(index)
            if proc is None:
                raise RuntimeError(f"task {index} of {job_name} is not running")
            rec.preempted[index] = exit_code
            if notice_s is None:
                os.killpg(proc.pid, signal.SIGKILL)
                return
            _signal(proc.pid, signal.SIGTERM)
        timer = threading.Timer(notice_s, lambda: proc.poll() is None and _signal(proc.pid, signal.SIGKILL))
        timer.daemon = True
        timer.start()

    def _pump(self, rec: _Job, i: int, attempt: int, pipe: Any, severity: str) -> None:
        for raw in iter(pipe.readline, b""):
            self._log(rec, i, attempt, raw.decode("utf-8", "replace").rstrip("\n"), severity)
        pipe.close()

    def _log(self, rec: _Job, i: int, attempt: int, text: str, severity: str) -> None:
        project = rec.job.name.split("/")[1]
        with self.lock:
            self._insert += 1
            self.entries.append({
                "logName": f"projects/{project}/logs/batch_task_logs",
                "resource": {"type": "generic_task", "labels": {"project_id": project, "job": rec.job.uid}},
                "labels": {"job_uid": rec.job.uid, "task_id": f"task/{rec.job.uid}-group0-{i}/{attempt}/0",
                           "hostname": f"vm-{i}"},
                "severity": severity,
                "textPayload": text,
                "timestamp": _now(),
                "insertId": f"{self._insert:012d}",
            })

    def _kill(self, rec: _Job) -> None:
        """SIGTERM to the running tasks' process groups, SIGKILL ``kill_grace_s`` later to
        what is left (as Batch stops a cancelled or deleted job's VMs)."""
        for proc in list(rec.procs.values()):
            _signal(proc.pid, signal.SIGTERM)
            timer = threading.Timer(self.kill_grace_s, _signal, args=(proc.pid, signal.SIGKILL))
            timer.daemon = True
            timer.start()

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


_CLAUSE = re.compile(r'^\s*(?P<field>[A-Za-z_][\w.]*)\s*(?P<op>>=|<=|!=|=|:|<|>)\s*(?P<value>"(?:[^"\\]|\\.)*"|\S+)\s*$')


def _parse_filter(text: str) -> List[Callable[[Dict[str, Any]], bool]]:
    """The subset of the Logging query language the scheduler uses: clauses joined by AND."""
    out: List[Callable[[Dict[str, Any]], bool]] = []
    for part in [p for p in re.split(r"\s+AND\s+", text.strip()) if p]:
        m = _CLAUSE.match(part)
        if not m:
            raise ApiError(400, "INVALID_ARGUMENT", f"unsupported filter clause: {part!r}")
        field, op, value = m.group("field"), m.group("op"), m.group("value")
        if value.startswith('"'):
            value = json.loads(value)
        out.append(_clause(field, op, value))
    return out


def _clause(field: str, op: str, value: str) -> Callable[[Dict[str, Any]], bool]:
    def get(e: Dict[str, Any]) -> Any:
        cur: Any = e
        for part in field.split("."):
            key = {"logName": "logName"}.get(part, part)
            cur = cur.get(key) if isinstance(cur, dict) else None
        return cur

    if field == "timestamp":
        want = _ns(value)
        key: Callable[[Any], Any] = _ns
    elif field == "severity":
        if value not in _SEVERITY:
            raise ApiError(400, "INVALID_ARGUMENT", f"unknown severity {value!r}")
        want = _SEVERITY[value]
        key = lambda v: _SEVERITY.get(v or "DEFAULT", 0)  # noqa: E731
    else:
        want = value
        key = lambda v: v  # noqa: E731
    ops: Dict[str, Callable[[Any, Any], bool]] = {
        "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, ":": lambda a, b: str(b) in str(a),
    }
    cmp = ops[op]

    def check(e: Dict[str, Any]) -> bool:
        got = get(e)
        if got is None:
            return op == "!="
        return cmp(key(got), want)

    return check
