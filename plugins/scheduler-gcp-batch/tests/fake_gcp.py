"""A local stand-in for the Google Cloud Batch v1 and Cloud Logging v2 REST APIs, for tests.

No Batch emulator exists, so the tests run the official client libraries against this
server. It implements the calls ``gcp_batch`` makes, over HTTP/JSON as the REST transports
send them, and parses every request body into the library's own proto messages (unknown
fields are an error), so a request the real service would not parse fails here too:

* Batch (https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs):
  ``jobs.create`` (``?jobId=``), ``jobs.get``, ``jobs.list``, ``jobs.delete``,
  ``jobs.cancel``, ``jobs.taskGroups.tasks.list`` / ``get``. As Batch documents, a job
  has exactly one task group; the job goes QUEUED -> SCHEDULED -> RUNNING -> SUCCEEDED or
  FAILED (CANCELLATION_IN_PROGRESS -> CANCELLED on cancel, DELETION_IN_PROGRESS then gone
  on delete) and each task PENDING -> ASSIGNED -> RUNNING -> SUCCEEDED or FAILED, with
  status events, exit codes and retries (``max_retry_count``, lifecycle policies).
* Tasks really run: each task runs its runnables in order as local subprocesses (a
  container runnable runs ``entrypoint + commands`` on this host; the image is not
  pulled), with ``BATCH_TASK_INDEX``, ``BATCH_TASK_COUNT``, ``BATCH_HOSTS_FILE``,
  ``BATCH_MAIN_NODE_HOSTNAME``, ``BATCH_TASK_RETRY_ATTEMPT`` and the task's environment.
* Cloud Logging (https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list):
  ``entries:list`` of the ``batch_task_logs`` entries the tasks wrote (one entry per line,
  stdout with severity INFO, stderr ERROR; labels ``job_uid`` and ``task_id``), with the
  filter operators the scheduler uses (``=``, ``:``, ``<``, ``<=``, ``>``, ``>=`` on
  ``logName``, ``labels.*``, ``timestamp``, ``severity``, joined by ``AND``), ordering and
  paging.

Spot preemption: :meth:`FakeGcp.preempt` reclaims a running task's VM (exit code 50001).
Failure injection, by project name: ``denied-project`` answers 403 PERMISSION_DENIED to
everything; ``unauthenticated-project`` 401 UNAUTHENTICATED (expired or revoked
credentials); ``quota-project`` answers 429 RESOURCE_EXHAUSTED to ``jobs.create``.
"""
from __future__ import annotations

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
from typing import Any, Callable, Dict, List, Optional, Tuple

from google.cloud import batch_v1
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
        self.cancelled = threading.Event()
        self.deleted = False
        self.preempted: set = set()


