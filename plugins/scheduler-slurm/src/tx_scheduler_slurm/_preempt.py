"""Preemption on Slurm (docs/recovery.md, "Preemption"). Standard library only.

Slurm warns a job it preempts (``PreemptMode=REQUEUE``) by sending SIGTERM to its steps and
kills it once the partition's ``GraceTime`` has passed; the run option ``signal``
(``sbatch --signal``) sends a chosen signal before the time limit instead. tx gives every
replica ``TX_PREEMPT_GRACE`` (and ``TX_PREEMPT_SIGNAL`` where ``signal`` picks one):
``signal``'s seconds, else the partition's ``GraceTime`` read once at dryrun
(``scontrol show partition``).

A job that saves and leaves within the grace ends its steps before Slurm's kill; a batch
script that then ended would complete the job (Slurm requeues only a job it kills), so the
batch script (:func:`script_lines`) sees Slurm's ``PreemptTime`` on its own job, writes
``<attempt> preempted <status> <PreemptTime, epoch s>`` to ``slurm-<jobid>.attempts`` and
requeues the job itself: the nodes are given back at once, the attempt counts as an
infrastructure failure (never against ``max_retries``), and :func:`tx.schedulers.saves.what_saved` reads the
newest checkpoint's completion marker to name the step saved after the warning. The time
limit's warning (run option ``signal``) is told to the batch script by the replicas'
launchers (``<attempt> warned SIG <epoch s>`` lines): a job that left on it is recorded and
requeued the same way, its ``preempted`` line ending with the signal's name.
"""
from __future__ import annotations

import os
import signal as _signal
from typing import Dict, Optional, Tuple

from tx.schedulers import what_saved

__all__ = [
    "NOT_A_WARNING", "parse_grace", "preempt_env", "preempted_reason", "read_preempted", "sbatch_signal",
    "script_lines", "signal_name", "split_signal",
]

#: signals that cannot be the time limit's warning (run option ``signal``): those Slurm
#: itself ends a job with (``scancel``, a preemption, srun's ``--kill-on-bad-exit``, the time
#: limit: SIGCONT, SIGTERM, SIGKILL after ``KillWait``), which tx could not tell from the
#: warning, and those no program can catch
NOT_A_WARNING = frozenset({"TERM", "INT", "HUP", "KILL", "STOP", "CONT"})


def signal_name(sig: str) -> Optional[str]:
    """The name without ``SIG`` of the signal ``sig`` names (``USR1``, ``SIGUSR1``, ``10``
    on Linux: ``USR1``); None where it names none."""
    text = sig.strip().upper()
    if text.isdigit():
        try:
            return _signal.Signals(int(text)).name[3:]
        except ValueError:
            return None
    name = text[3:] if text.startswith("SIG") else text
    return name if isinstance(getattr(_signal, "SIG" + name, None), _signal.Signals) else None


def split_signal(signal_opt: object) -> Tuple[str, str, str]:
    """``(flags, SIG, SECONDS)`` of the run option ``signal`` (``[R:|B:]SIG[@SECONDS]``):
    the flags before ``:`` (``""``, ``R``, ``B``, ``RB``), the signal as given, and the
    seconds (``60`` when omitted, as sbatch does)."""
    text = str(signal_opt)
    flags, _, rest = text.rpartition(":")
    sig, _, secs = rest.partition("@")
    return flags, sig, secs or "60"


def sbatch_signal(signal_opt: object) -> str:
    """sbatch's ``--signal`` value for the run option ``signal``: the signal's name and
    its seconds, ``R:`` kept, ``B:`` left out: the program runs in the job's steps, not in
    tx's batch script, so the steps get the signal and each replica's launcher passes it
    on (``B:`` would signal only the batch shell)."""
    flags, sig, secs = split_signal(signal_opt)
    return ("R:" if "R" in flags else "") + f"{signal_name(sig) or sig}@{secs}"


def preempt_env(signal_opt: Optional[object], grace: Optional[int] = None) -> Dict[str, str]:
    """``TX_PREEMPT_SIGNAL`` and ``TX_PREEMPT_GRACE`` for ``tx.distributed.preempted()``:
    from the run option ``signal`` (``[R:|B:]SIG[@SECONDS]``: Slurm signals SECONDS before
    the time limit, 60 when omitted, as sbatch does; the job can count on those seconds,
    as Slurm may signal up to a minute earlier but never later); without it
    ``TX_PREEMPT_GRACE`` is the partition's ``GraceTime`` in seconds (``grace``; nothing
    where it is 0 or unknown)."""
    if signal_opt is None:
        return {"TX_PREEMPT_GRACE": str(grace)} if grace else {}
    _, sig, secs = split_signal(signal_opt)
    return {"TX_PREEMPT_SIGNAL": signal_name(sig) or sig, "TX_PREEMPT_GRACE": secs}


