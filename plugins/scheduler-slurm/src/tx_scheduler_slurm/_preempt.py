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
newest checkpoint's completion marker to name the step saved after the warning.
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

from tx.schedulers import what_saved

__all__ = ["parse_grace", "preempt_env", "preempted_reason", "read_preempted", "script_lines"]



def preempt_env(signal_opt: Optional[object], grace: Optional[int] = None) -> Dict[str, str]:
    """``TX_PREEMPT_SIGNAL`` and ``TX_PREEMPT_GRACE`` for ``tx.distributed.preempted()``:
    from the run option ``signal`` (``[R:|B:]SIG[@SECONDS]``: Slurm signals SECONDS before
    the time limit, 60 when omitted, as sbatch does); without it ``TX_PREEMPT_GRACE`` is the
    partition's ``GraceTime`` in seconds (``grace``; nothing where it is 0 or unknown)."""
    if signal_opt is None:
        return {"TX_PREEMPT_GRACE": str(grace)} if grace else {}
    text = str(signal_opt).split(":", 1)[1] if ":" in str(signal_opt) else str(signal_opt)
    sig, _, secs = text.partition("@")
    return {"TX_PREEMPT_SIGNAL": sig, "TX_PREEMPT_GRACE": secs or "60"}


def parse_grace(scontrol_out: str, name: Optional[str]) -> Optional[int]:
    """The ``GraceTime`` (seconds) of partition ``name`` (None: the ``Default=YES`` one) in
    ``scontrol show partition --oneliner`` output; None where it is not there."""
    for line in scontrol_out.splitlines():
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if (fields.get("PartitionName") == name) if name is not None else fields.get("Default") == "YES":
            raw = fields.get("GraceTime", "")
            return int(raw) if raw.isdigit() else None
    return None


def script_lines(attempts_file: str) -> str:
    """Batch-script lines run after ``srun`` with ``$tx_now`` (``scontrol show job -o`` of
    the job), ``$tx_attempt`` and ``$tx_rc`` set: when Slurm is preempting the job (its
    ``PreemptTime`` is set), record the attempt as preempted and requeue the job now."""
    return f"""tx_pt=$(printf '%s' "$tx_now" | grep -o 'PreemptTime=[^ ]*' | head -n 1 | cut -d= -f2-)
if [ -n "$tx_pt" ] && [ "$tx_pt" != None ] && [ "$tx_pt" != Unknown ]; then
  echo "[tx] preempted by Slurm at $tx_pt: the job requeues itself"
  printf "%s preempted %s %s %s\\n" "$tx_attempt" "$tx_rc" "$(date -d "$tx_pt" +%s 2>/dev/null || echo 0)" \\
    "$(date +%s.%N)" >> {attempts_file}
  timeout 60 scontrol requeue "$SLURM_JOB_ID"
  exit "$tx_rc"
fi"""


def read_preempted(work_dir: str, attempts_name: str) -> Dict[int, Tuple[float, float]]:
    """``{attempt: (PreemptTime, when its steps had ended)}`` (epoch s) of the ``preempted``
    lines of the attempts file."""
    out: Dict[int, Tuple[float, float]] = {}
    try:
        with open(os.path.join(work_dir, attempts_name), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        words = line.split()
        if len(words) >= 5 and words[0].isdigit() and words[1] == "preempted":
            try:
                out[int(words[0])] = (float(words[3]), float(words[4]))
            except ValueError:
                continue
    return out


def preempted_reason(app_id: str, times: Tuple[float, float], location: Optional[str]) -> str:
    """The reason of an attempt the batch script recorded as preempted: warned at
    ``times[0]``, its steps ended at ``times[1]`` (epoch s)."""
    since, until = times
    import time

    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since)) if since > 0 else "an unknown time"
    saved = what_saved(location, since, until) if since > 0 else ""
    return f"preempted by Slurm (job {app_id} warned at {when})" + (f"; {saved}" if saved else "")
