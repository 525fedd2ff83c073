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

The script is one for every element: trial 0's, its app id ``${tx_app_id}``
(``<base>_$LSB_JOBINDEX``), its environment and program read from row ``$LSB_JOBINDEX - 1``
of a table file beside the job (:mod:`tx.schedulers.sweep_table`, as Slurm's and AWS
Batch's arrays), so that its size does not grow with the trials. Where the trials' scripts
differ elsewhere (or their environments in their names), one ``case`` line per element.
"""
from __future__ import annotations

import contextlib
import os
import re
import shlex
from typing import Any, List, Optional, Tuple

import attrs

from tx.schedulers import SweepTable, compact, sh_statements, split_words, table_text

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
    _template: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def template(self) -> Optional["tuple[str, SweepTable, int]"]:
        """``(script, table, exports)``: the one script of every element and the table it reads
        (computed once); None where the trials' scripts differ in more than their
        environment's values, program and app id (then :meth:`script` has a line each);
        ``exports``: how many words of a row's command are the environment's."""
        if self._template is None:
            self._template = _template(self.trials, self.trial_ids()) or False
        return self._template or None

    def table_text(self) -> str:
        """The table file's text ("" with no template or no rows' values)."""
        tpl = self.template()
        return table_text(tpl[1]) if tpl is not None and tpl[1].holes else ""

    @property
    def table_path(self) -> Optional[str]:
        """``tx-sweep-<digest>.table`` in the job directory; None: no table file."""
        text = self.table_text()
        tpl = self.template()
        if not text or tpl is None:
            return None
        return os.path.join(self.job_dir, f"tx-sweep-{tpl[1].digest(text)}.table")

    def write_table(self) -> None:
        """Write the table beside the job (before ``bsub``: the elements read it)."""
        path = self.table_path
        if path is not None:
            os.makedirs(self.job_dir, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(self.table_text())
            os.replace(tmp, path)

    def remove_table(self) -> None:
        """Remove what :meth:`write_table` wrote (bsub refused the array)."""
        path = self.table_path
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

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
        """bash: element ``$LSB_JOBINDEX`` of array ``k`` runs its trial's script: the
        template with its row of the table, else its own script (in a subshell)."""
        tpl = self.template()
        if tpl is not None:
            script, table, exports = tpl
            lines = sh_statements(table, exports, f"cat {shlex.quote(str(self.table_path))}", "the sweep's table")
            assert lines[-1].startswith("exec ")
            head = (f'tx_app_id={shlex.quote(self.base)}_"$LSB_JOBINDEX"\ni=$((LSB_JOBINDEX - 1))\n'
                    + "\n".join(lines[:-1]) + f"\ntx_argv=({lines[-1][len('exec '):]})")
            return script.replace(_EXPORTS_AT, head, 1)
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
        text = self.table_text()
        if text:
            rows = text.splitlines(keepends=True)
            out += (f"# TABLE {self.table_path} ({len(rows)} rows, {len(text)} bytes; row i: element i+1's values), "
                    f"first 3:\n" + "".join(rows[:3]))
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


#: where the template's exports are (the element's row is read there)
_EXPORTS_AT = "\x00tx-exports\x00"


def _template(trials: List[LsfBsubRequest], ids: List[str]) -> Optional["tuple[str, SweepTable, int]"]:
    """See :meth:`LsfArrayRequest.template`: each trial's script less its ``export`` lines
    and ``tx_argv=(...)`` line, its app id as ``${tx_app_id}``, must be trial 0's (and the
    app ids safe unquoted, the env names the same); the words ``K=V`` of the env and the
    program, the trial's app id as its element's, make the table."""
    scripts, words, names = [], [], None
    for t, app_id in zip(trials, ids):
        r = next(iter(t.replicas.values()))
        exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in r.env.items())
        argv = "tx_argv=(" + " ".join(shlex.quote(a) for a in r.argv) + ")\n"
        if (not r.argv or shlex.quote(t.app_id) != t.app_id or r.script.count(exports + "\n") != 1
                or r.script.count(argv) != 1):
            return None
        rest = r.script.replace(exports + "\n", _EXPORTS_AT + "\n", 1).replace(argv, "", 1)
        scripts.append(rest.replace(t.app_id, "${tx_app_id}"))
        if scripts[-1] != scripts[0] or (names is not None and list(r.env) != names):
            return None
        names = list(r.env)
        words.append([w.replace(t.app_id, app_id) for w in [f"{k}={v}" for k, v in r.env.items()] + r.argv])
    table = split_words(words)
    if table is None or any(isinstance(p, int) for w in table.template[:len(names or [])] for p in w[:1]):
        return None
    return scripts[0], compact(table, cycles=True), len(names or [])
