"""Parsing what Slurm's client commands print into :class:`JobRecord` and friends.

Machine-readable forms are used where they are stable across Slurm versions: ``squeue -O``
with a unit-separator (``\\x1f``) after every field (no field value contains it), ``sacct
--parsable2`` (``|``-separated, the last field free text), the jobcomp/filetxt lines and
``sinfo -o``. Formats:

* squeue: https://slurm.schedmd.com/squeue.html (``--Format``)
* sacct: https://slurm.schedmd.com/sacct.html (``--parsable2``, ``--format``)
* sinfo: https://slurm.schedmd.com/sinfo.html (``--format``)
* jobcomp/filetxt: https://slurm.schedmd.com/slurm.conf.html#OPT_JobCompType
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import attrs

from tx_scheduler_slurm._states import normalize_state

SEP = "\x1f"
#: an app id: a job id, or a job array task's ``<array job id>_<task id>`` (a sweep's trial)
APP_ID = re.compile(r"^\d+(?:_\d+)?$")
#: the comment prefix of tx's jobs (:data:`tx_scheduler_slurm.request.COMMENT_MARKER`)
TX_COMMENT = "tx-app:"
_TX_NAME = re.compile(r"^[A-Za-z0-9_.-]+@[A-Za-z0-9_.][A-Za-z0-9_.-]*-\d+$")


def is_tx_job_name(name: str) -> bool:
    """``<app>@<role>-<replica>``: the job name of a component tx submitted."""
    return bool(_TX_NAME.match(name))

#: squeue --Format fields, in the order :func:`parse_squeue` reads them (WorkDir last)
SQUEUE_FIELDS = (
    "JobID", "HetJobID", "HetJobOffset", "Name", "State", "Reason", "NodeList",
    "RestartCnt", "cpus-per-task", "MinMemory", "tres-per-node", "tres-per-task",
    "UserName", "Partition", "Command", "Comment", "ArrayJobID", "ArrayTaskID", "WorkDir",
)

#: sacct --format fields, in the order :func:`parse_sacct` reads them (WorkDir last)
SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NodeList", "ReqCPUS", "ReqMem",
                "User", "Partition", "WorkDir")

_NONE = {"", "N/A", "(null)", "None", "none", "n/a"}


@attrs.frozen
class JobRecord:
    """One Slurm job component as a status source reports it.

    Attributes:
        job_id: the component's own job id (``7`` for ``6+1``).
        app_id: the heterogeneous job id (the leader's job id; ``job_id`` when not het).
        offset: the component's offset in the het job (0 when not het).
        name: the component's job name (tx names them ``<role>-<replica>``).
        state: the bare Slurm state (``RUNNING``, ``CANCELLED`` ...).
        reason: Slurm's reason text (``Resources``, ``NonZeroExitCode``), "" if none.
        nodes: the node list (``node1``), "" before allocation.
        restarts: how often the job was requeued, -1 if the source does not say.
        cpus_per_task: cpus per task, -1 if unknown.
        mem_mb: memory per node in MB (2**20 bytes), -1 if unknown or unset.
        gpus: GPUs per task or node, 0 if none, -1 if unknown.
        user: the job's user name.
        partition: the job's partition.
        command: the batch script path, "" if submitted on stdin.
        work_dir: the job's working directory (where tx's replica log files are).
        exit_code: Slurm's ``status:signal`` exit code of the component, if reported.
        comment: the job's comment ("" where the source does not report it).
        array_tasks: for the record of a job array's tasks that have no record of their own
            yet (pending, or cancelled before they started), their ids as squeue prints them
            (``2-9%2``; "" for all of them); else "".
    """

    job_id: str
    app_id: str
    offset: int
    name: str
    state: str
    reason: str = ""
    nodes: str = ""
    restarts: int = -1
    cpus_per_task: int = -1
    mem_mb: int = -1
    gpus: int = -1
    user: str = ""
    partition: str = ""
    command: str = ""
    work_dir: str = ""
    exit_code: Optional[str] = None
    comment: str = ""
    array_tasks: str = ""

    @property
    def is_tx(self) -> bool:
        """Whether tx submitted this job: its name is ``<app>@<role>-<replica>``
        (see :func:`tx_scheduler_slurm.request.component_name`)."""
        return is_tx_job_name(self.name)

    @property
    def app_name(self) -> str:
        """The app's name: from the comment ``tx-app:<name>[; ...]`` where reported, else
        the app part of the job name (as cut for Slurm), else the job name."""
        if self.comment.startswith(TX_COMMENT):
            return self.comment[len(TX_COMMENT):].split("; ", 1)[0]
        app, sep, _ = self.name.rpartition("@")
        return app if sep and self.is_tx else self.name


def _clean(value: str) -> str:
    value = value.strip()
    return "" if value in _NONE else value


def _int(value: str, default: int = -1) -> int:
    value = _clean(value)
    return int(value) if value.isdigit() else default


_MEM = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)(?:[nc])?$", re.IGNORECASE)
_MEM_FACTOR = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


def parse_mem_mb(value: str) -> int:
    """``1024M``/``1G``/``4096``/``2Gn``/``500Mc`` -> MB (2**20 bytes); -1 for empty/unknown,
    and for ``0`` (Slurm prints 0 when no memory was requested)."""
    m = _MEM.match(_clean(value))
    if not m:
        return -1
    mb = int(float(m[1]) * _MEM_FACTOR[m[2].upper()])
    return mb if mb > 0 else -1


def parse_gpus(*tres: str) -> int:
    """GPU count from TRES texts such as ``gres/gpu:2``, ``gres:gpu:a100:4``, ``gpu:1``,
    ``gres/gpu=2`` or ``gres/gpu`` (one); 0 when none names a GPU."""
    for text in tres:
        text = _clean(text)
        for part in re.split(r"[,\s]+", text):
            idx = part.find("gpu")
            if idx < 0 or (idx > 0 and part[idx - 1] not in "/:"):
                continue
            segments = re.split(r"[:=]", part[idx + 3:])
            last = segments[-1] if segments else ""
            return int(last) if last.isdigit() else 1
    return 0


def squeue_format() -> str:
    """The ``--Format`` argument matching :data:`SQUEUE_FIELDS`."""
    return ",".join(f"{f}:{SEP}" for f in SQUEUE_FIELDS)


def _leader(job_id: str, het_id: str) -> str:
    het = _clean(het_id)
    return het if het and het != "0" else job_id


def parse_squeue(text: str) -> List[JobRecord]:
    """Records from ``squeue --noheader --noconvert --Format=<squeue_format()>`` output.
    Lines that do not have every field are skipped."""
    out: List[JobRecord] = []
    n = len(SQUEUE_FIELDS)
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(SEP)
        if len(parts) < n:
            continue
        f = dict(zip(SQUEUE_FIELDS, parts[: n - 1] + [SEP.join(parts[n - 1 :]).rstrip(SEP)]))
        job_id = _clean(f["JobID"])
        if not job_id:
            continue
        task = _clean(f["ArrayTaskID"])
        array = _clean(f["ArrayJobID"])
        if task.isdigit():  # a job array's task (squeue --array): its id is <array job>_<task>
            job_id = f"{array}_{task}"
        out.append(JobRecord(
            job_id=job_id,
            app_id=_leader(job_id, f["HetJobID"]),
            offset=max(_int(f["HetJobOffset"], 0), 0),
            name=f["Name"].strip(),
            state=normalize_state(f["State"]),
            reason=_clean(f["Reason"]),
            nodes=_clean(f["NodeList"]),
            restarts=_int(f["RestartCnt"]),
            cpus_per_task=_int(f["cpus-per-task"]),
            mem_mb=parse_mem_mb(f["MinMemory"]),
            gpus=parse_gpus(f["tres-per-task"], f["tres-per-node"]),
            user=_clean(f["UserName"]),
            partition=_clean(f["Partition"]),
            command=_clean(f["Command"]),
            comment=_clean(f["Comment"]),
            work_dir=f["WorkDir"].rstrip("\n"),
            array_tasks=task if not task.isdigit() and array == job_id else "",
        ))
    return out


def in_array_tasks(task: int, spec: str) -> bool:
    """Whether task id ``task`` is among squeue's ``spec`` of an array's tasks (``2-9%2``,
    ``1,3,5-7``, ``0-10:2``; "" means all)."""
    spec = spec.split("%", 1)[0].strip("[]")
    if not spec:
        return True
    for part in spec.split(","):
        rng, _, step = part.partition(":")
        lo, _, hi = rng.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            continue
        first, last = int(lo), int(hi or lo)
        if first <= task <= last and (task - first) % (int(step) if step.isdigit() and int(step) else 1) == 0:
            return True
    return False


_SACCT_ID = re.compile(r"^(\d+(?:_\d+)?)(?:\+(\d+))?$")
_SACCT_STEP = re.compile(r"^(\d+(?:_\d+)?(?:\+\d+)?)\.\w+$")
#: step states that explain why the component's allocation FAILED; sacct records them only
#: on the step (``6.0 OUT_OF_MEMORY`` under ``6 FAILED``)
STEP_FAILURES = ("OUT_OF_MEMORY",)


def parse_sacct(text: str) -> List[JobRecord]:
    """Records from ``sacct --parsable2 --noheader [--allocations] --format=<SACCT_FIELDS>``
    output: one per job or het component (``6`` or ``6+1``). Step rows (``6+1.0``,
    ``6.batch``, present without ``--allocations``) are not records, but a component that
    FAILED because one of its steps ran out of memory reads ``OUT_OF_MEMORY``, as the step
    does (:data:`STEP_FAILURES`). A job array's task is a record of its own (``61_3``: a
