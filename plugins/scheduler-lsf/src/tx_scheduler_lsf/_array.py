"""A sweep as one LSF job array (pure): ``bsub -J "<base>-<role>-0[1-N]%<max_parallel>"``,
whose element ``i`` (``$LSB_JOBINDEX``) runs trial ``i - 1``'s script.

Trial ``i - 1``'s app id is ``<base>_<i>`` (the array's project is ``<base>``): its script
is the one :func:`tx_scheduler_lsf.request.build_request` made for it, with its own app id
replaced by ``<base>_<i>``, so that its environment (``TX_APP_ID``) and files
(``<base>_<i>-<role>-0.out``...) are those of any app. ``bjobs`` names the element
``<base>-<role>-0[i]`` in project ``<base>``; :func:`element_job` turns it into the job
``<base>_<i>-<role>-0`` of app ``<base>_<i>``.

More trials than the cluster's ``MAX_JOB_ARRAY_SIZE`` are the fewest arrays of the same name
and project, over consecutive ranges of the same indices (``[1-1000]``, ``[1001-2000]``...),
so that every trial keeps its element index and app id; with ``max_parallel`` each array
waits for the one before to end (``-w "ended(<its job id>)"``).
"""
from __future__ import annotations

import re
import shlex
from typing import List, Optional, Tuple

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
    options), one per :attr:`arrays` where they are more than ``max_array_size``.
    Attributes: ``base`` (the arrays' project), ``trials``, ``max_parallel``,
    ``max_array_size`` (the cluster's ``MAX_JOB_ARRAY_SIZE``; None: one array)."""

    base: str
    trials: List[LsfBsubRequest]
    max_parallel: Optional[int] = None
    max_array_size: Optional[int] = None

    @property
    def arrays(self) -> List[Tuple[int, int]]:
        """``(first, last)`` element index of each array (from 1; trial ``i`` is element
        ``i + 1`` whatever its array)."""
        n = len(self.trials)
        size = self.max_array_size if self.max_array_size and self.max_array_size > 0 else n
        return [(o + 1, min(o + size, n)) for o in range(0, n, size)]

    def split_line(self) -> str:
        """The one line that says the sweep is several arrays ("" for one)."""
        arrays = self.arrays
        if len(arrays) < 2:
            return ""
        chained = (f"; each starts after the one before has ended, so that at most {self.max_parallel} run at once"
                   if self.max_parallel else "")
        return (f"lsf: {len(self.trials)} trials as {len(arrays)} job arrays of at most {self.max_array_size} "
                f"elements (the cluster's MAX_JOB_ARRAY_SIZE){chained}")

    @property
    def job_dir(self) -> str:
        return self.trials[0].job_dir

    @property
    def role(self) -> str:
        return next(iter(self.trials[0].replicas.values())).role

    def trial_ids(self) -> List[str]:
        """Each trial's app id, in trial order: ``<base>_<i>`` for element ``i`` (from 1)."""
        return [f"{self.base}_{i}" for i in range(1, len(self.trials) + 1)]

    def array_bsub(self, k: int = 0, after: Optional[str] = None) -> List[str]:
        """Array ``k``'s ``bsub``, after the job ``after`` has ended where given."""
        first, last = self.arrays[k]
        name = f"{self.base}-{self.role}-0[{first}-{last}]" + (f"%{self.max_parallel}" if self.max_parallel else "")
        d = self.job_dir
        return ["bsub", "-P", self.base, "-J", name, "-o", f"{d}/{self.base}-{self.role}-0.%J.%I.lsf.out",
                "-e", f"{d}/{self.base}-{self.role}-0.%J.%I.lsf.err", *(["-w", f"ended({after})"] if after else []),
                *_opts(self.trials[0])]

    @property
    def bsub(self) -> List[str]:
        """The (first) array's ``bsub``."""
        return self.array_bsub(0)

    def script(self, k: int = 0) -> str:
        """bash: element ``$LSB_JOBINDEX`` of array ``k`` runs its trial's script (in a subshell)."""
        first, last = self.arrays[k]
        cases = []
        ids = self.trial_ids()
        for i in range(first, last + 1):
            t = self.trials[i - 1]
            body = next(iter(t.replicas.values())).script.replace(t.app_id, ids[i - 1])
            cases.append(f"  {i}) bash -c {shlex.quote(body)} ;;")
        return "#!/bin/bash\ncase \"$LSB_JOBINDEX\" in\n" + "\n".join(cases) + "\n  *) exit 1 ;;\nesac\n"

    def __repr__(self) -> str:
        out = f"# {self.split_line()}\n" if len(self.arrays) > 1 else ""
        for k in range(len(self.arrays)):
            after = f"<array {k - 1}>" if k and self.max_parallel else None
            out += (f"cd {shlex.quote(self.job_dir)} && " + " ".join(shlex.quote(w) for w in self.array_bsub(k, after))
                    + " <<'TX_SCRIPT'\n" + self.script(k) + "TX_SCRIPT\n")
        return out

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
