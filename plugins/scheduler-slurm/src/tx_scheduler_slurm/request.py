"""The request the slurm scheduler submits: an ``sbatch`` command and its batch script.

An AppDef becomes one heterogeneous batch job (https://slurm.schedmd.com/heterogeneous_jobs.html)
with one component per replica of every role, in role order, separated by ``#SBATCH hetjob``.
Component ``i`` carries the ``#SBATCH`` options of its replica
(https://slurm.schedmd.com/sbatch.html): ``--job-name=<app>@<role>-<replica>``,
``--requeue`` or ``--no-requeue``, ``--ntasks-per-node=1``, ``--cpus-per-task``, ``--mem``
(MB), GPUs and the run options ``partition``, ``time``, ``constraint``, ``qos``,
``exclude``, ``gres``, ``reservation``, ``exclusive`` and ``nodelist`` (one node each). The
job's ``--comment`` is ``tx-app:<app name>`` (then the user's comment): with the ``@`` in
the job names, the marker of jobs tx submitted. One ``srun`` runs every component
(``:``-separated groups), each writing ``slurm-<jobid>-<role>-<replica>.out`` and ``.err``
in the job's working directory.

Each group runs a small bash launcher (:data:`LAUNCHER`) that exports the replica's
environment (and ``PET_LOCAL_ADDR``, torchrun's ``--local_addr``, = the ``NodeAddr`` of the
node it runs on, unless the role sets it: the address torchrun's agent advertises to the
other nodes, not a node name that may not resolve or resolve to loopback), runs the
program with its arguments exactly as given (no shell parses them),
and records the program's exit status in ``slurm-<jobid>-<role>-<replica>.exitcode`` as
``<SLURM_RESTART_COUNT> <status>`` (``running`` until then, ``<status> slurm`` when Slurm
killed it: :meth:`SlurmBatchRequest._record_terminated`) for describe to tell who failed how.

Before ``srun`` the script finds the rank-0 address: the first node of het group 0, looked
up with ``scontrol show node`` and taken as its ``NodeAddr`` (the address Slurm itself uses
to reach the node, https://slurm.schedmd.com/slurm.conf.html#OPT_NodeAddr). Node names need
not resolve (``node1`` on many clusters does not), so ``TX_RANK0_HOST`` holds that address
and the ``${rank0_env}`` macro names ``TX_RANK0_HOST``.

Retries: with ``max_retries`` > 0 or ``infra_retries`` > 0 (default 3) every component is
``--requeue``-able (else ``--no-requeue``: Slurm does not requeue it after a node failure
either; run option ``requeue`` overrides). Two kinds of failure are counted apart, in
``slurm-<jobid>.attempts`` in the job's working directory (one line per attempt that the
script saw fail: ``<SLURM_RESTART_COUNT> user <status>``):

* the user's: ``srun`` fails (a replica exited non-zero, or its own memory limit killed
  it) while ``scontrol show job`` still says the job RUNNING in this attempt (a job
  requeued, cancelled or timed out under a batch script that lives on is not the user's
  failure; where scontrol does not answer the failure counts as the user's). The script
  appends a ``user`` line and, while fewer such lines than the smallest ``max_retries`` of
  the app's roles were written before, runs ``scontrol requeue`` on its own job.
* the infrastructure's: Slurm requeued the job itself (NODE_FAIL, PREEMPTED with
  ``PreemptMode=REQUEUE``, ``scontrol requeue`` by an administrator): the batch script was
  killed with the job, so that attempt has no line. At the start of each attempt the
  infrastructure failures so far are ``SLURM_RESTART_COUNT`` minus the ``user`` lines; when
  they exceed ``infra_retries`` the script writes ``<attempt> exhausted``, says so in the
  batch output and fails the job (exit 1) without running the app again.

Slurm lets a requeued job start again only after the credential lifetime
(``AuthInfo=cred_expire``, 120 s by default,
https://slurm.schedmd.com/slurm.conf.html#OPT_cred_expire).
"""
from __future__ import annotations

import functools
import re
import shlex
import textwrap
from typing import Dict, List, Mapping, Optional, Tuple

import attrs

