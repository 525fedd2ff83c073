"""Sweeps on Kubernetes: single-replica trials as one Indexed Job.

A sweep whose trials are one replica each (one role, ``num_replicas`` 1) and differ only in
their command line and env is one ``batch/v1`` Job with ``completionMode: Indexed``,
``completions`` = the trials and ``parallelism`` = ``max_parallel``
(https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode). Its pods
share one template, whose size does not grow with the trials: the trials' own env and
command words are cut into what they share and a table of what differs
(:mod:`tx.schedulers.sweep_table`, with cycles): a grid's axes are in the script once
(``set -- 0.1 1 10; shift $(( (i / 3) % 3 ))``), values of no axis (an index-free word of
several parameters, a random search's) are a table, the ConfigMap ``<job>-table`` created
with the Job (key ``table``, line ``i + 1`` is trial ``i``'s values, shell-quoted) and
mounted read-only at :data:`TABLE_DIR`. The container runs ``/bin/sh -c SCRIPT``
(:func:`tx.schedulers.sweep_table.sh_statements`): with ``i`` = ``$JOB_COMPLETION_INDEX``
(which Kubernetes sets in each pod) it picks its axes' values and reads line ``i + 1``,
``export``-s the trial's own env and ``exec``-s its command with the values filled in. So the image
needs ``/bin/sh``, as Slurm's array script needs a shell. The ConfigMap is created first,
then the Job, then the ConfigMap is made the Job's dependent (``ownerReferences``: deleting
the Job deletes it); a Job the API server refuses leaves no ConfigMap. Where the trials'
commands differ in their number of words (no table), the container runs ``/bin/sh -c
SELECT tx-trial TRIAL0 TRIAL1 ...``, one argument per trial, up to 1 MB of commands.
``backoffLimitPerIndex`` = the role's ``max_retries``: a
failed trial is retried on its own, and once out of retries it is a failed index
(``status.failedIndexes``) while the others go on.

Trial ``i``'s app id is ``<namespace>:<job>_<i>`` (``_`` is in no Kubernetes name, so the
id is unambiguous); its pods are those labelled ``app.kubernetes.io/instance=<job>`` and
``batch.kubernetes.io/job-completion-index=<i>``. Its state: SUCCEEDED in
``completedIndexes``, FAILED in ``failedIndexes`` (or the Job failed), CANCELLED when the
sweep was cancelled (the Job suspended and annotated ``tx.pytorch.org/cancelled``: its
running pods go, the Job and its finished pods' logs stay), else RUNNING or PENDING as its
newest pod. The Job is labelled ``tx.pytorch.org/sweep=<sweep id>``: ``list`` reads every
trial's state from one label-selected list of Jobs (and the pods it lists anyway).

Trials of several replicas are gangs that need their own Volcano Job or JobSet each: the
runner submits one app per trial (at most ``max_parallel`` at once, under its
supervisor). One JobSet with a replicated job per trial does not fit either: JobSet's
failure policy acts on the whole JobSet (FailJobSet, RestartJobSet, RestartJob; no action
leaves one failed Job alone), so one failed trial would stop or restart the others, and a
JobSet cannot bound how many of its Jobs run at once.
"""
from __future__ import annotations

import json
import re
import shlex
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import attrs

from tx.schedulers import SweepTable, env as envc, sh_statements, table_text, trial_table
from tx.specs import AppDef, AppState, Role

from tx_scheduler_k8s import _names, _pod
from tx_scheduler_k8s._states import POD_STATES

GROUP, VERSION, PLURAL, KIND = "batch", "v1", "jobs", "Job"
API_VERSION = f"{GROUP}/{VERSION}"
#: the label of a sweep's Job: the sweep's id
SWEEP_LABEL = "tx.pytorch.org/sweep"
#: the annotation of a cancelled sweep's Job
CANCELLED = "tx.pytorch.org/cancelled"
#: the label and annotation the Job controller puts on each pod: its completion index
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: the most bytes of trial commands in one Job (an object is at most 1.5 MiB in etcd)
MAX_SCRIPT_BYTES = 1_000_000
#: the script of a sweep's container: ``sh -c SELECT tx-trial TRIAL0 TRIAL1 ...`` runs the
#: trial of its completion index (each ``export ...; exec COMMAND``)
SELECT = ('i="$JOB_COMPLETION_INDEX"; if [ "$i" -ge 0 ] 2>/dev/null && [ "$i" -lt "$#" ]; then shift "$i"; '
          'eval "$1"; fi; echo "tx: no trial $i in this sweep" >&2; exit 2')
