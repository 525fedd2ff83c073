"""aws_batch sweeps: single-replica trials as one AWS Batch array job
(https://docs.aws.amazon.com/batch/latest/userguide/array_jobs.html), built from the trials'
own requests (:class:`tx_scheduler_aws_batch.request.BatchJob`), and the trials' app ids."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

import attrs

from tx.schedulers import sh_statements, table_text, trial_table

from tx_scheduler_aws_batch.request import PARAM_APPDEF, BatchJob, _shell_quote, parse_app_id

#: AWS Batch's array sizes: 2 to 10,000 children (https://docs.aws.amazon.com/batch/latest/userguide/array_jobs.html)
MIN_ARRAY_SIZE = 2
MAX_ARRAY_SIZE = 10_000
#: the largest job definition RegisterJobDefinition takes (AWS Batch service quotas,
#: https://docs.aws.amazon.com/batch/latest/userguide/service_limits.html)
MAX_JOB_DEFINITION_BYTES = 24 * 1024
#: the variable of an array's job definition holding its trials' commands (gzip, base64)
TRIALS_ENV = "TX_SWEEP_TRIALS"
#: ``argv[0]`` of an array child's ``sh -c`` selector
ARRAY_WRAPPER_NAME = "tx-aws-batch-sweep"
#: an array child's script: its index (``AWS_BATCH_JOB_ARRAY_INDEX``; moto sets only
#: ``AWS_BATCH_JOB_ID``, ``<array job id>:<index>`` as on AWS) selects its trial's line
ARRAY_SELECTOR = (
    'i="${AWS_BATCH_JOB_ARRAY_INDEX:-${AWS_BATCH_JOB_ID##*:}}"; '
    f'eval "$(printf \'%s\' "${TRIALS_ENV}" | base64 -d | gunzip)"'
)


def make_trial_id(queue: str, name: str, index: int) -> str:
    """A sweep trial's app id: ``<queue>:<array job name>:<index>`` (child ``index`` of the
    array job)."""
    return f"{queue}:{name}:{index}"


def parse_trial_id(app_id: str) -> Optional[Tuple[str, str, int]]:
    """``(queue, array job name, index)`` of a trial's app id, None for any other id."""
    head, sep, index = app_id.rpartition(":")
    if not sep or not index.isdigit():
        return None
    parsed = parse_app_id(head)
    return (parsed[0], parsed[1], int(index)) if parsed is not None else None


def _single_container(job: BatchJob) -> Optional[Dict[str, Any]]:
    ranges = job.job_def["nodeProperties"]["nodeRangeProperties"]
    if job.job_def["nodeProperties"]["numNodes"] != 1 or len(ranges) != 1:
        return None
    return dict(ranges[0]["container"])


def array_unsupported(trials: List[BatchJob]) -> Optional[str]:
    """Why these trials cannot be one array job, or None when they can: AWS Batch has no
    arrays of multi-node parallel jobs, an array has 2 to 10,000 children, and its children
    share one job definition (trials that differ in more than arguments and env cannot)."""
    if len(trials) < MIN_ARRAY_SIZE:
        return f"an AWS Batch array job has {MIN_ARRAY_SIZE} to {MAX_ARRAY_SIZE} children"
    if any(_single_container(t) is None for t in trials):
        return "a trial of several replicas is a multi-node parallel job, which AWS Batch cannot run as an array job"
    first = _single_container(trials[0])
    assert first is not None
    same = {k: v for k, v in first.items() if k not in ("command", "environment")}
    for t in trials[1:]:
        c = _single_container(t)
        assert c is not None
        if {k: v for k, v in c.items() if k not in ("command", "environment")} != same \
                or t.job_def.get("retryStrategy") != trials[0].job_def.get("retryStrategy") \
                or t.queue != trials[0].queue:
            return "the trials differ in more than arguments and env (resources, run options)"
    return None