from tx.schedulers import DEFAULT_INFRA_RETRIES, env as env_contract, infra_retries, run_program, validate_host_app
from tx.specs import AppDef, Role, appdef_to_stored, macros

from tx_scheduler_slurm._preempt import preempt_env, sbatch_signal, script_lines
from tx_scheduler_slurm.version import __version__

#: the environment variable that holds the rank-0 replica's address (``${rank0_env}``)
RANK0_ENV = env_contract.RANK0_HOST
TORCHX_RANK0_ENV = env_contract.TORCHX_NAMES[RANK0_ENV]

#: what ``${app_id}`` becomes in the batch script: the shell expands it to the job id
APP_ID_SHELL = '"$SLURM_JOB_ID"'

#: per-group launcher, run as ``bash -c "$TX_LAUNCHER" tx-launcher EXITFILE N K=V... PROGRAM ARGS...``.
#: Arguments that are ``:`` (which srun would take for a het group separator) arrive with
#: one ``+`` prepended (``+:``, ``++:`` ...), and the launcher removes it. A program SIGKILLed after
#: the launcher got SIGTERM (``KillWait``) is recorded ``137 slurm``, as ``_record_terminated`` does.
#: Each record replaces the file whole (written beside it as ``.new``, then renamed: ``tx_rec``):
#: Slurm's SIGKILL may take the launcher in the middle of writing its record (proctrack/linuxproc
#: kills the step's processes one by one, the program first), and a record written in place
#: was then an empty file, which the batch script took for a launcher that never ran (``143 slurm``).
#: The last record is written with the step's signals ignored (Slurm may signal every process of
#: the step, ``mv`` too).
#: SIGTERM, SIGINT and SIGHUP that reach the launcher are passed on to the program: Slurm's
#: proctrack/cgroup sends them to the task's own process only (its children get only the
#: SIGKILL after ``KillWait``), so a launcher that kept them let the program run on until
#: then. Not where the batch script found that Slurm signals every process of the step
#: (proctrack/linuxproc, pgid: ``TX_SIGNALS_REACH_ALL=1``): the program would get them twice. The program's status comes from a recorder process that ignores those signals and
#: waits for it (bash's own ``wait``, interrupted by a trap as the program dies, can lose
#: the status: -1). The program keeps the launcher's stdin and stdout, and the default
#: SIGINT/SIGQUIT that bash takes from background commands.
#: The time limit's warning (run option ``signal``: the batch script exports
#: ``TX_WARN_SIGNAL=USR1`` and ``TX_WARN_FILE``, the attempts file) is trapped too: the
#: launcher appends ``<attempt> warned USR1 <epoch s>`` to that file once (the batch script
#: then records the attempt as preempted) and passes the signal on to the program and every
#: process below it (torchrun's workers run in sessions of their own), unless Slurm signals
#: every process itself (``TX_SIGNALS_REACH_ALL``). The program starts with that signal
#: ignored, so that what stands between the launcher and the ranks (torchrun, a shell) is
#: not ended by it; a process that installs a handler (``tx.distributed.preempted()``,
#: Lightning's, submitit's) gets it.
LAUNCHER = r"""tx_sig=; tx_pid=; tx_fwd() { tx_sig=$1; [ -n "$tx_all" ] || [ -z "$tx_pid" ] || kill -s "$2" "$tx_pid" 2>/dev/null; }; trap 'tx_fwd 15 TERM' TERM; trap 'tx_fwd 2 INT' INT; trap 'tx_fwd 1 HUP' HUP
tx_warn=; tx_ws=${TX_WARN_SIGNAL:-}; tx_wf=${TX_WARN_FILE:-}; unset TX_WARN_SIGNAL TX_WARN_FILE
tx_tree() {  # signal $1 to $2 and every process below it
  local s=$1 todo=$2 all= f l p q pairs=
  for f in /proc/[0-9]*/stat; do
    read -r l < "$f" 2>/dev/null || continue; l=${l##*) }; q=${f#/proc/}; set -- $l; pairs="$pairs ${q%/stat}:$2"
  done
  while [ -n "$todo" ]; do
    set -- $todo; p=$1; shift; todo="$*"; all="$all $p"
    for q in $pairs; do [ "${q#*:}" != "$p" ] || todo="$todo ${q%%:*}"; done
  done
  kill -s "$s" $all 2>/dev/null
}
tx_warned() {
  if [ -z "$tx_warn" ]; then
    tx_warn=${EPOCHREALTIME/,/.}; [ -n "$tx_warn" ] || tx_warn=$(date +%s.%N 2>/dev/null); tx_warn=${tx_warn:-0}
    [ -z "$tx_wf" ] || printf "%s warned %s %s\n" "${SLURM_RESTART_COUNT:-0}" "$tx_ws" "$tx_warn" >> "$tx_wf" 2>/dev/null
  fi
  [ -n "$tx_all" ] || [ -z "$tx_pid" ] || tx_tree "$tx_ws" "$tx_pid"
}
if [ -n "$tx_ws" ]; then trap tx_warned "$tx_ws"; fi
tx_all=${TX_SIGNALS_REACH_ALL:-}; unset TX_SIGNALS_REACH_ALL
tx_exit_file=$1; tx_n=$2; shift 2
tx_rec() { printf "%s %s\n" "${SLURM_RESTART_COUNT:-0}" "$1" 2>/dev/null > "$tx_exit_file.new" && command -p mv -f "$tx_exit_file.new" "$tx_exit_file" 2>/dev/null; }
tx_rec running
while [ "$tx_n" -gt 0 ]; do export "$1"; shift; tx_n=$((tx_n - 1)); done
if [ -z "${PET_LOCAL_ADDR:-}" ] && [ -n "${SLURMD_NODENAME:-}" ]; then
  tx_addr=$(timeout 30 scontrol show node "$SLURMD_NODENAME" -o 2>/dev/null | grep -o 'NodeAddr=[^ ]*' | head -n 1 | cut -d= -f2-)
  if [ -n "$tx_addr" ]; then export PET_LOCAL_ADDR="$tx_addr"; fi
  unset tx_addr
fi
tx_argv=()
for tx_a in "$@"; do
  if [[ $tx_a =~ ^\++:$ ]]; then tx_a=${tx_a:1}; fi
  tx_argv+=("$tx_a")
done
unset tx_a tx_n
if [ -n "$tx_sig" ]; then
  tx_rc=$((128 + tx_sig))
else
""" + textwrap.indent(run_program("<&0 >&4", "$tx_ws"), "  ") + r"""
  [ -n "$tx_rc" ] || exit 137  # the recorder was SIGKILLed: 'running' stays (_record_terminated)
  if [ -n "$tx_sig" ] && [ "$tx_rc" = 137 ]; then tx_rc="137 slurm"; fi
fi
trap '' TERM INT HUP $tx_ws  # the program ended: the signals of a step Slurm stops now must not end mv
tx_rec "$tx_rc"
exit "${tx_rc%% *}"
"""