#: where a sweep's pods see its table (the ConfigMap ``<job>-table`` as a volume)
TABLE_DIR = "/tmp/tx-sweep"
#: the ConfigMap's key, the table's file name in :data:`TABLE_DIR`
TABLE_KEY = "table"
#: the name of the table's volume in the pod
TABLE_VOLUME = "tx-sweep-table"
#: the most bytes of a table (a ConfigMap's data is at most 1 MiB)
MAX_TABLE_BYTES = 1_000_000
#: the Role fields a trial's pod is made of besides its args and env
_OTHER_FIELDS = tuple(f.name for f in attrs.fields(Role) if f.name not in ("args", "env"))
_TRIAL = re.compile(r"^(?P<job>[a-z0-9]([-a-z0-9]*[a-z0-9])?)_(?P<index>\d+)$")


def trial_of(name: str) -> Optional[Tuple[str, int]]:
    """``(job, index)`` of a trial's name ``<job>_<index>``; None for an app's own name."""
    m = _TRIAL.match(name)
    return (m.group("job"), int(m.group("index"))) if m else None


def not_an_array(apps: Sequence[AppDef]) -> Optional[str]:
    """Why trials of these apps cannot be one Indexed Job, or None when they can."""
    if not apps:
        return "no trials"
    if any(len(a.roles) != 1 or a.roles[0].num_replicas != 1 for a in apps):
        return ("a trial of several replicas is a gang, one Volcano Job or JobSet each (a JobSet's failure policy "
                "acts on all its Jobs, so trials cannot share one)")
    return None


def _sweep_id(app: AppDef) -> str:
    handle = app.roles[0].env.get("TX_SWEEP_ID", "")
    sid = handle.rsplit("/", 1)[-1]
    return _names.label_value(sid) or "sweep"


def _strip(template: Dict[str, Any]) -> str:
    """The template without what differs between trials (command, env, the role
    annotation, the instance label), as JSON to compare."""
    t = json.loads(json.dumps(template))
    c = t["spec"]["containers"][0]
    c.pop("command", None)
    c.pop("env", None)
    t["metadata"]["annotations"].pop(_pod.ANNOTATION_ROLE, None)
    t["metadata"]["labels"].pop(_pod.LABEL_INSTANCE, None)
    return json.dumps(t, sort_keys=True)


