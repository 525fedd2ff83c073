"""Sweeps on Batch: single-replica trials as the tasks of one job (:func:`build_sweep_job`),
and reading them back (:func:`trial_env`, :func:`trial_words`, :func:`parse_trial_id`)."""
from __future__ import annotations

import json
import re
import shlex
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from tx.schedulers import SweepTable, env as envc, sh_statements, table_text, trial_table
from tx.specs import AppDef, macros

from tx_scheduler_gcp_batch.request import (
    _REPLICA_SENTINEL, ENV_APPDEF, GcpBatchJob, TrialSource, build_job, make_job_id, parse_role_script, replica_env,
    role_argv)

# -- sweeps: one job whose tasks are the trials ---------------------------------------------

#: Batch's job limits (https://cloud.google.com/batch/quotas#job_limits): tasks per task
#: group, parallel tasks per job, size of the job definition (about the create request's)
MAX_TASKS = 100_000
MAX_PARALLELISM = 5_000
MAX_JOB_BYTES = 1_000_000
#: the task environment variable holding a trial's runnable script (as :func:`role_script`
#: made it for the trial's own job)
TRIAL_SCRIPT_ENV = "TX_TRIAL_SCRIPT"
#: the job-wide variables of a sweep's table (:func:`build_sweep_job`): the template and
#: layout as JSON, and the rows, ``TX_SWEEP_TABLE_0``, ``_1``, ... (line ``i + 1`` of their
#: concatenation is task ``i``'s values, shell-quoted)
_SWEEP_ENV_PREFIX = "TX_SWEEP_T"
SWEEP_TEMPLATE_ENV = "TX_SWEEP_TEMPLATE"
SWEEP_TABLE_ENV = "TX_SWEEP_TABLE_"
#: the most bytes of one table variable: Linux refuses a program one environment string
#: over 128 KiB (MAX_ARG_STRLEN)
_CHUNK = 96 * 1024
#: the start of the sweep job's runnable: a trial is one replica on its own VM, its rank 0 is
#: itself (Batch's main node and hosts file are the job's, shared by all trials)
SWEEP_PREAMBLE = "unset BATCH_MAIN_NODE_HOSTNAME BATCH_HOSTS_FILE"


def make_trial_id(job: GcpBatchJob, index: int) -> str:
    """A sweep trial's app id: ``{project}:{location}:{job_id}:{task index}``."""
    return f"{job.app_id}:{index}"


def _pb(job: Any) -> Any:
    """The raw protobuf message under a ``batch_v1.Job`` (fast to read and compare; the
    proto-plus wrapper converts on every access); a raw message as it is."""
    return type(job).pb(job) if hasattr(type(job), "pb") else job


def _spec_key(job: Any) -> bytes:
    """The task spec of ``job``'s group without the runnables' commands, serialized."""
    spec = _pb(job).task_groups[0].task_spec
    copy = type(spec)()
    copy.CopyFrom(spec)
    for r in copy.runnables:
        del r.container.commands[:]
    # each trial's stored AppDef differs with its arguments; a sweep's job keeps none
    copy.environment.variables.pop(ENV_APPDEF, None)
    return copy.SerializeToString(deterministic=True)


# -- trials alike: their env and words without their job messages ------------------------------

#: an app id whose occurrences in a trial's script are those in its words (no character
#: that :func:`tx_scheduler_gcp_batch.request.role_script` quotes or writes around a word)
_PLAIN_ID = re.compile(r"[A-Za-z0-9:._-]+")
#: ``${replica_id}`` in a trial's script, as :func:`parse_role_script` reads it back
_REPLICA_REF = "${" + envc.REPLICA_ID + "}"


def alike_key(app: AppDef, cfg: Mapping[str, Any]) -> "Tuple[Any, ...] | None":
    """What a trial's job message is made of but its env, entrypoint, args and app name (the
    sweep's job has trial 0's labels): its role's name, image, retries and resources, and
    the run options ``cfg`` as given (:func:`tx_scheduler_gcp_batch.request.build_job`).
    None where the app is not one role of one replica without mounts (then its trial is
    built as it is)."""
    if len(app.roles) != 1:
        return None
    r = app.roles[0]
    if r.num_replicas != 1 or r.mounts:
        return None
    res = r.resource
    return type(r), r.name, r.image, r.max_retries, res.cpu, res.gpu, res.memMB, cfg