_COLONS = re.compile(r"^\+*:$")


class _Raw(str):
    """A word written into the script as is (already shell syntax)."""


def shell_word(word: str) -> str:
    """Quote ``word`` for bash, turning each ``${app_id}`` in it into ``"$SLURM_JOB_ID"``
    (expanded when the batch script runs). :class:`_Raw` words are returned unchanged."""
    if isinstance(word, _Raw):
        return str(word)
    if macros.app_id not in word:
        return shlex.quote(word)
    return APP_ID_SHELL.join(shlex.quote(p) if p else "" for p in word.split(macros.app_id))


def escape_srun_arg(arg: str) -> str:
    """Protect a program argument from srun's het-group separator: ``:`` (and ``+:``,
    ``++:`` ...) get one ``+`` prepended, which :data:`LAUNCHER` removes again."""
    return "+" + arg if _COLONS.match(arg) else arg


#: characters kept of the app name in Slurm job names (others become ``_``)
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
#: the longest app name part of a job name (Slurm job names stay readable in squeue)
APP_NAME_MAX = 64
#: the longest comment tx sets (the app name, then the user's comment)
COMMENT_MAX = 1000
#: what starts the comment of every job tx submits: the marker ``tx list`` looks for
COMMENT_MARKER = "tx-app:"


