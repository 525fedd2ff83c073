"""fake_gcp's VMs: how a job's tasks really run (local subprocesses, in order, at most
``parallelism`` at once, retried by the job's policies), Spot preemption, and their logs
(:class:`TaskRunner`, a part of :class:`fake_gcp.FakeGcp`). Kept apart from :mod:`fake_gcp`
so that each reads in one sitting."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import Any, Dict, List, Optional

from google.cloud import batch_v1
from typing import TYPE_CHECKING

from fake_gcp_wire import (  # noqa: F401 - the tests import some of them from here
    JobState, PREEMPTED_EXIT_CODE, TaskState, _now, _signal,
)

if TYPE_CHECKING:
    from fake_gcp import _Job


class TaskRunner:
    """The part of :class:`fake_gcp.FakeGcp` that runs tasks (see its docstring)."""

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
