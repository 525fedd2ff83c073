"""The request the lsf scheduler submits: one ``bsub`` per replica, each with its script.

An AppDef becomes one LSF batch job per replica of every role (pure: nothing here runs a
command). The app id is chosen by tx before submission (``<app name>-<random id>``) and is
the LSF project of every job (``-P``), so that ``bjobs -P <app id>`` finds the whole app;
replica ``k`` of role ``r`` is the job named ``<app id>-<r>-<k>`` (``-J``). Options
(https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=reference-bsub), all in the subset
OpenLava speaks unless the cluster is IBM LSF 10 (:class:`tx_scheduler_lsf._client.Capabilities`):

* ``-n <cpu>`` slots and ``-R "span[hosts=1] rusage[mem=<memMB>] select[...]"`` (the
  replica's slots on one host; ``<memMB>MB`` on LSF 10; ``select`` from run option ``select``);
* ``-M`` the memory limit: ``<memMB>MB`` on LSF 10, else in the unit of lsf.conf's
  ``LSF_UNIT_FOR_LIMITS`` (KB where unset, as LSF's default);
* ``-gpu "num=<gpu>"`` on LSF 10; a GPU request on another LSF is refused (OpenLava's getopt
  reads ``-gpu`` as job group ``pu``, which crashed its mbatchd);
* ``-q`` (run option ``lsf_queue``), ``-W`` (``time``), ``-m`` (``host``);
* ``-o``/``-e``: LSF's job report, ``<app id>-<role>-<k>.%J.lsf.{out,err}`` in the job
  directory. The program's own output goes to ``<app id>-<role>-<k>.{out,err}`` there,
  written as it runs (OpenLava copies ``-o`` output only when the job ends);
* every replica but rank 0 (replica 0 of the first role) waits for rank 0 to start
  (``-w "started(<rank 0's job name>)"``), so that its host is known.

Each job's script (bash, given on bsub's stdin) exports the replica's environment, finds
rank 0's host (rank 0: the first host of ``LSB_HOSTS``; the others: the ``EXEC_HOST`` that
``bjobs`` reports for rank 0's job, else the file ``<app id>.rank0`` rank 0 writes in the
job directory) as ``TX_RANK0_HOST``, runs the program with its arguments exactly as given,
and records its exit status in ``<app id>-<role>-<k>.exitcode``. A role's ``max_retries``
are runs of the program again in the same job. ``<app id>-<role>-<k>.attempts`` records
every attempt as ``<epoch s> run`` when a run of the job starts, ``<epoch s> warned <signal
number>`` when the first of LSF's signals that end a job came (the warning), ``<epoch s> user <status>``
when the program failed and runs again, ``<epoch s> infra requeued|host`` when LSF runs the
job again (an administrator's ``brequeue``: the job's last report in its ``-o`` file has a
line ``Job was killed by user or admin, and will be re-queued ...``; else a host failure of a job submitted rerunnable, ``-r``, as every job is with
``infra_retries`` > 0): infrastructure failures, counted against the run option
``infra_retries``, never ``max_retries``; one too many is ``<epoch s> exhausted``, and the
job fails (exit 1) without running the program again.
A replica that fails (its retries spent)
ends its app: its script ``bkill``\\ s the app's other jobs (as Slurm's
``--kill-on-bad-exit`` does), which then end CANCELLED.
"""
from __future__ import annotations

import shlex
import textwrap
from typing import Dict, List, Mapping, Optional

import attrs

from tx.schedulers import env as env_contract, infra_retries, run_program, validate_host_app
from tx.specs import AppDef, Role, appdef_to_stored, macros

from tx_scheduler_lsf.version import __version__

#: what ``tx.distributed.preempted()`` reads (tx.distributed._preempt; not imported: torch-free
#: as it is, the plugin does not load tx.distributed)
PREEMPT_SIGNAL_ENV, PREEMPT_GRACE_ENV = "TX_PREEMPT_SIGNAL", "TX_PREEMPT_GRACE"
RANK0_ENV = env_contract.RANK0_HOST
TORCHX_RANK0_ENV = env_contract.TORCHX_NAMES[RANK0_ENV]