def _plain(words: List[str], env: Dict[str, str]) -> bool:
    """Whether every word, name and value is a ``str`` the protobuf runtime takes as it is
    (UTF-8): else the trial's message is made now, failing where a dryrun of it would."""
    try:
        text = "".join((*words, *env, *env.values()))
    except TypeError:  # not a str
        return False
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


class TrialJobs:
    """The jobs of a sweep's trials in one dryrun (``submit_dryrun_many``), each with its
    stored AppDef deferred (:class:`GcpBatchJob`): a trial alike the first one built
    (:func:`alike_key`, same project and location) gets its job id, replica env and words
    now (what could fail in its build is what failed or passed in that one's) and its job
    message on first use; a sweep's job takes those (:func:`fast_trials`). Any other trial
    is built now, as a dryrun of its app alone.

    Args:
        version: tx's version (the jobs' ``tx_version`` label).
        make_job: the job's fields -> its message (:func:`tx_scheduler_gcp_batch._client.job_message`).
    """

    def __init__(self, version: str, make_job: Callable[[Dict[str, Any]], Any]) -> None:
        self._version, self._make_job = version, make_job
        self._first: Optional[Tuple[Any, ...]] = None  # (key, project, location) of the first built

    def job(self, app: AppDef, cfg: Mapping[str, Any], project: str, location: str) -> GcpBatchJob:
        """Trial ``app``'s job with run options ``cfg`` (resolved) in ``project`` and ``location``.

        Raises:
            ValueError, TypeError: as :func:`tx_scheduler_gcp_batch.request.build_job`.
        """
        cfg = dict(cfg)  # the trial's own: its key, its stored AppDef's and its message's
        key = alike_key(app, cfg)

        def make(job_id: "str | None" = None) -> GcpBatchJob:
            return build_job(app, cfg, project, location, self._version, self._make_job, defer_appdef=True,
                             job_id=job_id)

        if key is None or self._first != (key, project, location):
            req = make()
            if key is not None:
                req.source = TrialSource(app, cfg, lambda: make(req.job_id).built, key)
                self._first = self._first or (key, project, location)
            return req
        job_id = make_job_id(app.name)
        app_id = f"{project}:{location}:{job_id}"
        role = app.roles[0]
        argv = role_argv(role, app_id)  # the order build_job substitutes them in (a wrong type fails alike)
        env = replica_env(role, 0, 0, app_id, cfg.get("provisioning_model") == "SPOT")
        if not _plain(argv, env):
            req = make(job_id)
            req.source = TrialSource(app, cfg, lambda: make(job_id).built, key)
            return req
        return GcpBatchJob(project=project, location=location, job_id=job_id, job=None, stored_from=(app, cfg),
                           source=TrialSource(app, cfg, lambda: make(job_id).built, key, env=env, argv=argv))


def _but_appdef(job: Any) -> Tuple[Any, Dict[str, str]]:
    """A copy of raw message ``job`` without its task spec's environment, and that
    environment's variables but the stored AppDef."""
    copy = type(job)()
    copy.CopyFrom(job)
    if not copy.task_groups:
        return copy, {}
    spec = copy.task_groups[0].task_spec
    variables = {k: v for k, v in spec.environment.variables.items() if k != ENV_APPDEF}
    spec.ClearField("environment")
    return copy, variables