@functools.lru_cache(maxsize=256)  # a sweep's trials share one app name
def job_name_app(app_name: str) -> str:
    """The app name as it goes into Slurm job names: letters, digits, ``_``, ``.`` and
    ``-`` kept (others become ``_``), at most :data:`APP_NAME_MAX` characters, ``app``
    when nothing is left."""
    name = _NAME_CHARS.sub("_", app_name)[:APP_NAME_MAX]
    return name or "app"


def component_name(app_name: str, role: str, replica_id: int) -> str:
    """``<app>@<role>-<replica>``: the Slurm job name of one het job component. The ``@``
    (never in a role name nor in :func:`job_name_app`) marks a job as tx's in ``squeue``
    and ``sacct`` (whose records may lack the comment)."""
    return f"{job_name_app(app_name)}@{role}-{replica_id}"


@functools.lru_cache(maxsize=256)  # a sweep's trials share one comment
def job_comment(app_name: str, user_comment: Optional[str]) -> str:
    """``tx-app:<app name>`` plus ``; <user comment>``: the job's ``--comment``, cut to
    :data:`COMMENT_MAX` characters (newlines and control characters become spaces)."""
    text = COMMENT_MARKER + app_name + (f"; {user_comment}" if user_comment else "")
    return "".join(c if c.isprintable() else " " for c in text)[:COMMENT_MAX]


def appdef_file(app_id: str) -> str:
    """``slurm-<app_id>.appdef.json``: the AppDef as submitted, relative to the job's working
    directory (squeue's and sacct's ``WorkDir``, so describe finds it from any directory)."""
    return f"slurm-{app_id}.appdef.json"


def attempts_file(app_id: str) -> str:
    """``slurm-<app_id>.attempts``: the attempts the batch script saw fail, one line each
    (``<attempt> user <status>`` or ``<attempt> exhausted``), relative to the job's working
    directory."""
    return f"slurm-{app_id}.attempts"


def log_file(app_id: str, role: str, replica_id: int, ext: str) -> str:
    """``slurm-<app_id>-<role>-<replica_id>.<ext>``: a replica's ``out``, ``err`` or
    ``exitcode`` file, relative to the job's working directory."""
    return f"slurm-{app_id}-{role}-{replica_id}.{ext}"


def _opts(opts: Mapping[str, Optional[str]]) -> List[str]:
    return [f"--{k}" if v is None else f"--{k}={v}" for k, v in opts.items()]


@attrs.define
class SlurmReplicaRequest:
    """One replica: a het job component and its ``srun`` group.

    Attributes:
        name: ``<role>-<replica>``, the component's key.
        job_name: ``<app>@<role>-<replica>``, the component's Slurm job name.
        role: the role name.
        replica_id: the replica's index within its role.
        entrypoint: the program (looked up on PATH on the node).
        args: its arguments, macros substituted (``${app_id}`` still in place).
        env: its environment, macros substituted, with tx's per-replica variables.
        sbatch_opts: ``#SBATCH`` options of the component (None: a flag without value).
        srun_opts: ``srun`` options of the group.
    """

    name: str
    role: str
    replica_id: int
    job_name: str
    entrypoint: str
    args: List[str]
    env: Dict[str, str]
    sbatch_opts: Dict[str, Optional[str]]
    srun_opts: Dict[str, Optional[str]]

    def sbatch_line(self) -> str:
        """The component's ``#SBATCH`` line."""
        return "#SBATCH " + " ".join([f"--job-name={self.job_name}", *_opts(self.sbatch_opts)])

    def srun_words(self) -> List[str]:
        """The group's srun words, shell-quoted."""
        return [shell_word(w) for w in self.srun_raw_words()]

    def srun_raw_words(self) -> List[str]:
        """The group's srun words before :func:`shell_word` (``${app_id}`` in them; the
        launcher's word a :class:`_Raw`)."""
        exit_file = log_file(macros.app_id, self.role, self.replica_id, "exitcode")
        words: List[str] = [
            *_opts(self.srun_opts),
            "bash", "-c", _Raw('"$TX_LAUNCHER"'), "tx-launcher", exit_file, str(len(self.env)),
            *[f"{k}={v}" for k, v in self.env.items()],
            escape_srun_arg(self.entrypoint),
            *[escape_srun_arg(a) for a in self.args],
        ]
        return words