@attrs.define
class BatchArrayJob:
    """A sweep as one AWS Batch array job (https://docs.aws.amazon.com/batch/latest/userguide/array_jobs.html):
    a single-node ``container`` job definition and one ``submit_job`` with
    ``arrayProperties.size`` = the number of trials. Child ``i`` runs trial ``i``: its
    command reads its index ``i`` from ``AWS_BATCH_JOB_ARRAY_INDEX`` and runs the script in
    :data:`TRIALS_ENV`, which exports trial ``i``'s own env and ``exec``\\ s its wrapped
    command (as :func:`tx_scheduler_aws_batch.request.wrap_command` made it); the image needs ``sh``, ``base64`` and
    ``gunzip``.

    Attributes:
        name: the array job's name (and its job definition's).
        queue: the job queue.
        job_def: ``register_job_definition`` keyword arguments (``type: container``).
        submit: ``submit_job`` keyword arguments other than ``jobDefinition``.
        app_ids: each trial's app id, ``<queue>:<name>:<index>``.
    """

    name: str
    queue: str
    job_def: Dict[str, Any]
    submit: Dict[str, Any]
    app_ids: List[str]

    def trials_script(self) -> str:
        """The decoded :data:`TRIALS_ENV`: the script a child runs with ``i`` = its index."""
        import base64
        import gzip

        env = {e["name"]: e["value"] for e in self.job_def["containerProperties"]["environment"]}
        return gzip.decompress(base64.b64decode(env[TRIALS_ENV])).decode()

    def __repr__(self) -> str:
        import yaml

        doc = {"app_ids": f"{self.app_ids[0]} .. {self.app_ids[-1]}", "register_job_definition": self.job_def,
               "submit_job": self.submit}
        return (yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=120)
                + f"# {TRIALS_ENV}, decoded (child i runs it with i = its index):\n" + self.trials_script())


_INDEX = "\x00I"


def _index_template(value: str, index: int) -> str:
    """``value`` with the trial index, where it stands alone (not inside a longer number or
    word: ``trial-3``, ``"i": 3``), replaced by a marker."""
    return re.sub(rf"(?<![0-9A-Za-z.%]){index}(?![0-9])", _INDEX, value)


def _shell_word(template: str) -> str:
    """A shell word that expands to ``template`` with the marker replaced by ``$i``."""
    return '"$i"'.join(_shell_quote(part) for part in template.split(_INDEX))


def _per_trial(values: List[str]) -> Optional[str]:
    """The one template that gives every trial's value (index ``k`` for the marker), or None."""
    if all(v == values[0] for v in values[1:]):
        return values[0]  # the same in every trial (a one-trial array has no array: >= 2)
    first = _index_template(values[0], 0)
    return first if all(_index_template(v, k) == first for k, v in enumerate(values)) else None


def build_array(trials: List[BatchJob]) -> BatchArrayJob:
    """The :class:`BatchArrayJob` running ``trials`` (each a single-replica app's
    :class:`BatchJob`, :func:`array_unsupported` None), named as trial 0. Each trial's app id
    in its env and arguments becomes its child's (:func:`make_trial_id`). Env equal in every
    trial stays in the job definition. The trials' own env and command words are one template
    (:mod:`tx.schedulers.sweep_table`): what differs only by the index is written once with
    ``$i``, a grid's axes once (``set -- 0.1 1; shift $(( (i / 3) % 2 ))``), and only values
    of no axis per trial (rows of a table in the script); where the words make no template,
    a ``case`` on the index. The script is gzipped into :data:`TRIALS_ENV` (AWS Batch's job
    definition holds 24 KiB): a 10,000-trial grid is one array job. No trial's stored AppDef
    (:data:`PARAM_APPDEF`) is kept: the children would all show trial 0's.

    Raises:
        ValueError: the job definition would be larger than AWS Batch takes
            (:data:`MAX_JOB_DEFINITION_BYTES`), more than :data:`MAX_ARRAY_SIZE` trials.
    """
    import base64
    import gzip
    import json

    if len(trials) > MAX_ARRAY_SIZE:
        raise ValueError(f"{len(trials)} trials are more than AWS Batch's array size limit of {MAX_ARRAY_SIZE}")
    first = trials[0]
    name, queue = first.name, first.queue
    ids = [make_trial_id(queue, name, i) for i in range(len(trials))]
    prefix = make_trial_id(queue, name, 0)[:-1]  # "<queue>:<name>:"; each trial's id is it + its index
    envs, cmds = [], []
    for t, new in zip(trials, ids):
        c = _single_container(t)
        assert c is not None
        envs.append({e["name"]: e["value"].replace(t.app_id, new) for e in c["environment"]})
        cmds.append([w.replace(t.app_id, new) for w in c["command"]])
    static = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
    script = _table_script(envs, cmds, static) or _case_script(envs, cmds, static)
    packed = base64.b64encode(gzip.compress(("\n".join(script) + "\n").encode(), 9, mtime=0)).decode()
    container = _single_container(first)
    assert container is not None
    container["command"] = ["/bin/sh", "-c", ARRAY_SELECTOR, ARRAY_WRAPPER_NAME]
    container["environment"] = [{"name": k, "value": v} for k, v in static.items()] + [
        {"name": TRIALS_ENV, "value": packed}]
    job_def = {k: v for k, v in first.job_def.items() if k != "nodeProperties"}
    job_def.update(jobDefinitionName=name, type="container", containerProperties=container)
    size = len(json.dumps(job_def))
    if size > MAX_JOB_DEFINITION_BYTES:
        raise ValueError(
            f"the array's job definition would be {size // 1024} KiB with {len(trials)} trials' commands, more than "
            f"AWS Batch's {MAX_JOB_DEFINITION_BYTES // 1024} KiB: split the sweep or shorten the trials' arguments")
    submit = dict(first.submit, arrayProperties={"size": len(trials)})
    # every child would show trial 0's stored AppDef: an array keeps none (as a Slurm
    # array), and describe says so (app_not_stored); the sweep record has the source
    params = {k: v for k, v in (submit.get("parameters") or {}).items() if k != PARAM_APPDEF}
    submit.pop("parameters", None)
    if params:
        submit["parameters"] = params
    assert prefix.endswith(":")
    return BatchArrayJob(name=name, queue=queue, job_def=job_def, submit=submit, app_ids=ids)