def fast_trials(trials: List[GcpBatchJob]) -> List[bool]:
    """Which trials a sweep's job reads from their source's env and words (see
    :class:`TrialJobs`), not from their job messages: those whose message is still to be
    made and whose source is alike trial 0's, where trial 0's message is the one its
    source makes (but the stored AppDef: nothing changed it), the app ids are plain
    (:data:`_PLAIN_ID`) and not in the script's head. Their messages would be trial 0's
    but the commands and env, which they give as their messages would: the job and table
    are the ones their messages make. Trial 0 is always read from its message."""
    none = [False] * len(trials)
    if len(trials) < 2:
        return none
    first, src = trials[0], trials[0].source
    if src is None or not _PLAIN_ID.fullmatch(first.app_id):
        return none
    made = _pb(src.make())
    if _but_appdef(_pb(first.built)) != _but_appdef(made):
        return none
    script = made.task_groups[0].task_spec.runnables[0].container.commands[-1]
    head = script[:script.find("\nexec ")]  # every trial's, where no app id is in it
    if first.app_id in head:
        return none
    key, where = src.key, (first.project, first.location)
    return none[:1] + [
        t.pending and t.source is not None and t.source.argv is not None and t.source.key == key
        and (t.project, t.location) == where and _PLAIN_ID.fullmatch(t.app_id) is not None and t.app_id not in head
        for t in trials[1:]]


def _fast_env_words(t: GcpBatchJob, new: str) -> Tuple[Dict[str, str], List[str]]:
    """Trial ``t``'s env and words (entrypoint and args) as :func:`_table_job` reads them
    from its message, with app id ``new``: from its source (:func:`fast_trials`)."""
    old, src = t.app_id, t.source
    env = {k: v.replace(old, new) for k, v in src.env.items()}  # type: ignore[union-attr]
    words = [w.replace(_REPLICA_SENTINEL, _REPLICA_REF).replace(old, new).replace(_REPLICA_REF, macros.replica_id)
             .replace(macros.replica_id, "0") for w in src.argv]  # type: ignore[union-attr]
    return env, words


def sweep_unsupported(trials: List[GcpBatchJob], fast: "List[bool] | None" = None) -> "str | None":
    """Why these trials cannot be the tasks of one job, or None when they can: each trial
    one task (one replica of one role), and the trials alike but for env and arguments.
    ``fast``: :func:`fast_trials` of them (None: found here)."""
    if not trials:
        return "no trials"
    fast = fast_trials(trials) if fast is None else fast
    slow = [t for t, f in zip(trials, fast) if not f]  # the others are alike trial 0 (fast_trials)
    groups = [_pb(t.built).task_groups[0] for t in slow]
    if any(len(g.task_environments) != 1 or len(g.task_spec.runnables) != 1 for g in groups):
        return "a trial of several replicas is a job of several tasks itself, and Batch runs one task group per job"
    first, policy = _spec_key(trials[0].built), _pb(trials[0].built).allocation_policy
    for t in slow[1:]:
        if _spec_key(t.built) != first or _pb(t.built).allocation_policy != policy \
                or (t.project, t.location) != (trials[0].project, trials[0].location):
            return "the trials differ in more than arguments and env (resources, run options)"
    return None


def trial_env(job: Any, index: int) -> Dict[str, str]:
    """Task ``index``'s environment in a sweep's job: the job-wide variables
    (``task_spec.environment``) and its own (``task_environments[index]``, or its row of the
    job's table: :func:`trial_words`)."""
    group = job.task_groups[0]
    shared = dict(group.task_spec.environment.variables)
    if SWEEP_TEMPLATE_ENV not in shared:
        return {**shared, **group.task_environments[index].variables}
    exports, words = trial_words(job, index)
    own = dict(w.split("=", 1) for w in words[:exports])
    return {**{k: v for k, v in shared.items() if not k.startswith(_SWEEP_ENV_PREFIX)}, **own}


def trial_words(job: Any, index: int) -> Tuple[int, List[str]]:
    """``(n, words)`` of task ``index`` of a sweep's job with a table (:func:`build_sweep_job`):
    its own env as ``K=V`` (the first ``n`` words), then its entrypoint and args.

    Raises:
        IndexError: no such row.
    """
    env = job.task_groups[0].task_spec.environment.variables
    meta = json.loads(env[SWEEP_TEMPLATE_ENV])
    if not 0 <= index < int(meta["rows"]):
        raise IndexError(f"no row {index} in the sweep's table")
    text = "".join(env[f"{SWEEP_TABLE_ENV}{c}"] for c in range(int(meta["chunks"])))
    rows = [[]] * index + [shlex.split(text.split("\n")[index])] if text else [[]] * (index + 1)
    table = SweepTable(meta["template"], rows, [(int(s), list(v)) for s, v in meta["cycles"]])
    return int(meta["exports"]), table.words(index)


