"""Sweeps on Slurm as job arrays (https://slurm.schedmd.com/job_array.html): one ``sbatch
--array`` whose tasks are the trials (the fewest arrays where the trials are more than the
cluster's ``MaxArraySize``), the trials' varying words in one table file beside the job
(:mod:`tx.schedulers.sweep_table`)."""
from __future__ import annotations

import contextlib
import os
import re
import shlex
from typing import Any, Dict, Iterable, List, Optional, Tuple

import attrs

from tx.schedulers import SweepTable, split_words

from tx_scheduler_slurm.request import APP_ID_SHELL, SlurmBatchRequest, shell_word

__all__ = ["ARRAY_APP_ID_LINE", "ARRAY_APP_ID_SHELL", "SlurmArrayRequest", "array_unsupported", "scancel_words"]


# -- sweeps: job arrays ------------------------------------------------------------------

#: what ``${app_id}`` becomes in an array's script: ``<array job id>_<task id>``, the id
#: squeue, sacct and scancel name a task by (each task's ``$SLURM_JOB_ID`` is its own)
ARRAY_APP_ID_SHELL = '"$tx_app_id"'
ARRAY_APP_ID_LINE = 'tx_app_id="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"'


_TASK = re.compile(r"^(\d+)_(\d+)$")
#: index ranges in one ``<array>_[...]`` word of :func:`scancel_words` (a word stays far
#: below the kernel's 128 KiB limit of one argument)
RANGES_PER_WORD = 2000


def scancel_words(app_ids: Iterable[str]) -> List[str]:
    """``app_ids`` as ``scancel``'s job words, each array's tasks folded into Slurm's array
    expression ``<array>_[0-99,105]`` (https://slurm.schedmd.com/scancel.html: "1234_[1-4,8]");
    other ids as they are, in their first order. 10,000 tasks of one array are one word,
    where they were 20 ``scancel`` calls of 500 ids."""
    words: List[str] = []
    tasks: Dict[str, List[int]] = {}
    for app_id in app_ids:
        m = _TASK.match(app_id)
        if m is None:
            words.append(app_id)
        else:
            if m.group(1) not in tasks:
                words.append(m.group(1) + "_")  # a placeholder, keeping the first order
            tasks.setdefault(m.group(1), []).append(int(m.group(2)))
    out: List[str] = []
    for word in words:
        if not word.endswith("_"):
            out.append(word)
            continue
        ranges: List[str] = []
        ids = sorted(set(tasks[word[:-1]]))
        start = prev = ids[0]
        for i in ids[1:] + [-2]:
            if i != prev + 1:
                ranges.append(str(start) if start == prev else f"{start}-{prev}")
                start = i
            prev = i
        out.extend(f"{word}[{','.join(ranges[k:k + RANGES_PER_WORD])}]" for k in range(0, len(ranges), RANGES_PER_WORD))
    return out


def _quoted(word: str) -> str:
    """``word`` for the array's script and table: :func:`shell_word`, ``${app_id}`` as the
    task's array id."""
    return shell_word(word).replace(APP_ID_SHELL, ARRAY_APP_ID_SHELL)


def array_unsupported(trials: List[SlurmBatchRequest]) -> Optional[str]:
    """Why these trials cannot be one job array (Slurm has no arrays of heterogeneous jobs,
    and one array has one set of ``#SBATCH`` options), or None when they can."""
    if not trials:
        return "no trials"
    if any(len(t.replicas) != 1 for t in trials):
        return "an app of several replicas is a heterogeneous job, which Slurm cannot put in an array"
    first = trials[0]
    line = next(iter(first.replicas.values())).sbatch_line()
    for t in trials[1:]:
        if t.cmd != first.cmd or t.job_dir != first.job_dir or t.max_retries != first.max_retries \
                or next(iter(t.replicas.values())).sbatch_line() != line:
            return "the trials differ in sbatch options (resources, run options)"
    return None