def indexed_job(
    apps: Sequence[AppDef],
    cfg: Mapping[str, Any],
    max_parallel: Optional[int],
    namespace: str,
    template_extra: Optional[Callable[[Dict[str, Any]], None]] = None,
) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]], str]:
    """``(job, table, "")``: the Indexed Job of single-replica trials and the ConfigMap of
    their table (None where the trials' commands make no table: then each trial's command
    is an argument of the Job's container), see the module docstring; ``(None, None,
    why)`` where they differ in more than their command and env or their table (commands)
    is too large for one object.

    Args:
        apps: each trial's app (one role of one replica), in trial order.
        cfg: the resolved run options (service account, priority class, image secret).
        max_parallel: ``parallelism`` (None: all trials at once).
        namespace: the Job's namespace.
        template_extra: what a scheduler adds to the pod template (Volcano's scheduler name
            and queue annotation).

    Raises:
        ValueError: a role name that cannot be made a Kubernetes name, or no entrypoint.
    """
    first = apps[0].roles[0]
    norm = _names.role_names([first.name], _names.MAX_LABEL - _names.ID_CHARS - 3)[first.name]
    # pod <job>-<index>-<5 random> and host name <job>-<index> are DNS labels
    budget = _names.MAX_LABEL - len(str(len(apps) - 1)) - 7
    job = _names.app_id(apps[0].name, budget)
    template = _pod.pod_template(first, 0, 0, app_name=apps[0].name, app_id=f"{job}_0", container_name=norm,
                                 rank0_host=f"{job}-0", cfg=cfg)
    if _alike(apps):  # every pod is trial 0's but its command and env: only those are made
        commands, envs = [], []
        for i, app in enumerate(apps):
            role: Role = app.roles[0]
            env, args = _pod.replica_env_args(role, 0, 0, app_id=f"{job}_{i}", rank0_host=f"{job}-{i}", cfg=cfg)
            envs.append(_pod.literal_env(env))
            commands.append(_pod.literal_command(role.entrypoint, args))
    else:  # roles that differ elsewhere (a parameter in the image...): their pods are compared
        templates = [template] + [
            _pod.pod_template(app.roles[0], 0, 0, app_name=app.name, app_id=f"{job}_{i}", container_name=norm,
                              rank0_host=f"{job}-{i}", cfg=cfg) for i, app in enumerate(apps[1:], 1)]
        shape = _strip(template)
        for i, t in enumerate(templates[1:], 1):
            if _strip(t) != shape:
                return None, None, f"trial {i}'s pod differs from trial 0's in more than its command and env"
        commands = [t["spec"]["containers"][0]["command"] for t in templates]
        envs = [{e["name"]: e["value"] for e in t["spec"]["containers"][0]["env"]} for t in templates]
    common = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
    labels = {**_pod.app_labels(apps[0].name, job), SWEEP_LABEL: _sweep_id(apps[0])}
    own = list(dict.fromkeys(k for env in envs for k in env if k not in common))
    table = _table(commands, envs, own)
    config_map = None
    if table is not None:
        text = table_text(table)
        if len(text.encode()) > MAX_TABLE_BYTES:
            return None, None, f"the trials' table is {len(text.encode())} bytes, more than one ConfigMap holds"
        path = f"{TABLE_DIR}/{TABLE_KEY}"
        script = "; ".join(['i="$JOB_COMPLETION_INDEX"', *sh_statements(table, len(own), f"cat {path}", path)])
        if table.holes:  # a grid's values are all in the script's cycles: no table to mount
            config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": f"{job}-table", "namespace": namespace, "labels": labels},
                          "data": {TABLE_KEY: text}}
    else:
        trials = []
        for cmd, env in zip(commands, envs):
            words = [f"{k}={shlex.quote(_pod.k8s_unliteral(v))}" for k, v in env.items() if k not in common]
            command = " ".join(shlex.quote(_pod.k8s_unliteral(a)) for a in cmd)
            trials.append(f"{'export ' + ' '.join(words) + '; ' if words else ''}exec {command}")
        size = sum(len(t.encode()) for t in trials)
        if size > MAX_SCRIPT_BYTES:
            return None, None, f"the trials' commands are {size} bytes, more than one Job holds"
    template["metadata"]["labels"][_pod.LABEL_INSTANCE] = job
    # the role as every trial has it (each trial's own args and env are its row or argument)
    template["metadata"]["annotations"][_pod.ANNOTATION_ROLE] = _pod.role_annotation(
        _role_of_all(first, common))
    c = template["spec"]["containers"][0]
    if table is not None:
        c["command"] = ["/bin/sh", "-c", _pod.k8s_literal(script)]
    if config_map is not None:
        c.setdefault("volumeMounts", []).append({"name": TABLE_VOLUME, "mountPath": TABLE_DIR, "readOnly": True})
        template["spec"].setdefault("volumes", []).append(
            {"name": TABLE_VOLUME, "configMap": {"name": config_map["metadata"]["name"]}})
    if table is None:
        # one argument per trial: Linux caps each argument at 128 KiB (MAX_ARG_STRLEN), and
        # a script of all the trials' commands would pass it at a few hundred trials
        c["command"] = ["/bin/sh", "-c", _pod.k8s_literal(SELECT), "tx-trial", *(_pod.k8s_literal(t) for t in trials)]
    c["env"] = [{"name": k, "value": v} for k, v in common.items()]
    if template_extra is not None:
        template_extra(template)
    labels = {**_pod.app_labels(apps[0].name, job), SWEEP_LABEL: _sweep_id(apps[0])}
    resource = {
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": job, "namespace": namespace, "labels": labels,
                     "annotations": {_pod.ANNOTATION_APP: apps[0].name}},
        "spec": {
            "completionMode": "Indexed",
            "completions": len(apps),
            "parallelism": min(max_parallel or len(apps), len(apps)),
            "backoffLimitPerIndex": max(0, first.max_retries),
            "template": template,
        },
    }
    return resource, config_map, ""