def _table_job(trials: List[GcpBatchJob], out: GcpBatchJob,
               fast: List[bool]) -> "Tuple[Dict[str, str], str] | None":
    """The job-wide variables and runnable script of a sweep whose trials' own env and
    command words make a table (:mod:`tx.schedulers.sweep_table`), None where they do not.
    ``fast``: :func:`fast_trials` of the trials."""
    envs, argvs, heads = [], [], set()
    for i, t in enumerate(trials):
        new = make_trial_id(out, i)
        if fast[i]:  # alike trial 0: its env and words as its message would give them, its head trial 0's
            env, argv = _fast_env_words(t, new)
            envs.append(env)
            argvs.append(argv)
            continue
        group = _pb(t.built).task_groups[0]
        envs.append({k: v.replace(t.app_id, new) for k, v in group.task_environments[0].variables.items()})
        script = group.task_spec.runnables[0].container.commands[-1].replace(t.app_id, new)
        heads.add(script[:script.find("\nexec ")])
        ep, args = parse_role_script(script)
        argvs.append([a.replace(macros.replica_id, "0") for a in (ep, *args)])  # each trial is replica 0
    if len(heads) != 1:
        return None
    common = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
    own = sorted({k for e in envs for k in e if k not in common})  # Batch's env is a map: no order
    table = trial_table(envs, argvs, own)
    if table is None:
        return None
    text = table_text(table) if table.holes else ""
    chunks: List[str] = []
    for line in text.splitlines(keepends=True):  # each variable under Linux's 128 KiB per string
        if not chunks or len(chunks[-1]) + len(line) > _CHUNK:
            chunks.append("")
        chunks[-1] += line
    variables = {**common, SWEEP_TEMPLATE_ENV: json.dumps(
        {"template": table.template, "cycles": table.cycles, "exports": len(own), "chunks": len(chunks),
         "rows": len(table.rows)}, separators=(",", ":"))}
    variables.update({f"{SWEEP_TABLE_ENV}{c}": chunk for c, chunk in enumerate(chunks)})
    every = "".join(f'${{{SWEEP_TABLE_ENV}{c}}}' for c in range(len(chunks)))
    statements = sh_statements(table, len(own), f'printf "%s" "{every}"', "the sweep table")
    script = "\n".join(['i="$BATCH_TASK_INDEX"', *statements[:-1], heads.pop(), statements[-1]])
    return variables, script