@attrs.define
class SlurmArrayRequest:
    """A sweep as one job array (https://slurm.schedmd.com/job_array.html): one ``sbatch
    --array=0-<N-1>[%<max_parallel>]`` whose script runs trial ``$SLURM_ARRAY_TASK_ID``'s
    ``srun`` line. Trial ``i``'s app id is ``<array job id>_<i>``; its replica files are
    ``slurm-<array job id>_<i>-<role>-0.*``, as any app's.

    More trials than ``max_array_size`` (the cluster's ``MaxArraySize``: task ids run up to
    one less) are the fewest arrays (:attr:`arrays`): array ``k`` holds trials ``offset_k``
    to ``offset_k + size_k - 1``, its task ``i`` runs trial ``offset_k + i`` (app id
    ``<array k's job id>_<i>``); with ``max_parallel`` each array waits for the one before
    to end (``--dependency=afterany``), so that at most ``max_parallel`` run at once.

    Attributes:
        trials: each trial's own request (single-replica, the same sbatch options).
        max_parallel: the most tasks running at once (``%``), None for no bound.
        max_array_size: the cluster's ``MaxArraySize`` (None: one array, however many).
    """

    trials: List[SlurmBatchRequest]
    max_parallel: Optional[int] = None
    max_array_size: Optional[int] = None
    _table: Any = attrs.field(default=None, init=False, repr=False, eq=False)
    _path: Optional[str] = attrs.field(default=None, init=False, repr=False, eq=False)
    _text: Optional[str] = attrs.field(default=None, init=False, repr=False, eq=False)

    @property
    def arrays(self) -> List[Tuple[int, int]]:
        """``(offset, size)`` of each array: the trials in runs of at most
        ``max_array_size``, in trial order."""
        n = len(self.trials)
        size = self.max_array_size if self.max_array_size and self.max_array_size > 0 else n
        return [(o, min(size, n - o)) for o in range(0, n, size)]

    def array_cmd(self, k: int = 0, after: Optional[str] = None) -> List[str]:
        """Array ``k``'s ``sbatch ... --array=0-<size-1>[%<max_parallel>]``, after the
        job ``after`` has ended where given (``--dependency=afterany:<after>``)."""
        size = self.arrays[k][1]
        spec = f"0-{size - 1}" + (f"%{self.max_parallel}" if self.max_parallel else "")
        return [*self.trials[0].cmd, f"--array={spec}", *([f"--dependency=afterany:{after}"] if after else [])]

    @property
    def cmd(self) -> List[str]:
        """The (first) array's ``sbatch ... --array=0-<N-1>[%<max_parallel>]``."""
        return self.array_cmd(0)

    def split_line(self) -> str:
        """The one line that says the sweep is several arrays ("" for one)."""
        arrays = self.arrays
        if len(arrays) < 2:
            return ""
        chained = (f"; each starts after the one before has ended, so that at most {self.max_parallel} run at once"
                   if self.max_parallel else "")
        return (f"slurm: {len(self.trials)} trials as {len(arrays)} job arrays of at most {self.max_array_size} "
                f"tasks (the cluster's MaxArraySize){chained}")

    @property
    def job_dir(self) -> Optional[str]:
        return self.trials[0].job_dir

    @property
    def workdir(self) -> str:
        return self.trials[0].workdir

    @property
    def table(self) -> Optional[SweepTable]:
        """The trials' srun words as one template and a table of what differs
        (:func:`tx.schedulers.sweep_table.split_words`); None when the trials' srun lines
        differ in their number of words (then the script holds one line per trial)."""
        if self._table is None:
            words = [next(iter(t.replicas.values())).srun_raw_words() for t in self.trials]
            self._table = split_words(words) or False
        return self._table or None

    def table_text(self) -> str:
        """The table file's text: row ``i`` (line ``i + 1``) is trial ``i``'s values,
        shell-quoted and separated by spaces ("" with no table); made once (the table
        path's digest and the file both need it)."""
        if self._text is None:
            table = self.table
            self._text = "" if table is None else "".join(" ".join(_quoted(v) for v in row) + "\n"
                                                          for row in table.rows)
        return self._text

    @property
    def table_path(self) -> Optional[str]:
        """Where :meth:`write_table` puts the table: ``tx-sweep-<digest>.table`` in the
        job's directory, which every task reads (its logs land there too); None: no table."""
        if self.table is None:
            return None
        if self._path is None:
            self._path = os.path.join(self.workdir, f"tx-sweep-{self.table.digest(self.table_text())}.table")
        return self._path

    def write_table(self) -> None:
        """Write the table beside the job (before ``sbatch``: the tasks read it)."""
        path = self.table_path
        if path is not None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(self.table_text())
            os.replace(tmp, path)

    def remove_table(self) -> None:
        """Remove the table :meth:`write_table` wrote (``sbatch`` refused the array)."""
        path = self.table_path
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def materialize(self, k: int = 0) -> str:
        """Array ``k``'s batch script: trial 0's, with its ``srun`` line replaced by the
        words every trial shares and, at the others, row ``offset + $SLURM_ARRAY_TASK_ID``
        of the table file (:attr:`table_path`), so that its size does not grow with the
        trials. Where the trials' lines differ in length, one line per trial of the array
        selected by ``$SLURM_ARRAY_TASK_ID``. ``${app_id}`` is the task's array id."""
        first = self.trials[0]
        offset, size = self.arrays[k]
        script = first.materialize().replace(
            "# Run with: " + " ".join(shlex.quote(c) for c in first.cmd),
            "# Run with: " + " ".join(shlex.quote(c) for c in self.array_cmd(k)), 1)
        srun0 = "srun " + " ".join(next(iter(first.replicas.values())).srun_words())
        assert script.count(srun0) == 1
        script = script.replace(APP_ID_SHELL, ARRAY_APP_ID_SHELL)
        srun0 = srun0.replace(APP_ID_SHELL, ARRAY_APP_ID_SHELL)
        table = self.table
        if table is not None:
            words = " ".join("".join(f'"${{tx_words[{p}]}}"' if isinstance(p, int) else _quoted(p) for p in w)
                             for w in table.template)
            lookup = (f"tx_table={shlex.quote(str(self.table_path))}\n"
                      f'if tx_row=$(sed -n "$((SLURM_ARRAY_TASK_ID + {offset + 1}))p" "$tx_table") && [ -n "$tx_row" ] '
                      '&& eval "tx_words=($tx_row)"; then\n'
                      f"  srun {words}\n"
                      'else\n  echo "[tx] no row $SLURM_ARRAY_TASK_ID in $tx_table" >&2\n  false\nfi')
            script = script.replace(srun0, lookup)
        else:
            cases = "".join(
                f"  {i}) srun {' '.join(next(iter(t.replicas.values())).srun_words())} ;;\n"
                for i, t in enumerate(self.trials[offset:offset + size])).replace(APP_ID_SHELL, ARRAY_APP_ID_SHELL)
            script = script.replace(srun0, f'case "$SLURM_ARRAY_TASK_ID" in\n{cases}  *) false ;;\nesac')
        head, sep, rest = script.partition("\nexport PYTHONUNBUFFERED=1\n")
        return f"{head}\n{ARRAY_APP_ID_LINE}{sep}{rest}"

    def table_head(self, rows: int = 3) -> str:
        """What the dryrun shows of the table: its path, size and first ``rows`` rows."""
        table = self.table
        if table is None:
            return ""
        text = self.table_text()
        shown = "".join(text.splitlines(keepends=True)[:rows])
        return (f"\n#----------------\n# TABLE {self.table_path} ({len(table.rows)} rows, {len(text)} bytes; "
                f"row i: trial i's words at the script's tx_words), first {rows}:\n"
                f"#----------------\n{shown}")

    def __repr__(self) -> str:
        arrays = self.arrays
        if len(arrays) < 2:
            return (
                " ".join(shlex.quote(c) for c in self.cmd) + " $SBATCH_SCRIPT\n\n"
                "#----------------\n# SBATCH_SCRIPT\n#----------------\n" + self.materialize() + self.table_head()
            )
        cmds = "".join(
            " ".join(shlex.quote(c) for c in self.array_cmd(k, f"<array {k - 1}>" if k and self.max_parallel else None))
            + f" $SBATCH_SCRIPT_{k}    # trials {o}-{o + n - 1}\n" for k, (o, n) in enumerate(arrays))
        return (f"# {self.split_line()}\n{cmds}\n#----------------\n# SBATCH_SCRIPT_0 (array k's reads row "
                "offset_k + $SLURM_ARRAY_TASK_ID + 1)\n#----------------\n" + self.materialize(0) + self.table_head())

    __str__ = __repr__
