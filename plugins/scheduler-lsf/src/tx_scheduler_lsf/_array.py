"""A sweep as one LSF job array (pure): ``bsub -J "<base>-<role>-0[1-N]%<max_parallel>"``,
whose element ``i`` (``$LSB_JOBINDEX``) runs trial ``i - 1``'s script.

Trial ``i - 1``'s app id is ``<base>_<i>`` (the array's project is ``<base>``): its script
is the one :func:`tx_scheduler_lsf.request.build_request` made for it, with its own app id
replaced by ``<base>_<i>``, so that its environment (``TX_APP_ID``) and files
(``<base>_<i>-<role>-0.out``...) are those of any app. ``bjobs`` names the element
``<base>-<role>-0[i]`` in project ``<base>``; :func:`element_job` turns it into the job
``<base>_<i>-<role>-0`` of app ``<base>_<i>``.
"""
from __future__ import annotations

import re
import shlex
from typing import List, Optional

import attrs

from tx_scheduler_lsf._parse import Job
from tx_scheduler_lsf.request import LsfBsubRequest

_ELEMENT = re.compile(r"^(.*)\[(\d+)\]$")
#: a trial's app id: ``<array project>_<element index>``
TRIAL_ID = re.compile(r"^(.+)_(\d+)$")


def array_unsupported(trials: List[LsfBsubRequest]) -> Optional[str]:
    """Why these trials cannot be one job array, or None when they can."""
    if not trials:
        return "no trials"
    if any(len(t.replicas) != 1 for t in trials):
        return "an app of several replicas is several LSF jobs, which one job array cannot hold"
    first = _opts(trials[0])
    if any(_opts(t) != first or t.job_dir != trials[0].job_dir for t in trials[1:]):
        return "the trials differ in bsub options (resources, run options)"
    return None


def _opts(req: LsfBsubRequest) -> List[str]:
    """The bsub options of a single-replica request without its own names and files."""
    argv = next(iter(req.replicas.values())).bsub[1:]
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-P", "-J", "-o", "-e"):
            skip = True
            continue
        out.append(a)
    return out


@attrs.define
class LsfArrayRequest:
    """One ``bsub`` of a job array for the trials (single-replica requests with the same
    options). Attributes: ``base`` (the array's project), ``trials``, ``max_parallel``."""

    base: str
    trials: List[LsfBsubRequest]
    max_parallel: Optional[int] = None

    @property
    def job_dir(self) -> str:
        return self.trials[0].job_dir

    @property
    def role(self) -> str:
        return next(iter(self.trials[0].replicas.values())).role

    def trial_ids(self) -> List[str]:
        """Each trial's app id, in trial order: ``<base>_<i>`` for element ``i`` (from 1)."""
        return [f"{self.base}_{i}" for i in range(1, len(self.trials) + 1)]

    @property
    def bsub(self) -> List[str]:
        name = f"{self.base}-{self.role}-0[1-{len(self.trials)}]" + (f"%{self.max_parallel}" if self.max_parallel else "")
        d = self.job_dir
        return ["bsub", "-P", self.base, "-J", name, "-o", f"{d}/{self.base}-{self.role}-0.%J.%I.lsf.out",
                "-e", f"{d}/{self.base}-{self.role}-0.%J.%I.lsf.err", *_opts(self.trials[0])]

    def script(self) -> str:
        """bash: element ``$LSB_JOBINDEX`` runs its trial's script (in a subshell)."""
        cases = []
        for i, (t, app_id) in enumerate(zip(self.trials, self.trial_ids()), 1):
            body = next(iter(t.replicas.values())).script.replace(t.app_id, app_id)
            cases.append(f"  {i}) bash -c {shlex.quote(body)} ;;")
        return "#!/bin/bash\ncase \"$LSB_JOBINDEX\" in\n" + "\n".join(cases) + "\n  *) exit 1 ;;\nesac\n"

    def __repr__(self) -> str:
        return (f"cd {shlex.quote(self.job_dir)} && " + " ".join(shlex.quote(w) for w in self.bsub)
                + " <<'TX_SCRIPT'\n" + self.script() + "TX_SCRIPT\n")

    __str__ = __repr__


def element_job(job: Job) -> Job:
    """A job array element ``<base>-<role>-0[i]`` of project ``<base>`` as the job
    ``<base>_<i>-<role>-0`` of app ``<base>_<i>``; other jobs unchanged."""
    m = _ELEMENT.match(job.name)
    if not m:
        return job
    name, idx = m.group(1), m.group(2)
    base = job.project or ""
    if base and name.startswith(f"{base}-"):
        app = f"{base}_{idx}"
        job_id = job.job_id if "[" in job.job_id else f"{job.job_id}[{idx}]"
        return attrs.evolve(job, job_id=job_id, name=f"{app}{name[len(base):]}", project=app)
    return job
