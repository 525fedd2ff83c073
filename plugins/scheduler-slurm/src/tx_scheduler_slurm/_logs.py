"""Replica logs of ``slurm``: reading a replica's log file
(``slurm-<jobid>-<role>-<replica>.{out,err}`` in the job's working directory), once or
following it until the app ends. :class:`LogFiles` is the log half of
:class:`tx_scheduler_slurm.scheduler.SlurmScheduler`.
"""
from __future__ import annotations

import datetime as _dt
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, List, Optional, Tuple

from tx import get_logger
from tx.schedulers import SchedulerError, Stream, filter_regex, follow_file, split_lines
from tx.specs import AppState, is_terminal

from tx_scheduler_slurm import _index
from tx_scheduler_slurm._client import SlurmError
from tx_scheduler_slurm._parse import APP_ID, JobRecord
from tx_scheduler_slurm._states import appstate_from_slurm
from tx_scheduler_slurm._status import group_replicas
from tx_scheduler_slurm.request import log_file

log = get_logger(__name__)



#: seconds between squeue calls while following a log whose replica has not ended
FOLLOW_CHECK_S = 10.0


class LogFiles:
    """``log_iter`` and ``log_iter_blocks`` of the ``slurm`` scheduler: the replica's
    ``slurm-<jobid>-<role>-<replica>.{out,err}`` in the job's working directory, over the
    scheduler class's Slurm records (``_records``)."""

    if TYPE_CHECKING:  # the scheduler class defines it
        def _records(self, app_id: str) -> Tuple[List[JobRecord], str]: ...

    def _log_path(self, app_id: str, role_name: str, k: int, streams: Optional[Any]) -> str:
        """The replica's log file: in the job directory from the on-disk index
        (:mod:`tx_scheduler_slurm._index`, no Slurm call), else the current directory where
        the file is there, else the directory squeue reports."""
        stream = Stream(streams) if streams is not None else Stream.STDOUT
        if stream == Stream.COMBINED:
            raise ValueError(
                "the slurm scheduler keeps stdout and stderr in separate files: "
                "use streams=stdout or streams=stderr"
            )
        ext = "out" if stream == Stream.STDOUT else "err"
        name = log_file(app_id, role_name, k, ext)
        entry = _index.lookup(app_id) if APP_ID.match(app_id) else None
        if entry is not None:
            work_dir, replicas = entry
            if (role_name, k) not in replicas:
                known = ", ".join(f"{r}/{i}" for r, i in replicas)
                raise ValueError(f"app {app_id} has no replica {role_name}/{k}; replicas: {known}")
            return os.path.join(work_dir, name)
        if os.path.exists(name):
            return os.path.abspath(name)
        records = self._records(app_id)[0]
        work_dir = os.getcwd()
        if records and not min(records, key=lambda r: r.offset).is_tx:
            raise SchedulerError(
                f"job {app_id} was not submitted by tx: its output is where its own sbatch put it "
                f"(scontrol show job {app_id}: StdOut)"
            )
        if records:
            by_role = group_replicas(records)
            if not any(idx == k for idx, _ in by_role.get(role_name, [])):
                known = ", ".join(f"{r}/{i}" for r, reps in by_role.items() for i, _ in reps)
                raise ValueError(f"app {app_id} has no replica {role_name}/{k}; replicas: {known}")
            work_dir = min(records, key=lambda r: r.offset).work_dir or work_dir
        return os.path.join(work_dir, name)

    def _started(self, app_id: str) -> bool:
        """Whether the job ran (is not pending nor unknown to Slurm): one squeue call."""
        records = self._records(app_id)[0]
        if not records:
            return False
        state = appstate_from_slurm(min(records, key=lambda r: r.offset).state)
        return state not in (AppState.PENDING, AppState.UNKNOWN, AppState.SUBMITTED)

    def _done(self, app_id: str, path: str) -> Callable[[], bool]:
        """For ``tx log -f``: the app is terminal. Asks squeue only when the replica's
        ``.exitcode`` file changed or every :data:`FOLLOW_CHECK_S` seconds, not at each poll;
        while Slurm does not answer (slurmctld down) the log is followed on."""
        exit_path = path.rsplit(".", 1)[0] + ".exitcode"
        last = {"mtime": -1.0, "asked": 0.0}  # the first check asks squeue

        def done() -> bool:
            mtime = _mtime(exit_path)
            now = time.monotonic()
            if mtime == last["mtime"] and now - last["asked"] < FOLLOW_CHECK_S:
                return False
            last["mtime"], last["asked"] = mtime, now
            try:
                records = self._records(app_id)[0]
            except SlurmError as e:  # slurmctld down: keep following, ask again later
                log.warning(f"slurm: cannot tell whether app {app_id} ended ({e}); following its log on")
                return False
            if not records:
                return True
            return is_terminal(appstate_from_slurm(min(records, key=lambda r: r.offset).state))

        return done

    def log_iter_blocks(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[bytes]:
        """The replica's log file as byte blocks of whole lines; with ``should_tail``,
        followed until the app is terminal (requeues included).

        Args:
            streams: ``stdout`` (default: the program's output) or ``stderr``.

        Raises:
            ValueError: ``streams`` is ``combined``, or the app has no such replica.
            SchedulerError: the job ran but its log file is gone.
        """
        path = self._log_path(app_id, role_name, k, streams)
        if not should_tail and not os.path.exists(path) and self._started(app_id):
            raise SchedulerError(
                f"log file {path} of app {app_id} does not exist although the job ran: it was "
                "deleted, or the job directory is not shared with this machine"
            )
        return follow_file(path, self._done(app_id, path) if should_tail else None)

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[_dt.datetime] = None,
        until: Optional[_dt.datetime] = None,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[str]:
        """Lines (each with its ``\\n``) of ``slurm-<app_id>-<role>-<k>.out`` (or ``.err``).

        Args:
            regex: keep only lines where it is found.
            since, until: ignored: Slurm's log files carry no times (logged at debug level).
            should_tail: follow the file until the app is terminal.
            streams: ``stdout`` (default) or ``stderr``; ``combined`` is not kept.

        Raises:
            ValueError: ``streams`` is ``combined``, or the app has no such replica.
        """
        if since or until:
            log.debug("slurm_log_times_ignored", app_id=app_id)
        blocks = self.log_iter_blocks(app_id, role_name, k, should_tail, streams)
        return filter_regex(regex, _lines(blocks))


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _lines(blocks: Iterable[bytes]) -> Iterator[str]:
    for block in blocks:
        yield from split_lines(block.decode("utf-8", "replace"))