def _table_script(envs: List[Dict[str, str]], cmds: List[List[str]], static: Dict[str, str]) -> Optional[List[str]]:
    """The children's script from the trials' own env and command words as a template, a
    grid's axes and a table (:mod:`tx.schedulers.sweep_table`, with cycles; the table's rows
    in the script's ``tx_rows``); None where they make no table."""
    own = list(dict.fromkeys(k for e in envs for k in e if k not in static))
    table = trial_table(envs, cmds, own)
    if table is None:
        return None
    rows = [f"tx_rows={_shell_quote(table_text(table))}"] if table.holes else []
    return [*rows, *sh_statements(table, len(own), 'printf "%s" "$tx_rows"', "this array's table")]


def _case_script(envs: List[Dict[str, str]], cmds: List[List[str]], static: Dict[str, str]) -> List[str]:
    """The children's script as a ``case`` on the index: each trial's own env and the words
    that differ by more than the index, per trial."""
    head: List[str] = []
    own_keys = []
    for k in envs[0]:
        if k in static:
            continue
        values = [e.get(k) for e in envs]
        tmpl = _per_trial(values) if all(v is not None for v in values) else None  # type: ignore[arg-type]
        if tmpl is not None:
            head.append(f"export {k}={_shell_word(tmpl)}")
        else:
            own_keys.append(k)
    own_keys += sorted({k for e in envs[1:] for k in e if k not in envs[0]})
    # command words: the same in every trial (up to the index) once, the others per trial ($wK)
    same_len = all(len(c) == len(cmds[0]) for c in cmds)
    words = [_per_trial([c[w] for c in cmds]) for w in range(len(cmds[0]))] if same_len else None
    cases = []
    for i, (env, cmd) in enumerate(zip(envs, cmds)):
        sets = [f"{k}={_shell_quote(env[k])}" for k in own_keys if k in env]
        parts = [f"export {' '.join(sets)}"] if sets else []
        if words is None:
            parts.append("set -- " + " ".join(_shell_quote(w) for w in cmd))
        else:
            parts += [f"w{k}={_shell_quote(cmd[k])}" for k, tmpl in enumerate(words) if tmpl is None]
        if parts:
            cases.append(f"{i}) {'; '.join(parts)};;")
    script = [f'[ "$i" -ge 0 ] 2>/dev/null && [ "$i" -lt {len(envs)} ] || '
              '{ echo "tx: no trial $i in this array" >&2; exit 2; }', *head]
    if cases:
        script += ['case "$i" in', *cases, "esac"]
    if words is not None:
        script.append("set -- " + " ".join(_shell_word(t) if t is not None else f'"$w{k}"' for k, t in enumerate(words)))
    script.append('exec "$@"')
    return script