#: LSF_UNIT_FOR_LIMITS -> MB per unit
_UNITS = {"KB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 ** 2, "PB": 1024 ** 3, "EB": 1024 ** 4}


def job_name(app_id: str, role: str, replica_id: int) -> str:
    """``<app id>-<role>-<replica>``: the LSF job name of one replica."""
    return f"{app_id}-{role}-{replica_id}"


def replica_file(app_id: str, role: str, replica_id: int, ext: str) -> str:
    """``<app id>-<role>-<replica>.<ext>``: a replica's ``out``, ``err`` or ``exitcode``
    file, relative to the job directory."""
    return f"{job_name(app_id, role, replica_id)}.{ext}"


def appdef_file(app_id: str) -> str:
    """``<app id>.appdef.json``: the AppDef as submitted, in the job directory."""
    return f"{app_id}.appdef.json"


def cancelled_file(app_id: str) -> str:
    """``<app id>.cancelled``: written in the job directory when tx cancels the app (LSF
    itself reports a killed job only as EXIT, on OpenLava without a reason)."""
    return f"{app_id}.cancelled"


def rank0_file(app_id: str) -> str:
    """``<app id>.rank0``: rank 0's host, written by rank 0's script in the job directory."""
    return f"{app_id}.rank0"


#: how the script runs the program (:func:`tx.schedulers.batch.run_program`): stdin from
#: /dev/null, output to the replica's ``.out`` and ``.err`` files in the job directory
RUN = run_program('</dev/null >> "$tx_base.out" 2>> "$tx_base.err"')

#: the script of one replica; formatted with the values of :meth:`LsfReplicaRequest.script`
SCRIPT = r"""#!/bin/bash
# Generated by tx-scheduler-lsf {version}: replica {role}/{replica_id} of app {app_id}
{exports}
export PYTHONUNBUFFERED=1
tx_dir={job_dir}
tx_base="$tx_dir"/{base}
tx_att="$tx_base.attempts"
tx_end_others() {{
  tx_others=$(bjobs -noheader -w -P {app_id} 2>/dev/null | awk -v me="$LSB_JOBID" '$1 != me && ($3 == "RUN" || $3 == "PEND" || $3 ~ /SUSP/) {{print $1}}')
  [ -n "$tx_others" ] && bkill $tx_others
}}
# an earlier run of this job that LSF ended to run it again (brequeue, or a host failure of
# a rerunnable job) is an infrastructure failure: within infra_retries, not max_retries
tx_runs=$(grep -c ' run$' "$tx_att" 2>/dev/null); tx_runs=${{tx_runs:-0}}
if [ "$tx_runs" -gt 0 ]; then
  tx_why=host
  awk '/^Sender: /{{r = 0}} /^Job was killed by .* will be re-queued/{{r = 1}} END {{exit !r}}' "${{LSB_OUTPUTFILE:-/dev/null}}" 2>/dev/null && tx_why=requeued
  printf '%s infra %s\n' "$(date +%s)" "$tx_why" >> "$tx_att"
  tx_infra=$(grep -c ' infra ' "$tx_att")
  if [ "$tx_infra" -gt {infra_retries} ]; then
    echo "[tx] infrastructure retries exhausted: $tx_infra infrastructure failure(s), infra_retries={infra_retries}" | tee -a "$tx_base.err"
    printf '%s exhausted\n' "$(date +%s)" >> "$tx_att"
    printf '1 \n' > "$tx_base.exitcode"
    tx_end_others
    exit 1
  fi
fi
rm -f "$tx_base.exitcode"
printf '%s run\n' "$(date +%s)" >> "$tx_att"
if [ {is_rank0} = 1 ]; then
  tx_rank0=${{LSB_HOSTS%% *}}
  printf '%s\n' "$tx_rank0" > "$tx_dir"/{rank0_file}.tmp.$$ && mv -f "$tx_dir"/{rank0_file}.tmp.$$ "$tx_dir"/{rank0_file}
else
  tx_rank0=
  for tx_i in $(seq 120); do
    tx_rank0=$(bjobs -noheader -w -J {rank0_name} 2>/dev/null | awk 'NR == 1 && $6 != "-" {{print $6}}')
    tx_rank0=${{tx_rank0%%:*}}; tx_rank0=${{tx_rank0#*\*}}
    [ -z "$tx_rank0" ] && [ -s "$tx_dir"/{rank0_file} ] && read -r tx_rank0 < "$tx_dir"/{rank0_file}
    [ -n "$tx_rank0" ] && break
    sleep 0.5
  done
fi
export {rank0_env}="${{tx_rank0:-${{LSB_HOSTS%% *}}}}"
export {torchx_rank0_env}="${rank0_env}"
echo "[tx] job $LSB_JOBID: replica {role}/{replica_id} of {app_id} on ${{LSB_HOSTS%% *}}, rank 0 on ${rank0_env}"
# the first of LSF's signals is the warning: noted with its time (what a requeued run saved)
tx_sig=; tx_note() {{
  local t=${{EPOCHREALTIME/,/.}}; [ -n "$tx_sig" ] || printf '%s warned %s\n' "${{t:-$(date +%s)}}" "$1" >> "$tx_att"; tx_sig=$1
}}
trap 'tx_note 15' TERM; trap 'tx_note 2' INT; trap 'tx_note 1' HUP
tx_argv=({argv})
if [ -n "$tx_sig" ]; then
  tx_rc=$((128 + tx_sig))
else
  tx_try=$(grep -c ' user ' "$tx_att" 2>/dev/null); tx_try=${{tx_try:-0}}
  while :; do
    # LSF signals every process group of the job (bkill, brequeue: SIGINT, SIGTERM and
    # SIGKILL JOB_TERMINATE_INTERVAL apart): the program gets them itself, with SIGINT at
    # its default (the warning: TX_PREEMPT_SIGNAL=INT); this script's traps only note them
{run}
    tx_rc=${{tx_rc:-137}}  # the recorder was SIGKILLed
    [ "$tx_rc" -eq 0 ] || [ -n "$tx_sig" ] || [ "$tx_try" -ge {max_retries} ] && break
    tx_try=$((tx_try + 1))
    echo "[tx] the replica failed (exit $tx_rc): retry $tx_try of {max_retries}"
    printf '%s user %s\n' "$(date +%s)" "$tx_rc" >> "$tx_att"
  done
fi
printf '%s %s\n' "$tx_rc" "$tx_sig" > "$tx_base.exitcode"
if [ "$tx_rc" -ne 0 ] && [ -z "$tx_sig" ]; then
  echo "[tx] the replica failed (exit $tx_rc): ending the app's other jobs"
  tx_end_others
fi
exit "$tx_rc"
"""


@attrs.define
class LsfReplicaRequest:
    """One replica: one ``bsub`` and its script.

    Attributes:
        role: the role name.
        replica_id: the replica's index within its role.
        job_name: ``<app id>-<role>-<replica>``.
        bsub: the bsub command line (the script goes to its stdin).
        script: the job's bash script.
        env: what the script exports (``export K=V`` lines, in order).
        argv: the program the script runs (``tx_argv=(...)``).
    """

    role: str
    replica_id: int
    job_name: str
    bsub: List[str]
    script: str
    env: Dict[str, str] = attrs.field(factory=dict, repr=False, eq=False)
    argv: List[str] = attrs.field(factory=list, repr=False, eq=False)

    def command_line(self) -> str:
        """The bsub command line, shell-quoted."""
        return " ".join(shlex.quote(w) for w in self.bsub)


@attrs.define
class LsfBsubRequest:
    """What ``schedule`` submits: the replicas' bsubs, rank 0's first.

    Attributes:
        app_id: the app id, chosen before submission (the LSF project of every job).
        job_dir: the absolute directory the jobs run in (bsub runs there) and write to.
        replicas: ``<role>-<replica>`` -> request, in role order.
        cluster: the cluster's name and version the options were chosen for.
        appdef: the AppDef as submitted, written to :func:`appdef_file` in ``job_dir``.
    """

    app_id: str
    job_dir: str
    replicas: Dict[str, LsfReplicaRequest]
    cluster: str = ""
    appdef: str = attrs.field(default="", repr=False)

    def __repr__(self) -> str:
        out = [f"# tx-scheduler-lsf {__version__}: app {self.app_id} for {self.cluster or 'LSF'}, "
               f"{len(self.replicas)} job(s), run in {self.job_dir}"]
        for r in self.replicas.values():
            out.append(f"cd {shlex.quote(self.job_dir)} && {r.command_line()} <<'TX_SCRIPT'\n{r.script}TX_SCRIPT")
        return "\n\n".join(out) + "\n"

    __str__ = __repr__


def validate_app(app: AppDef) -> None:
    """Reject what the lsf scheduler cannot run (:func:`tx.schedulers.batch.validate_host_app`).

    Raises:
        ValueError: a role name that is not a safe job/file name, an env name that is not a
            shell identifier, or mounts (LSF jobs use the cluster's shared filesystems).
    """
    validate_host_app(app, "lsf", "LSF jobs")


def mem_limit(mem_mb: int, modern: bool, unit: str) -> str:
    """bsub's ``-M`` value for ``mem_mb`` MB: ``<n>MB`` on LSF 10, else a number in
    ``unit`` (lsf.conf's ``LSF_UNIT_FOR_LIMITS``; KB where unset), rounded up."""
    if modern:
        return f"{mem_mb}MB"
    per = _UNITS.get((unit or "KB").upper(), _UNITS["KB"])
    return str(max(1, -(-int(mem_mb) // per) if per >= 1 else int(mem_mb / per)))


def mem_rusage(mem_mb: int, modern: bool, unit: str) -> str:
    """The ``rusage[mem=...]`` value for ``mem_mb`` MB: ``<n>MB`` on LSF 10; elsewhere MB
    (the unit of the ``mem`` resource), or ``LSF_UNIT_FOR_LIMITS`` where that is larger
    (rounded up)."""
    if modern:
        return f"{mem_mb}MB"
    per = _UNITS.get((unit or "MB").upper(), 1)
    return str(max(1, -(-int(mem_mb) // per))) if per > 1 else str(mem_mb)


def preempt_env(grace: Optional[int]) -> Dict[str, str]:
    """``TX_PREEMPT_SIGNAL=INT`` and ``TX_PREEMPT_GRACE`` for ``tx.distributed.preempted()``:
    LSF ends a job (``bkill``, ``brequeue``, a preemption that kills) with SIGINT, then
    SIGTERM and SIGKILL ``JOB_TERMINATE_INTERVAL`` seconds apart, to every process group of
    the job; SIGINT is the warning, and the job can count on ``grace`` (that interval) before
    the SIGTERM, whose default action ends what has no handler for it. No grace where it is
    unknown (``bparams`` did not answer)."""
    env = {PREEMPT_SIGNAL_ENV: "INT"}
    if grace:
        env[PREEMPT_GRACE_ENV] = str(grace)
    return env


def build_request(
    app: AppDef,
    app_id: str,
    cfg: Mapping[str, object],
    *,
    job_dir: str,
    modern: bool = False,
    mem_unit: str = "KB",
    cluster: str = "",
    grace: Optional[int] = None,
) -> LsfBsubRequest:
    """Build the bsubs of ``app`` (pure).

    Args:
        app: the app.
        app_id: its id (``<name>-<random id>``, chosen by the scheduler).
        cfg: resolved run options (:func:`tx_scheduler_lsf.options.lsf_runopts`).
        job_dir: absolute directory the jobs run in.
        modern: the cluster is IBM LSF 10 (its option forms may be used).
        mem_unit: ``LSF_UNIT_FOR_LIMITS`` of the cluster (``-M``'s unit elsewhere).
        cluster: the cluster's name, for the dryrun's header.
        grace: the cluster's ``JOB_TERMINATE_INTERVAL`` (s; :func:`preempt_env`), None
            where unknown.

    Raises:
        ValueError: see :func:`validate_app`; a GPU request on a cluster other than LSF 10.
    """
    validate_app(app)
    infra = infra_retries(cfg)
    rank0 = job_name(app_id, app.roles[0].name, 0)
    replicas: Dict[str, LsfReplicaRequest] = {}
    for role_idx, role in enumerate(app.roles):
        if role.resource.gpu > 0 and not modern:
            raise ValueError(
                f"role {role.name!r} asks for {role.resource.gpu} GPU(s): GPUs are requested with bsub -gpu, "
                f"which only IBM LSF 10 has ({cluster or 'this cluster'} would misread it); set gpu=0"
            )
        for k in range(role.num_replicas):
            values = macros.Values(img_root=role.image, app_id=app_id, replica_id=str(k), rank0_env=RANK0_ENV)
            r = values.apply(role)
            name = job_name(app_id, role.name, k)
            bsub = ["bsub", "-P", app_id, "-J", name,
                    "-o", f"{job_dir}/{name}.%J.lsf.out", "-e", f"{job_dir}/{name}.%J.lsf.err"]
            bsub += _resource_opts(role, cfg, modern, mem_unit)
            if infra > 0:
                bsub.append("-r")  # rerun after a host failure: an infrastructure retry
            if name != rank0:
                bsub += ["-w", f"started({rank0})"]
            env = {**preempt_env(grace), **r.env}  # a role's own values win
            env.update(env_contract.replica_env(
                app_id=app_id, role_name=role.name, replica_id=str(k), role_idx=role_idx,
                num_replicas=role.num_replicas,
            ))
            script = SCRIPT.format(
                version=__version__, role=role.name, replica_id=k, app_id=app_id,
                exports="\n".join(f"export {key}={shlex.quote(v)}" for key, v in env.items()),
                job_dir=shlex.quote(job_dir), base=shlex.quote(name), is_rank0=int(name == rank0),
                rank0_file=shlex.quote(rank0_file(app_id)), rank0_name=shlex.quote(rank0),
                rank0_env=RANK0_ENV, torchx_rank0_env=TORCHX_RANK0_ENV,
                argv=" ".join(shlex.quote(a) for a in [r.entrypoint, *r.args]), max_retries=max(0, role.max_retries),
                infra_retries=infra, run=textwrap.indent(RUN, "    "),
            )
            replicas[f"{role.name}-{k}"] = LsfReplicaRequest(role.name, k, name, bsub, script, env,
                                                             [r.entrypoint, *r.args])
    return LsfBsubRequest(
        app_id=app_id, job_dir=job_dir, replicas=replicas, cluster=cluster,
        appdef=appdef_to_stored(app, cfg=cfg) or "",
    )


def _resource_opts(role: Role, cfg: Mapping[str, object], modern: bool, mem_unit: str) -> List[str]:
    res = role.resource
    out: List[str] = []
    if res.cpu > 0:
        out += ["-n", str(res.cpu)]
    req = ["span[hosts=1]"]
    if res.memMB > 0:
        req.append(f"rusage[mem={mem_rusage(res.memMB, modern, mem_unit)}]")
        out += ["-M", mem_limit(res.memMB, modern, mem_unit)]
    select = cfg.get("select")
    if select:
        req.append(f"select[{select}]")
    out += ["-R", " ".join(req)]
    if res.gpu > 0:
        out += ["-gpu", f"num={res.gpu}"]
    for key, flag in (("lsf_queue", "-q"), ("time", "-W"), ("host", "-m")):
        value = cfg.get(key)
        if value is not None:
            out += [flag, str(value)]
    return out


def total_replicas(app: AppDef) -> int:
    """Jobs the app needs: the sum of every role's replicas."""
    return sum(role.num_replicas for role in app.roles)