sweep's trial); the pending rest of an array (``61_[4-9]``) is skipped."""
    out: List[JobRecord] = []
    step_failures: Dict[str, str] = {}
    n = len(SACCT_FIELDS)
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < n:
            continue
        f = dict(zip(SACCT_FIELDS, parts[: n - 1] + ["|".join(parts[n - 1 :])]))
        job_id = f["JobID"].strip()
        step = _SACCT_STEP.match(job_id)
        if step:
            state = normalize_state(f["State"])
            if state in STEP_FAILURES:
                step_failures.setdefault(step[1], state)
            continue
        m = _SACCT_ID.match(job_id)
        if not m:
            continue
        offset = int(m[2]) if m[2] is not None else 0
        out.append(JobRecord(
            job_id=m[1] if m[2] is None else f"{m[1]}+{m[2]}",
            app_id=m[1],
            offset=offset,
            name=f["JobName"].strip(),
            state=normalize_state(f["State"]),
            reason="",
            nodes=_clean(f["NodeList"]).replace("None assigned", ""),
            cpus_per_task=_int(f["ReqCPUS"]),
            mem_mb=parse_mem_mb(f["ReqMem"]),
            user=_clean(f["User"]),
            partition=_clean(f["Partition"]),
            work_dir=f["WorkDir"].strip(),
            exit_code=_clean(f["ExitCode"]) or None,
        ))
    return [attrs.evolve(r, state=step_failures[r.job_id]) if r.state == "FAILED" and r.job_id in step_failures
            else r for r in out]