def alike(apps: Sequence[AppDef]) -> bool:
    """Whether each of these apps (a sweep's trials, two or more) makes the request trial 0's
    makes but for its args and env, and with no error where trial 0's has none: one role of one
    replica each (:func:`not_an_array`), one name, roles that differ in nothing but their args
    and env (:func:`_alike`), and those all strings (another value may fail where trial 0's did
    not). Their requests but trial 0's can then be made on first use."""
    return (len(apps) > 1 and not_an_array(apps) is None and _alike(apps)
            and all(_strings(a.roles[0]) for a in apps))


def _strings(role: Role) -> bool:
    return {*map(type, role.args), *map(type, role.env), *map(type, role.env.values())} <= {str}


def _alike(apps: Sequence[AppDef]) -> bool:
    """Whether the trials' apps have one name and their roles differ in nothing but their
    args and env: then their pods differ only in their container's command and env."""
    first, role = apps[0], apps[0].roles[0]
    key = tuple(getattr(role, f) for f in _OTHER_FIELDS)
    return all(a.name == first.name and tuple(getattr(a.roles[0], f) for f in _OTHER_FIELDS) == key
               for a in apps[1:])


def _table(commands: Sequence[Sequence[str]], envs: Sequence[Mapping[str, str]],
           own: Sequence[str]) -> Optional[SweepTable]:
    """The trials' own env (``K=V`` words, keys ``own``) and command words (``commands``,
    as the containers have them) as one template and a table (:func:`tx.schedulers.trial_table`
    of their plain values); None where they cannot be one (a trial lacks one of the keys,
    their commands differ in length, a value holds a newline: a row is a line) or where no
    word differs."""
    if any(k not in env for env in envs for k in own):
        return None
    table = trial_table([{k: _pod.k8s_unliteral(env[k]) for k in own} for env in envs],
                        [[_pod.k8s_unliteral(a) for a in cmd] for cmd in commands], own)
    return table if table is not None and any(isinstance(p, int) for w in table.template for p in w) else None


def _role_of_all(role: Role, common: Mapping[str, str]) -> Role:
    contract = set(envc.TORCHX_NAMES) | set(envc.TORCHX_NAMES.values())
    env = {k: v for k, v in role.env.items() if k in common and k not in contract}
    return attrs.evolve(role, args=[], env=env)


def _indexes(text: Optional[str]) -> Set[int]:
    """``0-2,5`` (a Job's completedIndexes / failedIndexes) as a set."""
    out: Set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _condition(job: Mapping[str, Any], type_: str) -> Optional[Mapping[str, Any]]:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_ and c.get("status") == "True":
            return c
    return None


def trial_state(job: Mapping[str, Any], index: int, pods: List[Dict[str, Any]]) -> Tuple[AppState, str, int]:
    """``(state, backend message, restarts)`` of trial ``index`` of a sweep's Job, from the
    Job's status and the trial's pods (see the module docstring)."""
    st = job.get("status") or {}
    restarts = max(0, len(pods) - 1)
    if index in _indexes(st.get("completedIndexes")):
        return AppState.SUCCEEDED, "", restarts
    if index in _indexes(st.get("failedIndexes")):
        return AppState.FAILED, f"index {index} failed (backoffLimitPerIndex reached)", restarts
    failed = _condition(job, "Failed")
    newest = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", default=None)
    phase = ((newest or {}).get("status") or {}).get("phase")
    if phase == "Succeeded":
        return AppState.SUCCEEDED, "", restarts
    if (job["metadata"].get("annotations") or {}).get(CANCELLED):
        return AppState.CANCELLED, "cancelled with tx", restarts
    if failed:
        return AppState.FAILED, f"{failed.get('reason', 'Failed')}: {failed.get('message', '')}".rstrip(": "), restarts
    if phase is None or phase == "Failed":
        # a failed pod of an index not failed for good (failedIndexes): its retry comes
        return AppState.PENDING, "", restarts
    return POD_STATES.get(phase, AppState.UNKNOWN), "", restarts


def trial_pods(pods: List[Dict[str, Any]], index: int) -> List[Dict[str, Any]]:
    """The pods of trial ``index`` among a sweep's pods."""
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(COMPLETION_INDEX) == str(index)]


def trial_roles(job: Mapping[str, Any]) -> List[Role]:
    """The trials' role, rebuilt from the Job's pod template (one replica)."""
    return [_pod.role_from_template(job["spec"]["template"], 1)]
