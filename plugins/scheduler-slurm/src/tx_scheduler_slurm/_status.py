"""Turning Slurm's job records and the replicas' exit-code files into a DescribeAppResponse.

Slurm records one state and one exit code per het job component, and in a tx job every
component shares the batch script's outcome (``NonZeroExitCode`` for all when one replica
fails). Which replica failed, and with what status, comes from the ``.exitcode`` file each
replica's launcher writes (see :mod:`tx_scheduler_slurm.request`); a file written in an
earlier attempt of a requeued job is ignored. Why it failed: the root cause its stderr names
(a torchrun worker's exception, :mod:`tx.schedulers.why`), read from the end of its ``.err``
file, else its status and last stderr line.
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Tuple

import attrs

from tx.schedulers import (
    DescribeAppResponse, first_cause, names_cause, read_tail, root_cause, signal_text, telling_line)
from tx.specs import (
    MISSING, NONE, NULL_RESOURCE, AppState, ReplicaStatus, Resource, Role, RoleStatus, RootCause, is_terminal)

from tx_scheduler_slurm._parse import JobRecord, split_job_name
from tx_scheduler_slurm._states import appstate_from_slurm
from tx_scheduler_slurm.request import log_file

#: bytes and lines of a failed replica's stderr kept as its structured error message
ERROR_TAIL_BYTES = 4096
ERROR_TAIL_LINES = 20


def read_exit_code(
    work_dir: str, app_id: str, role: str, replica_id: int, restarts: int
) -> Tuple[Optional[int], float, bool]:
    """The exit status recorded for the replica in its current attempt, when (the file's
    mtime, seconds since the epoch) and whether it is the replica's own failure
    (False: marked ``slurm``, terminated by Slurm: 143 or 137, see
    :meth:`tx_scheduler_slurm.request.SlurmBatchRequest._record_terminated`);
    ``(None, 0.0, False)`` when there is no file, it is unreadable, the replica still runs
    (``<attempt> running``), or another attempt than ``restarts`` wrote it (``restarts`` =
    -1, unknown: any attempt's)."""
    if not work_dir:
        return None, 0.0, False
    path = os.path.join(work_dir, log_file(app_id, role, replica_id, "exitcode"))
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            words = f.read().split()
            mtime = os.fstat(f.fileno()).st_mtime
    except OSError:
        return None, 0.0, False
    if len(words) < 2 or not (words[0].isdigit() and words[1].lstrip("-").isdigit()):
        return None, 0.0, False
    if restarts >= 0 and int(words[0]) != restarts:
        return None, 0.0, False
    return int(words[1]), mtime, len(words) == 2


def stderr_tail(path: str) -> str:
    """The last :data:`ERROR_TAIL_LINES` lines (at most :data:`ERROR_TAIL_BYTES` bytes) of
    a file; NONE when it is missing or empty."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - ERROR_TAIL_BYTES))
            data = f.read()
    except OSError:
        return NONE
    lines = data.decode("utf-8", "replace").splitlines()
    if size > ERROR_TAIL_BYTES and lines:
        lines = lines[1:]  # the first line was cut
    text = "\n".join(lines[-ERROR_TAIL_LINES:]).strip()
    return text or NONE


#: lines Slurm itself writes into a task's stderr (``slurmstepd-node1: error: *** STEP 7.0 ON
#: node1 CANCELLED AT ... ***`` when srun's --kill-on-bad-exit ends the step, possibly after the
#: failed program's traceback): not the program's output
_SLURM_LINE = re.compile(rb"^(?:slurmstepd|srun)(?:-[\w.-]+)?: .*\n?", re.MULTILINE)


def replica_root_cause(role: str, idx: int, err_path: str, code: int) -> Optional[RootCause]:
    """Why a failed replica failed (:func:`tx.schedulers.why.root_cause`), from the end of
    its stderr file without Slurm's own lines and its recorded exit status (129..159: killed
    by signal ``code - 128``, as bash records it); None where nothing beyond the status and a
    last line is named."""
    status = -(code - 128) if 128 < code < 160 else code
    cause = root_cause(role, idx, _SLURM_LINE.sub(b"", read_tail(err_path)), exit_code=status)
    return cause if names_cause(cause) else None


def _first_cause(failures: List[Tuple[float, str, str, int, ReplicaStatus]]
                 ) -> Tuple[Tuple[float, str, str, int, ReplicaStatus], Optional[RootCause]]:
    """The failure (``(when, one-line cause, stderr file, exit status, replica)``) that is
    the app's cause and its root cause, by :func:`tx.schedulers.why.first_cause`: the
    replica that failed first (its ``.exitcode`` file's mtime), except that among the
    replicas that failed within 10 s of it, one whose rank raised something other than a
    lost peer comes before one that only saw its peer go (a DDP rank raising makes the
    others fail in their next collective, and which torchrun records its end first is a
    race). A replica's stderr is read only where the rule needs it."""
    return first_cause(failures, lambda f: f[0], lambda f: replica_root_cause(f[4].role, f[4].id, f[2], f[3]))


#: lines Slurm writes into the batch script's output (``slurm-<job>.out``) when a step ran
#: out of memory: srun's ``task 0: Out Of Memory`` and slurmstepd's ``oom-kill event`` under
#: task/cgroup, slurmstepd's ``exceeded memory limit`` under JobAcctGatherParams=OverMemoryKill
_OOM_LINE = re.compile(
    r"^(?:srun|slurmstepd)[^:]*: error: .*(?:Out Of Memory|oom-kill event|exceeded (?:job )?memory limit)",
    re.IGNORECASE | re.MULTILINE,
)
#: the line the batch script writes at the start of each attempt
_ATTEMPT_LINE = re.compile(r"^\[tx\] job \S+ attempt \d+:", re.MULTILINE)


def ran_out_of_memory(work_dir: str, app_id: str) -> bool:
    """Whether Slurm killed a step of the job's last attempt for its memory, as the batch
    script's output says: a job's state stays FAILED when its batch script exits non-zero
    after srun, and scontrol and squeue never say OUT_OF_MEMORY (sacct does, on the step)."""
    if not work_dir:
        return False
    tail = stderr_tail(os.path.join(work_dir, f"slurm-{app_id}.out"))
    if tail == NONE:
        return False
    starts = list(_ATTEMPT_LINE.finditer(tail))
    if starts:
        tail = tail[starts[-1].start():]
    return _OOM_LINE.search(tail) is not None


def group_replicas(records: List[JobRecord]) -> Dict[str, List[Tuple[int, JobRecord]]]:
    """Role name -> ``[(replica_id, record), ...]`` in het-group order. Components named
    ``<role>-<k>`` (tx's names) give role and replica; any other name is a role of its own
    whose replicas are numbered in order."""
    roles: Dict[str, List[Tuple[int, JobRecord]]] = {}
    for rec in sorted(records, key=lambda r: r.offset):
        role, idx = split_job_name(rec.name)
        replicas = roles.setdefault(role, [])
        replicas.append((idx if idx is not None else len(replicas), rec))
    return roles


def _resource(rec: JobRecord) -> Resource:
    if rec.cpus_per_task < 0 and rec.mem_mb < 0 and rec.gpus < 0:
        return NULL_RESOURCE
    return Resource(cpu=rec.cpus_per_task, gpu=max(rec.gpus, 0), memMB=rec.mem_mb)


def replica_state(app_state: AppState, slurm_state: AppState, exit_code: Optional[int]) -> AppState:
    """A replica's state: from its recorded exit status when there is one (0: SUCCEEDED,
    else FAILED, or CANCELLED when the app was cancelled), else its component's state.

    A replica killed by a signal (status above 128, or negative) while the app has not
    ended yet keeps its component's state: ``scancel`` kills replicas before Slurm reports
    the job CANCELLED, and calling such a replica FAILED first would take it back from a
    terminal state to CANCELLED one poll later. The other way round, a replica with no
    status yet whose component still runs (COMPLETING) in an app that was cancelled or
    failed takes the app's state: Slurm ends the components of a cancelled heterogeneous
    job one by one, and the replica is being stopped with the app (its launcher records
    its status a moment later, which gives the same state)."""
    if exit_code is None:
        if app_state in (AppState.CANCELLED, AppState.FAILED) and not is_terminal(slurm_state):
            return app_state
        return slurm_state
    if exit_code == 0:
        return AppState.SUCCEEDED
    if app_state == AppState.CANCELLED:
        return AppState.CANCELLED
    if (exit_code > 128 or exit_code < 0) and not is_terminal(app_state):
        return slurm_state
    return AppState.FAILED


def build_describe(app_id: str, records: List[JobRecord], source: str) -> DescribeAppResponse:
    """The description of ``app_id`` from its component records (at least one)."""
    leader = min(records, key=lambda r: r.offset)
    app_state = appstate_from_slurm(leader.state)
    work_dir = leader.work_dir
    if leader.state == "FAILED" and ran_out_of_memory(work_dir, app_id):
        leader = attrs.evolve(leader, state="OUT_OF_MEMORY")
    roles: List[Role] = []
    statuses: List[RoleStatus] = []
    # (when, one-line cause, stderr file, exit status, replica) of failed replicas
    failures: List[Tuple[float, str, str, int, ReplicaStatus]] = []
    for role_name, replicas in group_replicas(records).items():
        rs = RoleStatus(role_name, [])
        for idx, rec in replicas:
            rec_dir = rec.work_dir or work_dir
            code, when, own = read_exit_code(rec_dir, app_id, role_name, idx, leader.restarts)
            state = replica_state(app_state, appstate_from_slurm(rec.state), code)
            rep = ReplicaStatus(id=idx, state=state, role=role_name, hostname=rec.nodes, exit_code=code)
            if state == AppState.FAILED and code is not None and own:
                err_path = os.path.join(rec_dir, log_file(app_id, role_name, idx, "err"))
                rep.structured_error_msg = stderr_tail(err_path)
                failures.append((when, replica_cause(role_name, idx, rec, code, rep.structured_error_msg),
                                 err_path, code, rep))
            rs.replicas.append(rep)
        statuses.append(rs)
        head = replicas[0][1]
        roles.append(Role(
            name=role_name,
            image=head.work_dir or work_dir,
            entrypoint=head.command or MISSING,
            num_replicas=len(replicas),
            resource=_resource(head),
        ))
    # the replica that failed first is the cause; srun then kills the others
    first, cause = "", None
    if failures:
        if app_state == AppState.FAILED and not failure_state(leader, records):  # TIMEOUT, ... say more
            (_, first, err_path, code, rep), cause = _first_cause(failures)
        else:
            _, first, err_path, code, rep = min(failures, key=lambda f: f[0])
        if cause is not None:
            rep.structured_error_msg, rep.root_cause = cause.text, cause
    error = cause.text if cause is not None else why_failed(app_state, leader, records, first, work_dir)
    return DescribeAppResponse(
        app_id=app_id,
        state=app_state,
        num_restarts=leader.restarts,
        msg=state_msg(leader, records),
        structured_error_msg=error,
        root_cause=cause,
        roles_statuses=statuses,
        roles=roles,
        metadata={"work_dir": work_dir, "source": source, "partition": leader.partition,
                  "submitted_by_tx": leader.is_tx},
    )


#: squeue's pending reasons (https://slurm.schedmd.com/job_reason_codes.html) explained
PENDING_REASONS: Dict[str, str] = {
    "Resources": "the nodes it needs are busy with other jobs; it starts when they are free",
    "Priority": "jobs of higher priority wait before it in its partition",
    "ReqNodeNotAvail": "a node it needs is down, drained or reserved",
    "NodeDown": "a node it needs is down",
    "Dependency": "it waits for the jobs it depends on (run option dependency)",
    "DependencyNeverSatisfied": "the jobs it depends on ended so that it can never start: cancel it",
    "BeginTime": "its start time has not come (a requeued job waits a while before it may start again)",
    "JobHeldUser": "held by its user: release it with scontrol release",
    "JobHeldAdmin": "held by an administrator",
    "PartitionConfig": "it asks for more than its partition allows (CPUs, memory, nodes or time): it never starts",
    "PartitionTimeLimit": "its time limit is above its partition's: it never starts",
    "PartitionNodeLimit": "it needs more nodes than its partition allows: it never starts",
    "PartitionDown": "its partition is down",
    "PartitionInactive": "its partition is inactive",
    "Reservation": "it waits for its reservation to start",
    "BadConstraints": "no node has the features it asks for (run option constraint)",
    "Licenses": "it waits for licenses",
    "InvalidAccount": "its account is invalid: it never starts",
    "InvalidQOS": "its QOS is invalid: it never starts",
    "Cleaning": "its previous attempt is still being cleaned up",
    "Prolog": "the prolog is running on its nodes",
    "launch failed requeued held": "its launch failed and Slurm held it: see the slurmd log of its nodes",
}
#: prefixes of limit reasons: QOSMaxGRESPerUser, AssocGrpCpuLimit, ...
_LIMITS = {"QOS": "a limit of its QOS", "Assoc": "a limit of its account (association)"}
#: Slurm's terminal states a replica's exit code does not explain, named in why-failed
FAILURE_STATES: Dict[str, str] = {
    "TIMEOUT": "reached its time limit (run option time)",
    "OUT_OF_MEMORY": "was killed: a replica used more memory than it asked for (resource memMB)",
    "NODE_FAIL": "lost a node that failed under it",
    "PREEMPTED": "was preempted by a job of higher priority",
    "BOOT_FAIL": "could not start: a node failed to boot",
    "DEADLINE": "reached its deadline",
    "REVOKED": "was revoked by a federated cluster",
}


def explain_reason(reason: str) -> str:
    """squeue's reason code explained in words a user can act on; the code itself when
    unknown. ``ReqNodeNotAvail, UnavailableNodes:node3`` names node3."""
    code, _, detail = reason.partition(",")
    code = code.strip()
    text = PENDING_REASONS.get(code)
    if text is None:
        for prefix, what in _LIMITS.items():
            if code.startswith(prefix) and ("Max" in code or "Grp" in code or "Min" in code):
                limit = code[len(prefix):].replace("Grp", "group ").replace("Max", "max ").replace("Min", "min ")
                text = f"{what} holds it ({limit.strip()}); it starts when its own or others' jobs end"
                break
    if text is None:
        return reason
    detail = detail.strip()
    if detail.startswith("UnavailableNodes:") and detail[len("UnavailableNodes:"):]:
        text += f" (unavailable: {detail[len('UnavailableNodes:'):]})"
    return f"{code}: {text}"


def failure_state(leader: JobRecord, records: List[JobRecord]) -> str:
    """The state of :data:`FAILURE_STATES` that explains the job's end: the leader's, else
    the first component's with one (sacct names OUT_OF_MEMORY on the component whose step
    ran out of memory); "" when none does."""
    for rec in [leader, *sorted(records, key=lambda r: r.offset)]:
        if rec.state in FAILURE_STATES:
            return rec.state
    return ""


def state_msg(leader: JobRecord, records: List[JobRecord]) -> str:
    """One line: Slurm's state, and why a pending job waits or where it runs."""
    state = leader.state or "UNKNOWN"
    reason = leader.reason if leader.reason and leader.reason != "None" else ""
    if appstate_from_slurm(state) == AppState.PENDING:
        why = explain_reason(reason) if reason else "waiting to be scheduled"
        if leader.restarts > 0:
            why += f" (requeued {leader.restarts} time(s))"
        return f"{state}: {why}"
    nodes = ",".join(r.nodes for r in sorted(records, key=lambda r: r.offset) if r.nodes)
    failure = failure_state(leader, records) if appstate_from_slurm(state) == AppState.FAILED else ""
    if failure:
        return f"{failure}: {FAILURE_STATES[failure]}" + (f" (nodes {nodes})" if nodes else "")
    if appstate_from_slurm(state) == AppState.RUNNING and nodes:
        return f"{state} on {nodes}"
    return f"{state} ({reason})" if reason else state


def replica_cause(role: str, idx: int, rec: JobRecord, code: int, error: str) -> str:
    """``worker[1] (het component 1 on node2): exit code 7: <last stderr line>``."""
    where = f"het component {rec.offset}" + (f" on {rec.nodes}" if rec.nodes else "")
    last = telling_line(error) if error and error != NONE else ""
    return f"{role}[{idx}] ({where}): {signal_text(code)}" + (f": {last}" if last else "")


def _slurm_exit(code: Optional[str]) -> str:
    """Slurm's ``status:signal`` (sacct/scontrol ExitCode) in words; "" for ``0:0``."""
    if not code or ":" not in code:
        return ""
    status, _, sig = code.partition(":")
    if sig.isdigit() and int(sig):
        import signal as _signal

        try:
            return f"killed by {_signal.Signals(int(sig)).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exit code {status}" if status.isdigit() and int(status) else ""


def why_failed(app_state: AppState, leader: JobRecord, records: List[JobRecord], first: str, work_dir: str) -> str:
    """One line saying why a failed app failed: Slurm's state where it explains more than
    an exit code (TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, PREEMPTED, ...), the first replica
    that failed with its exit code or signal and last stderr line, else Slurm's exit code
    of the first failed component, else the last line of the batch script's output.
    NONE unless the app FAILED."""
    if app_state != AppState.FAILED:
        return NONE
    parts = []
    failure = failure_state(leader, records)
    if failure:
        nodes = ",".join(r.nodes for r in records if r.nodes)
        parts.append(f"{failure}: the job {FAILURE_STATES[failure]}" + (f" (nodes {nodes})" if nodes else ""))
    if first:
        parts.append(first)
    else:
        for rec in sorted(records, key=lambda r: r.offset):
            text = _slurm_exit(rec.exit_code)
            if text:
                parts.append(f"het component {rec.offset} ({rec.name}): {text}")
                break
    if not parts:
        tail = stderr_tail(os.path.join(work_dir, f"slurm-{leader.app_id}.out")) if work_dir else NONE
        last = tail.splitlines()[-1].strip() if tail != NONE else ""
        parts.append(f"{leader.state or 'FAILED'}" + (f": {last}" if last else ""))
    return "; ".join(parts)