#: keys of a jobcomp/filetxt line, in the order Slurm writes them (values may hold spaces)
_JOBCOMP_KEYS = (
    "JobId", "UserId", "GroupId", "Name", "JobState", "Partition", "TimeLimit", "StartTime",
    "EndTime", "NodeList", "NodeCnt", "ProcCnt", "WorkDir", "ReservationName", "Tres",
    "Account", "QOS", "WcKey", "Cluster", "SubmitTime", "EligibleTime", "ArrayJobId",
    "ArrayTaskId", "HetJobId", "HetJobOffset", "DerivedExitCode", "ExitCode",
)
_KV = re.compile(r"(?:^|\s)(" + "|".join(_JOBCOMP_KEYS) + r")=")


def parse_kv_line(line: str) -> Dict[str, str]:
    """Split a jobcomp/filetxt line ``JobId=6 UserId=root(0) ... WorkDir=/a b ...`` into a
    dict; only known keys start a field, so values may contain spaces."""
    out: Dict[str, str] = {}
    matches = list(_KV.finditer(line))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[m[1]] = line[m.end():end].strip()
    return out


def parse_jobcomp(text: str, app_id: str) -> List[JobRecord]:
    """Records of ``app_id`` from a jobcomp/filetxt file (one line per ended job component;
    a requeued job has one line per attempt: the last one wins)."""
    by_job: Dict[str, JobRecord] = {}
    array, _, task = app_id.partition("_")
    for line in text.splitlines():
        if task:  # a job array's task: ArrayJobId=<array> ArrayTaskId=<task>
            if f"ArrayJobId={array} " not in line or f"ArrayTaskId={task} " not in line:
                continue
        elif f"JobId={app_id} " not in line and f"HetJobId={app_id} " not in line:
            continue
        kv = parse_kv_line(line)
        job_id = app_id if task else kv.get("JobId", "")
        het = _clean(kv.get("HetJobId", ""))
        leader = het if het and het != "0" else job_id
        if leader != app_id:
            continue
        by_job[job_id] = JobRecord(
            job_id=job_id,
            app_id=leader,
            offset=max(_int(kv.get("HetJobOffset", ""), 0), 0),
            name=kv.get("Name", ""),
            state=normalize_state(kv.get("JobState", "")),
            nodes=_clean(kv.get("NodeList", "")),
            user=kv.get("UserId", "").split("(")[0],
            partition=_clean(kv.get("Partition", "")),
            work_dir=kv.get("WorkDir", ""),
            exit_code=_clean(kv.get("ExitCode", "")) or None,
        )
    return sorted(by_job.values(), key=lambda r: r.offset)


def jobcomp_history(text: str, app_id: str) -> List[str]:
    """Slurm's state of each ended attempt of ``app_id``, in order, from a jobcomp/filetxt
    file: the ``JobState`` of each line of the job (its het leader's lines only)."""
    states = []
    for line in text.splitlines():
        if f"JobId={app_id} " not in line:
            continue
        kv = parse_kv_line(line)
        if kv.get("JobId") == app_id:
            states.append(normalize_state(kv.get("JobState", "")))
    return states


