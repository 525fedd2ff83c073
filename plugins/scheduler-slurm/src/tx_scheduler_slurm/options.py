"""Run options of the slurm scheduler (TorchX's names) and their checks.

Formats are sbatch's (https://slurm.schedmd.com/sbatch.html): ``time`` as for ``--time``,
``mail-type`` as for ``--mail-type``. Values are checked at dryrun so that a typo is a
one-line error before anything is submitted.
"""
from __future__ import annotations

import os
import re
from typing import Mapping

from tx.schedulers import add_infra_retries_opt, infra_retries
from tx.specs import InvalidRunConfigException, markdown_table, runopts

from tx_scheduler_slurm._parse import parse_time_min

#: the longest ``time`` accepted: 365 days (Slurm would store a larger one as nonsense)
MAX_TIME_MIN = 365 * 24 * 60

#: ``--mail-type`` values (https://slurm.schedmd.com/sbatch.html#OPT_mail-type)
MAIL_TYPES = frozenset({
    "NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT",
    "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS",
})

# minutes | minutes:seconds | hours:minutes:seconds | days-hours | days-hours:minutes |
# days-hours:minutes:seconds | UNLIMITED/INFINITE
_TIME = re.compile(r"^(?:\d+(?::\d+){0,2}|\d+-\d+(?::\d+){0,2}|UNLIMITED|INFINITE)$", re.IGNORECASE)
_PLAIN = re.compile(r"^[^\s'\"\\#]+$")
# [R:|B:]SIG[@SECONDS]: a signal number or name (https://slurm.schedmd.com/sbatch.html#OPT_signal)
_SIGNAL = re.compile(r"^(?:[RB]{1,2}:)?(?:\d{1,2}|(?:SIG)?[A-Z][A-Z0-9+]*)(?:@\d{1,5})?$")
# after:1, afterok:1:2, afterany:1+5, afternotok, aftercorr, singleton; , or ? between
_DEP_ITEM = r"(?:singleton|after(?:any|burstbuffer|corr|notok|ok)?:\d+(?:_\d+)?(?:\+\d+)?(?::\d+(?:_\d+)?(?:\+\d+)?)*)"
_DEPENDENCY = re.compile(rf"^{_DEP_ITEM}(?:[,?]{_DEP_ITEM})*$")


def slurm_runopts() -> runopts:
    """The options ``tx runopts slurm`` shows, all optional strings."""
    opts = runopts()
    opts.add("partition", type_=str, help="partition to run in; a,b lists several (default: the cluster's default partition)")
    opts.add(
        "time", type_=str,
        help='time limit of the job: "minutes", "minutes:seconds", "hours:minutes:seconds", '
        '"days-hours", "days-hours:minutes" or "days-hours:minutes:seconds"',
    )
    opts.add("account", type_=str, help="account to charge the job to")
    opts.add("comment", type_=str, help="comment to set on the job")
    opts.add("constraint", type_=str, help="node features the job needs (sbatch --constraint)")
    opts.add("mail-user", type_=str, help="user to mail on job events")
    opts.add("mail-type", type_=str, help="events to mail on: NONE, BEGIN, END, FAIL, REQUEUE, ALL, ... (comma-separated)")
    opts.add(
        "job_dir", type_=str,
        help="directory the job runs in and writes its logs to; with a workspace it must not "
        "exist and receives a copy of the workspace (default: the current directory)",
    )
    opts.add("qos", type_=str, help="quality of service of the job")
    opts.add("exclusive", type_=bool, default=False, help="nodes only for this job, shared with no other job (sbatch --exclusive)")
    opts.add(
        "nodelist", type_=str,
        help="nodes to run on, one per replica in role order (node1,node2 or node[1-2]; sbatch --nodelist per component)",
    )
    opts.add("exclude", type_=str, help="nodes never to run on (node3,node[5-6]; sbatch --exclude)")
    opts.add("gres", type_=str, help="generic resources per node besides GPUs from the role's resource (gpu:a100:1,nvme:1; sbatch --gres)")
    opts.add("reservation", type_=str, help="reservation to run in (sbatch --reservation)")
    opts.add("dependency", type_=str, help="start after other jobs: afterok:123,afterany:124 ... (sbatch --dependency)")
    opts.add(
        "signal", type_=str,
        help="signal the replicas this many seconds before the time limit: SIG@SECONDS, e.g. USR1@120 (sbatch --signal)",
    )
    opts.add(
        "requeue", type_=bool,
        help="let Slurm requeue the job after a node failure or preemption (default: when max_retries > 0 "
        "or infra_retries > 0); False is sbatch --no-requeue (no retry after a node failure then)",
    )
    add_infra_retries_opt(opts)
    return opts