@attrs.define
class SlurmBatchRequest:
    """What ``schedule`` submits.

    Attributes:
        cmd: the sbatch command line without the script (``sbatch --parsable ...``).
        replicas: the components, in het-group order (key: ``<role>-<replica>``).
        job_dir: where the job runs and its logs land (``--chdir``); the script is written
            there as ``tx-sbatch.sh`` when set, else passed to sbatch on stdin.
        max_retries: requeues allowed after the user's failures (the smallest
            ``max_retries`` of the roles).
        workdir: the absolute directory the job runs in (``--chdir``).
        infra_retries: requeues by Slurm itself (node failure, preemption, an
            administrator's requeue) allowed before the job fails (run option
            ``infra_retries``).
        appdef: the AppDef as submitted (:func:`tx.specs.files.appdef_to_stored`), written
            to :func:`appdef_file` in ``workdir`` once sbatch gave the job id; made on first
            use where the request was built with ``stored_from`` (a sweep's trials: an
            array's tasks store none).
        warn_signal: the time limit's warning signal (run option ``signal``; ``USR1``), which
            every replica's launcher passes on to its program and records; None: none.
    """

    cmd: List[str]
    replicas: Dict[str, SlurmReplicaRequest]
    job_dir: Optional[str]
    max_retries: int
    workdir: str = ""
    infra_retries: int = DEFAULT_INFRA_RETRIES
    _appdef: Optional[str] = attrs.field(default="", repr=False, eq=False, alias="appdef")
    warn_signal: Optional[str] = None
    #: (app, resolved cfg) the stored AppDef is made of on first use (``appdef`` None)
    _stored_from: Optional[Tuple[AppDef, Dict[str, object]]] = attrs.field(
        default=None, repr=False, eq=False, alias="stored_from")

    @property
    def appdef(self) -> str:
        """See the class's attributes ("" where the AppDef cannot be stored).

        Raises:
            TypeError: the app's metadata holds values JSON cannot represent (made now).
        """
        if self._appdef is None:
            app, cfg = self._stored_from or (None, None)
            self._appdef = (appdef_to_stored(app, cfg=cfg) or "") if app is not None else ""
            self._stored_from = None
        return self._appdef

    def materialize(self) -> str:
        """The batch script text."""
        groups = list(self.replicas.values())
        sbatch = "\n#SBATCH hetjob\n".join(r.sbatch_line() for r in groups)
        srun_groups = [" ".join(r.srun_words()) for r in groups]
        srun = " \\\n  : ".join(srun_groups)
        return f"""#!/bin/bash
#
# Generated by tx-scheduler-slurm {__version__}
# Run with: {" ".join(shlex.quote(c) for c in self.cmd)} tx-sbatch.sh
#
{sbatch}

export PYTHONUNBUFFERED=1
export SLURM_UNBUFFEREDIO=1
export TX_MAX_RETRIES={self.max_retries}
export TX_INFRA_RETRIES={self.infra_retries}

# attempts that failed by the user's program are the "user" lines the script wrote; the
# other restarts were Slurm's own requeues (node failure, preemption, scontrol requeue)
tx_attempt=${{SLURM_RESTART_COUNT:-0}}
tx_attempts_file={attempts_file(APP_ID_SHELL)}
tx_user=$(awk '$2 == "user"' "$tx_attempts_file" 2>/dev/null | wc -l)
tx_infra=$((tx_attempt - tx_user))
if [ "$tx_infra" -gt "$TX_INFRA_RETRIES" ]; then
  echo "[tx] infrastructure retries exhausted: $tx_infra infrastructure failure(s), infra_retries=$TX_INFRA_RETRIES"
  printf "%s exhausted\\n" "$tx_attempt" >> "$tx_attempts_file"
  exit 1
fi

# rank-0 address: NodeAddr of the first node of het group 0 (node names may not resolve)
tx_rank0_node=$(timeout 60 scontrol show hostnames "${{SLURM_JOB_NODELIST_HET_GROUP_0:-$SLURM_JOB_NODELIST}}" | head -n 1)
tx_rank0_addr=$(timeout 60 scontrol show node "$tx_rank0_node" -o 2>/dev/null | grep -o 'NodeAddr=[^ ]*' | head -n 1 | cut -d= -f2-)
export {RANK0_ENV}="${{tx_rank0_addr:-$tx_rank0_node}}"
export {TORCHX_RANK0_ENV}="${RANK0_ENV}"
echo "[tx] job $SLURM_JOB_ID attempt ${{SLURM_RESTART_COUNT:-0}}: rank 0 on $tx_rank0_node ({RANK0_ENV}=${RANK0_ENV})"

# proctrack/linuxproc and pgid signal every process of a step, cgroup only its tasks (the
# launchers): a launcher passes SIGTERM/INT/HUP on to its program only where needed
case "$(timeout 60 scontrol show config 2>/dev/null | grep -m 1 '^ProctrackType')" in
  *linuxproc*|*pgid*) export TX_SIGNALS_REACH_ALL=1 ;;
esac
TX_LAUNCHER={shlex.quote(LAUNCHER)}
{self._warn_lines()}

srun {srun}
tx_rc=$?
echo "[tx] job exited with code $tx_rc"
{self._record_terminated()}
# the user's failure only while Slurm still runs this attempt: a job that Slurm requeued,
# cancelled or timed out (its srun then fails too) is not running this attempt any more
tx_now=$(timeout 60 scontrol show job "$SLURM_JOB_ID" -o 2>/dev/null | head -n 1)
{script_lines('"$tx_attempts_file"', warned=self.warn_signal is not None)}
case "$tx_now" in
  ""|*"JobState=RUNNING "*"Restarts=$tx_attempt "*) tx_own=1 ;;
  *) tx_own=; echo "[tx] the job left attempt $tx_attempt under the app: not its failure" ;;
esac
if [ "$tx_rc" -ne 0 ] && [ -n "$tx_own" ]; then
  printf "%s user %s\\n" "$tx_attempt" "$tx_rc" >> "$tx_attempts_file"
  if [ "$tx_user" -lt "$TX_MAX_RETRIES" ]; then
    echo "[tx] requeueing (retry $(( tx_user + 1 )) of $TX_MAX_RETRIES)"
    timeout 60 scontrol requeue "$SLURM_JOB_ID"
  fi
fi
exit "$tx_rc"
"""

    def _warn_lines(self) -> str:
        """Batch-script lines that tell every launcher the time limit's warning signal and
        where to record it (:data:`LAUNCHER`); nothing without one."""
        if self.warn_signal is None:
            return ""
        return (f"# the time limit's warning (run option signal): each launcher passes it on and records it\n"
                f"export TX_WARN_SIGNAL={shlex.quote(self.warn_signal)} TX_WARN_FILE=\"$PWD/$tx_attempts_file\"")

    def _record_terminated(self) -> str:
        """Shell lines run after ``srun``: when a replica recorded a non-zero status in this
        attempt (so srun's ``--kill-on-bad-exit`` terminated the others), each replica with
        no status of this attempt gets one marked ``slurm`` (terminated by Slurm):
        ``<attempt> 137 slurm`` when its launcher had started (``<attempt> running``: it
        traps SIGTERM, so Slurm's SIGKILL after ``KillWait`` ended it; a launcher that
        outlives that SIGKILL writes the same), else ``<attempt> 143 slurm`` (SIGTERM).
        Records replace the files whole, as the launcher's do; a ``.new`` file that a launcher
        SIGKILLed between writing and renaming its record left behind is removed."""
        files = " ".join(shell_word(log_file(macros.app_id, r.role, r.replica_id, "exitcode"))
                         for r in self.replicas.values())
        news = " ".join(shell_word(log_file(macros.app_id, r.role, r.replica_id, "exitcode.new"))
                        for r in self.replicas.values())
        return f"""tx_bad=; for tx_f in {files}; do
  read -r tx_a tx_s _ 2>/dev/null < "$tx_f" || continue
  if [ "$tx_a" = "$tx_attempt" ] && [[ $tx_s =~ ^[0-9]+$ ]] && [ "$tx_s" != 0 ]; then tx_bad=1; fi
done
if [ -n "$tx_bad" ]; then for tx_f in {files}; do
    tx_a=; tx_s=; read -r tx_a tx_s _ 2>/dev/null < "$tx_f"
    if [ "$tx_a" != "$tx_attempt" ]; then tx_s="143 slurm"; elif [ "$tx_s" = running ]; then tx_s="137 slurm"; else continue; fi
    printf "%s %s\\n" "$tx_attempt" "$tx_s" > "$tx_f.new" && command -p mv -f "$tx_f.new" "$tx_f"
  done; fi
rm -f {news}"""

    def __repr__(self) -> str:
        return (
            " ".join(shlex.quote(c) for c in self.cmd) + " $SBATCH_SCRIPT\n\n"
            "#----------------\n# SBATCH_SCRIPT\n#----------------\n" + self.materialize()
        )

    __str__ = __repr__


