"""Run options of the lsf scheduler and their checks.

TorchX 0.7.0's names are kept where their meaning carries over (``lsf_queue``, ``jobdir``);
TorchX's container options (``container_workdir``, ``host_network``, ``shm_size``) do not
exist here: tx runs the replicas' programs on the hosts, as its slurm scheduler does
(docs/migrating-from-torchx.md). Values are checked at dryrun, so that a typo is a one-line
error before anything is submitted.
"""
from __future__ import annotations

import os
import re
from typing import Mapping

from tx.schedulers import add_infra_retries_opt, infra_retries
from tx.specs import InvalidRunConfigException, markdown_table, runopts

# [hours:]minutes (bsub -W)
_TIME = re.compile(r"^(?:\d{1,6}:)?\d{1,6}$")
_PLAIN = re.compile(r"^[^\s'\"\\#;&|<>()`$]+$")
# a select[] expression: no brackets or quotes that would end it or the -R string
_SELECT = re.compile(r"^[^\[\]'\"\\\n`$;]+$")


def lsf_runopts() -> runopts:
    """The options ``tx runopts lsf`` shows, all optional."""
    opts = runopts()
    opts.add("lsf_queue", type_=str, help="queue to submit to (bsub -q; default: the cluster's default queue)")
    opts.add(
        "jobdir", type_=str,
        help="directory the jobs run in and write their logs to, shared with the execution hosts "
        "(default: the current directory)",
    )
    opts.add("time", type_=str, help='run time limit of each replica: "minutes" or "hours:minutes" (bsub -W)')
    opts.add("host", type_=str, help="hosts or host groups to run on, space-separated (bsub -m)")
    opts.add(
        "select", type_=str,
        help='host selection added to the resource requirement: select[<this>] (e.g. "mem>4000 && type==X86_64")',
    )
    add_infra_retries_opt(opts)
    return opts


def check_cfg(cfg: Mapping[str, object]) -> None:
    """Check the values of resolved run options.

    Raises:
        InvalidRunConfigException: a malformed ``time``; whitespace, quotes or shell
            characters in ``lsf_queue``; quotes or brackets in ``select``; an empty
            ``jobdir``; a negative ``infra_retries``.
    """
    infra_retries(cfg)
    time = cfg.get("time")
    if time is not None and not _TIME.match(str(time)):
        raise InvalidRunConfigException(
            f"run option 'time' must be minutes or hours:minutes (bsub -W), got {time!r}", "time", cfg)
    queue = cfg.get("lsf_queue")
    if queue is not None and not _PLAIN.match(str(queue)):
        raise InvalidRunConfigException(
            f"run option 'lsf_queue' must be one queue name without spaces or quotes, got {queue!r}", "lsf_queue", cfg)
    host = cfg.get("host")
    if host is not None and (not str(host).strip() or not all(_PLAIN.match(h) for h in str(host).split())):
        raise InvalidRunConfigException(
            f"run option 'host' must be host or host group names separated by spaces, got {host!r}", "host", cfg)
    select = cfg.get("select")
    if select is not None and (not str(select).strip() or not _SELECT.match(str(select))):
        raise InvalidRunConfigException(
            f"run option 'select' must be a select[] expression without brackets or quotes, got {select!r}",
            "select", cfg)
    job_dir = cfg.get("jobdir")
    if job_dir is not None and not str(job_dir).strip():
        raise InvalidRunConfigException("run option 'jobdir' must not be empty", "jobdir", cfg)


def jobdir_of(cfg: Mapping[str, object]) -> str:
    """The absolute directory the jobs run in: ``jobdir`` or the current directory."""
    job_dir = cfg.get("jobdir")
    return os.path.abspath(str(job_dir)) if job_dir else os.getcwd()


def runopts_markdown() -> str:
    """The run options as the Markdown table of the README (option, type, default, help)."""
    return markdown_table(lsf_runopts())