def parse_grace(scontrol_out: str, name: Optional[str]) -> Optional[int]:
    """The ``GraceTime`` (seconds) of partition ``name`` (None: the ``Default=YES`` one) in
    ``scontrol show partition --oneliner`` output; None where it is not there."""
    for line in scontrol_out.splitlines():
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if (fields.get("PartitionName") == name) if name is not None else fields.get("Default") == "YES":
            raw = fields.get("GraceTime", "")
            return int(raw) if raw.isdigit() else None
    return None


def script_lines(attempts_file: str, warned: bool = False) -> str:
    """Batch-script lines run after ``srun`` with ``$tx_now`` (``scontrol show job -o`` of
    the job), ``$tx_attempt`` and ``$tx_rc`` set: when Slurm is preempting the job (its
    ``PreemptTime`` is set), record the attempt as preempted and requeue the job now.
    With ``warned`` (the run option ``signal``), also when a replica's launcher wrote that
    it got the time limit's warning in this attempt (``<attempt> warned SIG <epoch s>``)
    and ``srun`` failed (the job saved and left: ``exit_preempted()``): the line written
    then ends with the signal's name."""
    warn = "" if not warned else f"""
tx_warned=$(awk -v a="$tx_attempt" '$1 == a && $2 == "warned" {{print $3, $4; exit}}' {attempts_file} 2>/dev/null)
if [ -n "$tx_warned" ] && [ "$tx_rc" -ne 0 ]; then
  echo "[tx] warned by Slurm (SIG${{tx_warned%% *}}) before the time limit and left: the job requeues itself"
  printf "%s preempted %s %s %s %s\\n" "$tx_attempt" "$tx_rc" "${{tx_warned#* }}" "$(date +%s.%N)" \\
    "${{tx_warned%% *}}" >> {attempts_file}
  timeout 60 scontrol requeue "$SLURM_JOB_ID"
  exit "$tx_rc"
fi"""
    return f"""tx_pt=$(printf '%s' "$tx_now" | grep -o 'PreemptTime=[^ ]*' | head -n 1 | cut -d= -f2-)
if [ -n "$tx_pt" ] && [ "$tx_pt" != None ] && [ "$tx_pt" != Unknown ]; then
  echo "[tx] preempted by Slurm at $tx_pt: the job requeues itself"
  printf "%s preempted %s %s %s\\n" "$tx_attempt" "$tx_rc" "$(date -d "$tx_pt" +%s 2>/dev/null || echo 0)" \\
    "$(date +%s.%N)" >> {attempts_file}
  timeout 60 scontrol requeue "$SLURM_JOB_ID"
  exit "$tx_rc"
fi""" + warn


def read_preempted(work_dir: str, attempts_name: str) -> Dict[int, Tuple[float, float, str]]:
    """``{attempt: (warned at, when its steps had ended, signal)}`` (epoch s) of the
    ``preempted`` lines of the attempts file: warned at Slurm's ``PreemptTime`` (signal
    ``""``), or by the time limit's warning ``signal`` (``USR1``)."""
    out: Dict[int, Tuple[float, float, str]] = {}
    try:
        with open(os.path.join(work_dir, attempts_name), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        words = line.split()
        if len(words) >= 5 and words[0].isdigit() and words[1] == "preempted":
            try:
                out[int(words[0])] = (float(words[3]), float(words[4]), words[5] if len(words) > 5 else "")
            except ValueError:
                continue
    return out


def preempted_reason(app_id: str, times: Tuple[float, float, str], location: Optional[str]) -> str:
    """The reason of an attempt the batch script recorded as preempted: warned at
    ``times[0]``, its steps ended at ``times[1]`` (epoch s); ``times[2]`` is the time
    limit's warning signal (``USR1``), ``""`` for a preemption."""
    since, until, sig = times
    import time

    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since)) if since > 0 else "an unknown time"
    saved = what_saved(location, since, until) if since > 0 else ""
    what = (f"preempted by its time limit (job {app_id} warned with SIG{sig} at {when})" if sig
            else f"preempted by Slurm (job {app_id} warned at {when})")
    return what + (f"; {saved}" if saved else "")