# -- building ----------------------------------------------------------------------------

#: run options that become per-component ``#SBATCH`` options
GROUP_OPTS = ("partition", "time", "constraint", "qos", "exclude", "gres", "reservation")
#: run options that become job-level sbatch arguments (``comment`` is set by tx, see
#: :func:`job_comment`; ``signal`` goes to every step: ``--signal=SIG@SECONDS``)
JOB_OPTS = ("account", "mail-user", "mail-type", "dependency", "signal")


def validate_app(app: AppDef) -> None:
    """Reject what the slurm scheduler cannot run (:func:`tx.schedulers.batch.validate_host_app`).

    Raises:
        ValueError: a role name that is not a safe job/file name, an env name that is not a
            shell identifier, or mounts (Slurm jobs use the cluster's shared filesystems).
    """
    validate_host_app(app, "slurm", "Slurm jobs")


def replica_env(role: Role, replica_id: int, role_idx: Optional[int] = None,
                env: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment of one replica: the role's (``env``: the role's with the macros
    substituted, where made already), then the replica environment contract
    (:func:`tx.schedulers.env.replica_env`: ``TX_ROLE_NAME``, ``TX_REPLICA_ID``, ``TX_APP_ID``
    and their TorchX names; ``TX_RANK0_HOST`` is exported by the batch script)."""
    env = dict(role.env if env is None else env)
    env.update(env_contract.replica_env(
        app_id=macros.app_id, role_name=role.name, replica_id=str(replica_id),
        role_idx=role_idx, num_replicas=role.num_replicas,
    ))
    return env


def build_request(
    app: AppDef,
    cfg: Mapping[str, object],
    *,
    workdir: str,
    nomem: bool = False,
    gpus_per_node: bool = False,
    nodes: Optional[List[str]] = None,
    grace: Optional[int] = None,
    defer_appdef: bool = False,
    validated: bool = False,
) -> SlurmBatchRequest:
    """Build the batch request of ``app`` (pure: no Slurm command is run).

    Args:
        app: the app; every role has an entrypoint.
        cfg: resolved run options (see :func:`tx_scheduler_slurm.options.slurm_runopts`).
        workdir: absolute directory the job runs in (``job_dir`` or the submitter's cwd).
        nomem: leave ``--mem`` out (the partition reports too little memory to trust).
        gpus_per_node: ask GPUs with ``--gpus-per-node`` (Slurm >= 24.11) instead of
            ``--gpus-per-task`` plus ``--ntasks=1``.
        nodes: the expanded ``nodelist`` run option, one node per replica in het-group
            order (each component gets ``--nodelist`` of its node); None: no nodelist.
        grace: the partition's ``GraceTime`` (s): ``TX_PREEMPT_GRACE`` unless ``signal`` is set.
        defer_appdef: make the stored AppDef (``SlurmBatchRequest.appdef``) on first use (a
            sweep's trials: an array stores none). validated: :func:`validate_app` ran already.

    Raises:
        ValueError: see :func:`validate_app`; ``nodes`` does not name one node per replica.
    """
    if not validated:
        validate_app(app)
    if nodes is not None and len(nodes) != total_replicas(app):
        raise ValueError(
            f"run option 'nodelist' names {len(nodes)} node(s) but app {app.name!r} has "
            f"{total_replicas(app)} replica(s): each replica is a het job component on its own "
            "node, so list one node per replica (or use 'exclude' / 'constraint')"
        )
    retries = min(role.max_retries for role in app.roles)
    infra = infra_retries(cfg)
    requeue = cfg.get("requeue")
    if requeue is None:
        requeue = retries > 0 or infra > 0
    elif not requeue and retries > 0:
        raise ValueError(
            f"app {app.name!r} has max_retries={retries} but run option requeue=False: tx retries "
            "by requeueing the job; set max_retries=0 or leave requeue unset"
        )
    replicas: Dict[str, SlurmReplicaRequest] = {}
    for role_idx, role in enumerate(app.roles):
        for replica_id in range(role.num_replicas):
            values = macros.Values(
                img_root=role.image,
                app_id=macros.app_id,
                replica_id=str(replica_id),
                rank0_env=RANK0_ENV,
            )
            args = [values.substitute(a) for a in role.args]  # values.apply(role)'s, copying nothing else
            env = {k: values.substitute(v) for k, v in role.env.items()}
            name = f"{role.name}-{replica_id}"
            group = _group_opts(role, cfg, nomem, gpus_per_node, bool(requeue))
            if nodes is not None:
                group["nodelist"] = nodes[len(replicas)]
            replicas[name] = SlurmReplicaRequest(
                name=name,
                role=role.name,
                replica_id=replica_id,
                job_name=component_name(app.name, role.name, replica_id),
                entrypoint=role.entrypoint,
                args=args,
                env={**preempt_env(cfg.get("signal"), grace), **replica_env(role, replica_id, role_idx, env)},
                sbatch_opts=group,
                srun_opts={
                    "output": log_file(macros.app_id, role.name, replica_id, "out"),
                    "error": log_file(macros.app_id, role.name, replica_id, "err"),
                    "open-mode": "append",
                    "wait": "60",
                    "kill-on-bad-exit": "1",
                },
            )
    cmd = ["sbatch", "--parsable", f"--chdir={workdir}", "--open-mode=append",
           f"--comment={job_comment(app.name, _str_or_none(cfg.get('comment')))}"]
    for key in JOB_OPTS:
        value = cfg.get(key)
        if value is not None:
            cmd.append(f"--{key}={sbatch_signal(value) if key == 'signal' else value}")
    signal_opt = cfg.get("signal")
    return SlurmBatchRequest(
        cmd=cmd,
        replicas=replicas,
        job_dir=str(cfg["job_dir"]) if cfg.get("job_dir") else None,
        max_retries=retries,
        workdir=workdir,
        infra_retries=infra,
        appdef=None if defer_appdef else (appdef_to_stored(app, cfg=cfg) or ""),
        stored_from=(app, dict(cfg)) if defer_appdef else None,
        warn_signal=None if signal_opt is None else preempt_env(signal_opt)["TX_PREEMPT_SIGNAL"],
    )


def _str_or_none(value: object) -> Optional[str]:
    return None if value is None else str(value)


def _group_opts(
    role: Role, cfg: Mapping[str, object], nomem: bool, gpus_per_node: bool, requeue: bool
) -> Dict[str, Optional[str]]:
    opts: Dict[str, Optional[str]] = {"requeue" if requeue else "no-requeue": None, "ntasks-per-node": "1"}
    if cfg.get("exclusive"):
        opts["exclusive"] = None
    res = role.resource
    if res.cpu > 0:
        opts["cpus-per-task"] = str(res.cpu)
    if res.memMB > 0 and not nomem:
        opts["mem"] = str(res.memMB)
    if res.gpu > 0:
        if gpus_per_node:
            opts["gpus-per-node"] = str(res.gpu)
        else:
            opts["gpus-per-task"] = str(res.gpu)
            opts["ntasks"] = "1"
    for key in GROUP_OPTS:
        value = cfg.get(key)
        if value is not None:
            opts[key] = str(value)
    return opts


def total_replicas(app: AppDef) -> int:
    """Het job components the app needs: the sum of every role's replicas."""
    return sum(role.num_replicas for role in app.roles)