def check_cfg(cfg: Mapping[str, object]) -> None:
    """Check the values of resolved run options.

    Raises:
        InvalidRunConfigException: a malformed ``time`` or ``mail-type``, an empty
            ``job_dir``, or whitespace/quotes in ``partition``, ``constraint``, ``qos``
            or ``account`` (they go into ``#SBATCH`` lines and sbatch arguments), a
            negative ``infra_retries``.
    """
    infra_retries(cfg)
    time = cfg.get("time")
    if time is not None and not _TIME.match(str(time)):
        raise InvalidRunConfigException(
            f"run option 'time' must be minutes, minutes:seconds, hours:minutes:seconds, "
            f"days-hours, days-hours:minutes or days-hours:minutes:seconds, got {time!r}",
            "time", cfg,
        )
    minutes = parse_time_min(str(time)) if time is not None else None
    if minutes is not None and minutes > MAX_TIME_MIN:
        raise InvalidRunConfigException(
            f"run option 'time' is {minutes} minutes, more than {MAX_TIME_MIN // (60 * 24)} days: "
            "use UNLIMITED for no limit", "time", cfg,
        )
    mail = cfg.get("mail-type")
    if mail is not None:
        bad = [t for t in str(mail).split(",") if t.strip().upper() not in MAIL_TYPES]
        if bad or not str(mail).strip():
            raise InvalidRunConfigException(
                f"run option 'mail-type' has unknown event(s) {', '.join(map(repr, bad)) or repr(mail)}: "
                f"use {', '.join(sorted(MAIL_TYPES))}",
                "mail-type", cfg,
            )
    signal = cfg.get("signal")
    if signal is not None and not _SIGNAL.match(str(signal)):
        raise InvalidRunConfigException(
            f"run option 'signal' must be SIG@SECONDS (USR1@120, 10@60; optional R: or B: first), got {signal!r}",
            "signal", cfg,
        )
    dep = cfg.get("dependency")
    if dep is not None and not _DEPENDENCY.match(str(dep)):
        raise InvalidRunConfigException(
            f"run option 'dependency' must be TYPE:JOBID[:JOBID...] joined by ',' or '?' "
            f"(afterok:123, afterany:12:13, singleton), got {dep!r}",
            "dependency", cfg,
        )
    for key in ("partition", "constraint", "qos", "account", "nodelist", "exclude", "gres", "reservation"):
        value = cfg.get(key)
        if value is not None and not _PLAIN.match(str(value)):
            raise InvalidRunConfigException(
                f"run option {key!r} must be non-empty without spaces, quotes, '\\' or '#', got {value!r}",
                key, cfg,
            )
    for key in ("comment", "mail-user"):
        value = cfg.get(key)
        if value is not None and ("\n" in str(value) or "\r" in str(value)):
            raise InvalidRunConfigException(f"run option {key!r} must be one line, got {value!r}", key, cfg)
    job_dir = cfg.get("job_dir")
    if job_dir is not None and not str(job_dir).strip():
        raise InvalidRunConfigException("run option 'job_dir' must not be empty", "job_dir", cfg)


def workdir_of(cfg: Mapping[str, object]) -> str:
    """The absolute directory the job will run in: ``job_dir`` or the current directory."""
    job_dir = cfg.get("job_dir")
    return os.path.abspath(str(job_dir)) if job_dir else os.getcwd()


def runopts_markdown() -> str:
    """The run options as the Markdown table of the README (option, type, default, help)."""
    return markdown_table(slurm_runopts())