def build_sweep_job(trials: List[GcpBatchJob], max_parallel: "int | None",
                    fast: "List[bool] | None" = None) -> GcpBatchJob:
    """One job whose task ``i`` is trial ``i`` (``task_count`` = trials, ``parallelism`` =
    ``max_parallel``; Batch sets ``BATCH_TASK_INDEX``); trial 0's job id. Each trial's app id
    in its env and script becomes its task's (:func:`make_trial_id`). Env equal in every
    trial is the job's (``task_spec.environment``), the rest each task's
    (``task_environments[i]``); no trial's stored AppDef (``TX_APPDEF``) is kept. Where the
    trials' own env and command words make a table (:mod:`tx.schedulers.sweep_table`), the
    job holds no task environments: the table travels once, in the job-wide variables
    :data:`SWEEP_TEMPLATE_ENV` and ``TX_SWEEP_TABLE_<c>``, and each task's script reads row
    ``$BATCH_TASK_INDEX``, exports its env and ``exec``-s its command (a 10,000-trial
    100x100 grid: ~200 kB, where each trial's environment made 7.7 MB). Else the trials'
    scripts, where they differ by more than the app id (read from ``TX_APP_ID``), go in
    each task's :data:`TRIAL_SCRIPT_ENV`. ``fast``: :func:`fast_trials` of the trials (None:
    found here), whose messages are not made where the table is.

    Raises:
        ValueError: more trials, a larger ``max_parallel`` or a larger job than Batch takes.
    """
    if len(trials) > MAX_TASKS:
        raise ValueError(f"{len(trials)} trials are more than Batch's {MAX_TASKS} tasks per job")
    if max_parallel is not None and max_parallel > MAX_PARALLELISM:
        raise ValueError(f"max_parallel {max_parallel} is more than Batch's {MAX_PARALLELISM} parallel tasks per job")
    first = trials[0]
    job = type(first.built)(first.built)
    out = GcpBatchJob(project=first.project, location=first.location, job_id=first.job_id, job=job)
    made = _table_job(trials, out, fast_trials(trials) if fast is None else fast)
    group = job.task_groups[0]
    if made is not None:
        # trial 0's stored AppDef would be every task's: a sweep's job keeps none (as a Slurm
        # array), and describe says so (app_not_stored); the sweep record has the source
        shared = {k: v for k, v in group.task_spec.environment.variables.items() if k != ENV_APPDEF}
        group.task_environments = []
        group.task_spec.environment = {"variables": {**shared, **made[0]}}
        group.task_spec.runnables[0].container.commands = ["-c", f"{SWEEP_PREAMBLE}\n{made[1]}"]
        return _sized(out, len(trials), max_parallel)
    envs, scripts = [], []
    for i, t in enumerate(trials):
        new = make_trial_id(out, i)
        group = _pb(t.built).task_groups[0]
        envs.append({k: v.replace(t.app_id, new) for k, v in group.task_environments[0].variables.items()})
        scripts.append(group.task_spec.runnables[0].container.commands[-1].replace(t.app_id, "\x00A"))
    common = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
    one_script = all(sc == scripts[0] for sc in scripts[1:])
    group = job.task_groups[0]
    group.task_environments = [
        {"variables": {**{k: v for k, v in e.items() if k not in common},
                       **({} if one_script else {TRIAL_SCRIPT_ENV: sc.replace("\x00A", make_trial_id(out, i))})}}
        for i, (e, sc) in enumerate(zip(envs, scripts))]
    # trial 0's stored AppDef would be every task's: a sweep's job keeps none (as a Slurm
    # array), and describe says so (app_not_stored); the sweep record has the source
    shared = {k: v for k, v in group.task_spec.environment.variables.items() if k != ENV_APPDEF}
    group.task_spec.environment = {"variables": {**shared, **common}}
    # the app id sits in single quotes (role_script quotes every word so)
    body = scripts[0].replace("\x00A", f"'\"${envc.APP_ID}\"'") if one_script else f'eval "${TRIAL_SCRIPT_ENV}"'
    group.task_spec.runnables[0].container.commands = ["-c", f"{SWEEP_PREAMBLE}\n{body}"]
    return _sized(out, len(trials), max_parallel)


def _sized(out: GcpBatchJob, n: int, max_parallel: "int | None") -> GcpBatchJob:
    """``out`` with its task count and parallelism, each trial its own rank 0.

    Raises:
        ValueError: the job is larger than Batch takes."""
    job = out.job
    group = job.task_groups[0]
    group.task_count = n
    group.parallelism = min(max_parallel or n, n)
    group.require_hosts_file = False
    group.permissive_ssh = False
    size = type(job).pb(job).ByteSize()
    if size > MAX_JOB_BYTES:
        raise ValueError(f"the sweep's Batch job would be {size // 1000} kB with {n} trials, more than "
                         f"Batch's {MAX_JOB_BYTES // 1_000_000} MB: split the sweep or shorten the trials' arguments")
    return out


def is_sweep_job(job: Any) -> bool:
    """Whether ``job`` (a ``batch_v1.Job`` as GetJob or ListJobs return it, or its raw
    protobuf message) is a sweep's
    job (:func:`build_sweep_job`: its runnable starts with :data:`SWEEP_PREAMBLE`), whose
    tasks are trials rather than one app's replicas."""
    groups = _pb(job).task_groups
    if not groups or not groups[0].task_spec.runnables:
        return False
    commands = groups[0].task_spec.runnables[0].container.commands
    return len(commands) == 2 and commands[1].startswith(SWEEP_PREAMBLE + "\n")


def parse_trial_id(app_id: str) -> "Tuple[str, int] | None":
    """``(the job's app id, task index)`` of a sweep trial's app id, None for another id."""
    parts = app_id.split(":")
    if len(parts) == 4 and all(parts[:3]) and parts[3].isdigit():
        return ":".join(parts[:3]), int(parts[3])
    return None