class FakeGcp:
    """The server: ``start()`` it, point ``CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH`` and
    ``..._LOGGING`` at :attr:`url`, ``stop()`` it. ``created`` holds every job body that
    ``jobs.create`` accepted (as the ``batch_v1.Job`` the client sent)."""

    def __init__(self, workdir: str, step_s: float = 0.2) -> None:
        self.workdir = workdir
        self.step_s = step_s
        self.jobs: Dict[str, _Job] = {}
        self.entries: List[Dict[str, Any]] = []
        self.created: List[Any] = []
        self.lock = threading.RLock()
        self._insert = 0
        self._server: Any = None
        self._thread: Optional[threading.Thread] = None
        self._routes: List[Tuple[str, re.Pattern, Callable[..., Any]]] = [
            ("POST", re.compile(_PARENT + r"/jobs$"), self.create_job),
            ("GET", re.compile(_PARENT + r"/jobs$"), self.list_jobs),
            ("GET", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+)$"), self.get_job),
            ("DELETE", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+)$"), self.delete_job),
            ("POST", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+):cancel$"), self.cancel_job),
            ("GET", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+)/taskGroups/(?P<group>[^/:]+)/tasks$"), self.list_tasks),
            ("GET", re.compile(_PARENT + r"/jobs/(?P<job>[^/:]+)/taskGroups/(?P<group>[^/:]+)/tasks/(?P<task>\d+)$"),
             self.get_task),
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
                rec.cancelled.set()
                self._kill(rec)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

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
        if rec is None or rec.deleted:
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
        name = f"projects/{project}/locations/{location}/jobs/{job_id}"
        with self.lock:
            if name in self.jobs and not self.jobs[name].deleted:
                raise ApiError(409, "ALREADY_EXISTS", f"Job {name} already exists")
            self.created.append(batch_v1.Job(job))
            job.name = name
            job.uid = f"{job_id[:40]}-{uuid.uuid4().hex[:8]}"
            now = _now()
            job.create_time = now
            job.update_time = now
            job.task_groups[0].name = f"{name}/taskGroups/group0"
            job.status = batch_v1.JobStatus(state=JobState.QUEUED)
            self._event(job, "Job state is set from STATE_UNSPECIFIED to QUEUED for job " + name + ".")
            rec = _Job(job, tempfile.mkdtemp(prefix=job_id[:20] + "-", dir=self.workdir))
            self.jobs[name] = rec
        threading.Thread(target=self._run_job, args=(rec,), name=f"job-{job_id}", daemon=True).start()
        return _to_json(job)

    def get_job(self, req: Request, project: str, location: str, job: str) -> str:
        with self.lock:
            return _to_json(self._rec(project, location, job).job)

    def list_jobs(self, req: Request, project: str, location: str) -> str:
        prefix = f"projects/{project}/locations/{location}/jobs/"
        with self.lock:
            jobs = [json.loads(_to_json(r.job)) for n, r in self.jobs.items() if n.startswith(prefix) and not r.deleted]
        return json.dumps({"jobs": jobs})

    def delete_job(self, req: Request, project: str, location: str, job: str) -> str:
        with self.lock:
            rec = self._rec(project, location, job)
            self._set_job_state(rec, JobState.DELETION_IN_PROGRESS, "Job is being deleted.")
            rec.cancelled.set()
            self._kill(rec)
        threading.Timer(self.step_s, self._forget, args=(rec,)).start()
        return self._operation(project, location, "google.protobuf.Empty", done=False)

    def _forget(self, rec: _Job) -> None:
        with self.lock:
            rec.deleted = True

    def cancel_job(self, req: Request, project: str, location: str, job: str) -> str:
        with self.lock:
            rec = self._rec(project, location, job)
            state = rec.job.status.state
            if state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.DELETION_IN_PROGRESS):
                raise ApiError(400, "FAILED_PRECONDITION", f"Job {rec.job.name} in state {state.name} cannot be cancelled")
            if state != JobState.CANCELLATION_IN_PROGRESS:
                self._set_job_state(rec, JobState.CANCELLATION_IN_PROGRESS, "Job cancellation requested.")
                rec.cancelled.set()
                self._kill(rec)
        return self._operation(project, location, "google.cloud.batch.v1.CancelJobResponse", done=False)

    def list_tasks(self, req: Request, project: str, location: str, job: str, group: str) -> str:
        with self.lock:
            rec = self._rec(project, location, job)
            if group != "group0":
                raise ApiError(404, "NOT_FOUND", f"task group {group} not found")
            return json.dumps({"tasks": [json.loads(_to_json(t)) for t in rec.tasks]})

    def get_task(self, req: Request, project: str, location: str, job: str, group: str, task: str) -> str:
        with self.lock:
            rec = self._rec(project, location, job)
            if group != "group0" or int(task) >= len(rec.tasks):
                raise ApiError(404, "NOT_FOUND", f"task {task} not found")
            return _to_json(rec.tasks[int(task)])

    @staticmethod
    def _operation(project: str, location: str, response_type: str, done: bool) -> str:
        op: Dict[str, Any] = {"name": f"projects/{project}/locations/{location}/operations/op-{uuid.uuid4().hex[:12]}",
                              "done": done}
        if done:
            op["response"] = {"@type": f"type.googleapis.com/{response_type}"}
        return json.dumps(op)

    # -- running jobs --------------------------------------------------------------------------
    @staticmethod
    def _event(msg: Any, description: str, **kw: Any) -> None:
        msg.status.status_events.append(batch_v1.StatusEvent(description=description, event_time=_now(), **kw))

    def _set_job_state(self, rec: _Job, state: Any, why: str) -> None:
        old = rec.job.status.state
        rec.job.status.state = state
        rec.job.update_time = _now()
        self._event(rec.job, f"Job state is set from {old.name} to {state.name} for job {rec.job.name}. {why}".strip(),
                    type_="STATUS_CHANGED")
        counts: Dict[str, int] = {}
        for t in rec.tasks:
            counts[t.status.state.name] = counts.get(t.status.state.name, 0) + 1
        rec.job.status.task_groups = {"group0": batch_v1.JobStatus.TaskGroupStatus(counts=counts)}

    def _set_task(self, rec: _Job, i: int, state: Any, why: str = "", exit_code: Optional[int] = None) -> None:
        task = rec.tasks[i]
        old = task.status.state
        task.status.state = state
        kw: Dict[str, Any] = {"task_state": state, "type_": "STATUS_CHANGED"}
        if exit_code is not None:
            kw["task_execution"] = batch_v1.TaskExecution(exit_code=exit_code)
        text = f"Task state is updated from {old.name} to {state.name} on zones/local-a/instances/vm-{i}"
        if exit_code is not None:
            text += f" with exit code {exit_code}"
        self._event(task, f"{text}.{(' ' + why) if why else ''}", **kw)

    def _run_job(self, rec: _Job) -> None:
        time.sleep(self.step_s)
        with self.lock:
            if rec.cancelled.is_set():
                return self._finish_cancel(rec)
            self._set_job_state(rec, JobState.SCHEDULED, "VMs are being provisioned.")
        time.sleep(self.step_s)
        with self.lock:
            if rec.cancelled.is_set():
                return self._finish_cancel(rec)
            for i in range(len(rec.tasks)):
                self._set_task(rec, i, TaskState.ASSIGNED)
            self._set_job_state(rec, JobState.RUNNING, "")
        hosts = os.path.join(rec.workdir, "hosts")
        with open(hosts, "w") as f:
            f.write("".join("127.0.0.1\n" for _ in rec.tasks))
        threads = [threading.Thread(target=self._run_task, args=(rec, i, hosts), daemon=True) for i in range(len(rec.tasks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self.lock:
            if rec.cancelled.is_set():
                return self._finish_cancel(rec)
            failed = [i for i, t in enumerate(rec.tasks) if t.status.state == TaskState.FAILED]
            if failed:
                last = rec.tasks[failed[0]].status.status_events[-1].description
                self._set_job_state(rec, JobState.FAILED,
                                    f"Job failed due to task failure. Specifically, task with index {failed[0]} "
                                    f"failed due to the following task event: \"{last}\"")
            else:
                self._set_job_state(rec, JobState.SUCCEEDED, "")

    def _finish_cancel(self, rec: _Job) -> None:
        if rec.job.status.state == JobState.CANCELLATION_IN_PROGRESS:
            time.sleep(self.step_s / 2)
            self._set_job_state(rec, JobState.CANCELLED, "")

    def _run_task(self, rec: _Job, i: int, hosts: str) -> None:
        group = rec.job.task_groups[0]
        spec = group.task_spec
        policy = spec.lifecycle_policies[0] if spec.lifecycle_policies else None
        attempt = 0
        while True:
            with self.lock:
                if rec.cancelled.is_set():
                    return
                self._set_task(rec, i, TaskState.RUNNING)
            code = self._run_runnables(rec, i, attempt, hosts)
            with self.lock:
                if rec.cancelled.is_set():
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
            if rec.cancelled.is_set():
                return 143
            if "container" in runnable:
                c = runnable.container
                argv = ([c.entrypoint] if c.entrypoint else []) + list(c.commands)
            elif "script" in runnable:
                argv = ["/bin/sh", "-c", runnable.script.text]
            else:
                continue
            code = self._exec(rec, i, attempt, argv, {**env, **runnable.environment.variables})
            if code == PREEMPTED_EXIT_CODE:
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
                rec.preempted.discard(i)
                return PREEMPTED_EXIT_CODE
        return code if code >= 0 else 128 - code

    def preempt(self, job_name: str, index: int) -> None:
        """Reclaim the Spot VM of task ``index``: its process is killed and the task ends
        with Batch's reserved exit code 50001, as when Compute Engine preempts a Spot VM."""
        with self.lock:
            rec = self.jobs[job_name]
            proc = rec.procs.get(index)
            if proc is None:
                raise RuntimeError(f"task {index} of {job_name} is not running")
            rec.preempted.add(index)
            os.killpg(proc.pid, signal.SIGKILL)

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
        for proc in list(rec.procs.values()):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass

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