@attrs.frozen
class Partition:
    """A partition as ``sinfo`` reports it.

    Attributes:
        name: the partition name.
        mem_mb: the smallest RealMemory of its nodes in MB, None if unknown.
        nodes: how many nodes it has (any state).
        default: it is the cluster's default partition.
        cpus: the most CPUs of one of its nodes, None if unknown.
        max_time_min: its time limit in minutes, None if unknown or unlimited.
        max_mem_mb: the largest RealMemory of its nodes in MB, None if unknown.
        preempt_mode: its ``PreemptMode`` as sinfo's ``%M`` prints it (``OFF``: its jobs
            are never preempted; ``REQUEUE``, ``CANCEL``, ``SUSPEND,GANG``...), None if unknown.
    """

    name: str
    mem_mb: Optional[int]
    nodes: int
    default: bool = False
    cpus: Optional[int] = None
    max_time_min: Optional[int] = None
    max_mem_mb: Optional[int] = None
    preempt_mode: Optional[str] = None


#: sinfo --format matching :func:`parse_sinfo` (https://slurm.schedmd.com/sinfo.html:
#: partition, memory, node count, CPUs, time limit, PreemptionMode)
SINFO_FORMAT = f"%P{SEP}%m{SEP}%D{SEP}%c{SEP}%l{SEP}%M"


def parse_time_min(text: str) -> Optional[int]:
    """A Slurm time (``--time`` forms: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``,
    ``D-H:M:S``) in whole minutes, rounded up; None for ``UNLIMITED``/``INFINITE``/empty
    or unparseable text."""
    text = _clean(text)
    m = re.match(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$", text)
    if not m:
        return None
    days = int(m[1]) if m[1] else 0
    parts = [int(p) for p in m.groups()[1:] if p is not None]
    if m[1]:  # D-H[:M[:S]]
        h, mi, sec = (parts + [0, 0])[:3]
    elif len(parts) == 1:  # M
        h, mi, sec = 0, parts[0], 0
    elif len(parts) == 2:  # M:S
        h, mi, sec = 0, parts[0], parts[1]
    else:  # H:M:S
        h, mi, sec = parts
    total = ((days * 24 + h) * 60 + mi) * 60 + sec
    return -(-total // 60)


def parse_sinfo(text: str) -> Dict[str, Partition]:
    """Partitions from ``sinfo --noheader --noconvert --format=<SINFO_FORMAT>`` output;
    sinfo prints one line per partition and node state, which are summed here."""
    mem: Dict[str, Optional[int]] = {}
    nodes: Dict[str, int] = {}
    default: Dict[str, bool] = {}
    cpus: Dict[str, Optional[int]] = {}
    limit: Dict[str, Optional[int]] = {}
    big: Dict[str, Optional[int]] = {}
    preempt: Dict[str, Optional[str]] = {}
    for line in text.splitlines():
        parts = line.split(SEP)
        if len(parts) in (3, 5):
            parts += [""] * (6 - len(parts))
        if len(parts) != 6:
            continue
        raw, m, d, c, lim, mode = (p.strip() for p in parts)
        name = raw.rstrip("*")
        if not name:
            continue
        default[name] = default.get(name, False) or raw.endswith("*")
        nodes[name] = nodes.get(name, 0) + _int(d, 0)
        mb = parse_mem_mb(m.rstrip("+"))
        value = mb if mb > 0 else None
        prev = mem.get(name, value)
        mem[name] = value if prev is None else (prev if value is None else min(prev, value))
        c_value = _int(c.rstrip("+"), 0) or None
        cpus[name] = max(filter(None, (cpus.get(name), c_value)), default=None)
        limit[name] = parse_time_min(lim)
        big[name] = max(filter(None, (big.get(name), value)), default=None)
        preempt[name] = mode.upper() or None
    return {n: Partition(n, mem[n], nodes[n], default[n], cpus[n], limit[n], big[n], preempt[n]) for n in nodes}


def parse_version(text: str) -> Optional[Tuple[int, int]]:
    """``slurm 24.11.1`` / ``slurm-wlm 22.05.8`` -> ``(24, 11)``; None if no version."""
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m[1]), int(m[2])) if m else None


def parse_config(text: str) -> Dict[str, str]:
    """``scontrol show config`` output (``Key = value`` lines) as a dict."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def split_job_name(name: str) -> Tuple[str, Optional[int]]:
    """``app@trainer-3`` (tx's names) or ``trainer-3`` -> ``("trainer", 3)``; a name without
    a ``-<int>`` suffix -> ``(name, None)``."""
    if is_tx_job_name(name):
        name = name.rpartition("@")[2]
    role, sep, idx = name.rpartition("-")
    if sep and role and idx.isdigit():
        return role, int(idx)
    return name, None
