"""Run options of the slurm scheduler (TorchX's names) and their checks.

Formats are sbatch's (https://slurm.schedmd.com/sbatch.html): ``time`` as for ``--time``,
``mail-type`` as for ``--mail-type``. Values are checked at dryrun so that a typo is a
one-line error before anything is submitted.
"""
from __future__ import annotations

import os
import re
from typing import Mapping

from tx.specs import InvalidRunConfigException, runopts
from tx.specs.runopts import get_type_name

#: ``--mail-type`` values (https://slurm.schedmd.com/sbatch.html#OPT_mail-type)
MAIL_TYPES = frozenset({
    "NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT",
    "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS",
})

# minutes | minutes:seconds | hours:minutes:seconds | days-hours | days-hours:minutes |
# days-hours:minutes:seconds | UNLIMITED/INFINITE
_TIME = re.compile(r"^(?:\d+(?::\d+){0,2}|\d+-\d+(?::\d+){0,2}|UNLIMITED|INFINITE)$", re.IGNORECASE)
_PLAIN = re.compile(r"^[^\s'\"\\#]+$")


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
    return opts


def check_cfg(cfg: Mapping[str, object]) -> None:
    """Check the values of resolved run options.

    Raises:
        InvalidRunConfigException: a malformed ``time`` or ``mail-type``, an empty
            ``job_dir``, or whitespace/quotes in ``partition``, ``constraint``, ``qos``
            or ``account`` (they go into ``#SBATCH`` lines and sbatch arguments).
    """
    time = cfg.get("time")
    if time is not None and not _TIME.match(str(time)):
        raise InvalidRunConfigException(
            f"run option 'time' must be minutes, minutes:seconds, hours:minutes:seconds, "
            f"days-hours, days-hours:minutes or days-hours:minutes:seconds, got {time!r}",
            "time", cfg,
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
    for key in ("partition", "constraint", "qos", "account"):
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
    rows = ["| option | type | default | description |", "| --- | --- | --- | --- |"]
    for key, opt in slurm_runopts():
        rows.append(f"| `{key}` | {get_type_name(opt.opt_type)} | {opt.default!r} | {opt.help} |")
    return "\n".join(rows) + "\n"
