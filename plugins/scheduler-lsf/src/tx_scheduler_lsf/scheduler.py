"""The ``lsf`` scheduler: apps as one LSF batch job per replica (IBM Spectrum LSF 10, and
the subset of LSF that OpenLava speaks).

* submit: one ``bsub`` per replica (:mod:`tx_scheduler_lsf.request`), rank 0's first, run
  in the job directory; the app id (``<app name>-<random id>``, handle
  ``lsf://<session>/<app id>``) is the LSF project of every job. A bsub that fails kills
  the jobs already submitted: nothing is left behind.
* status: ``bjobs -a -noheader -w -P <app id>``, and ``bjobs -l`` for the app's pending
  and exited jobs (pending reasons, exit code, LSF 10's termination reason), with the
  replicas' files in the job directory (:mod:`tx_scheduler_lsf._status`). LSF forgets
  finished jobs after ``CLEAN_PERIOD`` (an hour by default): the app is then unknown.
* logs: ``<app id>-<role>-<k>.{out,err}`` in the job directory, which must be visible from
  here (a shared filesystem, as on any LSF cluster): :mod:`tx_scheduler_lsf._logs`.
* cancel: ``bkill`` of the app's unfinished jobs. list: one ``bjobs -a -l``, jobs grouped
  by project.

Before its first bsub or bjobs the scheduler asks the cluster what it speaks (``lsid``, once
per process: :func:`tx_scheduler_lsf._client.capabilities`) and uses LSF 10's forms on IBM
LSF 10 only, never an option that another LSF would misread.
"""
from __future__ import annotations

import os
import re

import attrs
from typing import Any, Dict, List, Mapping, Optional, Sequence

from tx import get_logger
from tx.schedulers import (
    DescribeAppResponse, ListAppResponse, Scheduler, clean_name, make_unique, read_text, write_atomic)
from tx.specs import AppDef, AppDryRunInfo, AppState, CfgVal, read_stored_appdef_and_options, runopts

from tx_scheduler_lsf import _client, _index
from tx_scheduler_lsf._array import TRIAL_ID, LsfArrayRequest, array_unsupported, element_job
from tx_scheduler_lsf._client import (
    Capabilities, LsfCommandError, LsfError, LsfNotInstalledError, LsfTimeoutError, capabilities, lsf_conf,
)
from tx_scheduler_lsf._logs import LogFiles
from tx_scheduler_lsf._parse import Job, appstate_from_lsf, parse_bjobs_l, parse_bjobs_w, split_job_name
from tx_scheduler_lsf._status import build_describe
from tx_scheduler_lsf.options import check_cfg, jobdir_of, lsf_runopts
from tx_scheduler_lsf.request import LsfBsubRequest, appdef_file, build_request, cancelled_file, validate_app

__all__ = [
    "LsfCommandError", "LsfError", "LsfNotInstalledError", "LsfScheduler", "LsfTimeoutError", "create_scheduler",
]

log = get_logger(__name__)

#: what bjobs/bkill print for ids or projects they do not know (exit 255): no jobs, no error
_NO_JOB = re.compile(r"No (?:unfinished )?job found|is not found|No matching job found|has already finished",
                     re.IGNORECASE)
_SUBMITTED = re.compile(r"Job <(\d+)> is submitted")
_MAX_ARRAY = re.compile(r"MAX_JOB_ARRAY_SIZE\s*=\s*(\d+)")
#: MAX_JOB_ARRAY_SIZE where lsb.params does not set it (IBM LSF 10 and OpenLava)
DEFAULT_MAX_JOB_ARRAY_SIZE = 1000
#: app ids tx makes: clean_name's characters
_APP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class LsfScheduler(LogFiles, Scheduler[LsfBsubRequest]):
    """Runs apps on the LSF cluster whose client commands are on PATH (``LSF_ENVDIR``
    selects the cluster, as for any LSF command).

    Args:
        session_name: the session part of app handles.
        caps: fixed cluster facts for dryrun instead of asking ``lsid`` (offline dryruns).
        timeout: seconds each LSF command may take (default ``$TX_LSF_TIMEOUT`` or 30).

    Jobs run in ``jobdir`` or in the directory tx runs in, with the submitter's environment
    (bsub's default), so an activated virtualenv carries over.
    """

    def __init__(self, session_name: str, caps: Optional[Capabilities] = None,
                 timeout: Optional[float] = None) -> None:
        super().__init__("lsf", session_name)
        self._caps = caps
        self._timeout = timeout
        self._max_array: Optional[int] = None if caps is None else 0  # MAX_JOB_ARRAY_SIZE; 0: one array

    # -- options and dryrun ------------------------------------------------------------
    def _run_opts(self) -> runopts:
        return lsf_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None) -> None:
        """Roles without resources are allowed (the queue's defaults apply); see
        :func:`tx_scheduler_lsf.request.validate_app` and :func:`tx_scheduler_lsf.options.check_cfg`."""
        validate_app(app)
        check_cfg(cfg or {})

    def capabilities(self) -> Capabilities:
        """What the cluster speaks (the fixed facts given, else ``lsid``'s, asked once per
        process); where LSF's commands are not installed (a dryrun on a laptop), the
        portable subset.

        Raises:
            LsfTimeoutError, LsfCommandError: lsid failed.
        """
        if self._caps is None:
            try:
                self._caps = capabilities(self._timeout)
            except LsfNotInstalledError as e:
                log.debug("lsf_lsid_unavailable", error=str(e))
                return Capabilities(product="an LSF of unknown version (lsid not found here): the portable subset")
        return self._caps

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[LsfBsubRequest]:
        check_cfg(cfg)
        caps = self.capabilities()
        unit = lsf_conf().get("LSF_UNIT_FOR_LIMITS", "KB")
        app_id = make_unique(clean_name(app.name).lower())
        req = build_request(app, app_id, cfg, job_dir=jobdir_of(cfg), modern=caps.modern, mem_unit=unit,
                            cluster=caps.name)
        return AppDryRunInfo(req, repr)

    # -- submit ---------------------------------------------------------------------------
    def schedule(self, dryrun_info: AppDryRunInfo[LsfBsubRequest]) -> str:
        """Submit every replica's job (rank 0's first); returns the app id.

        Raises:
            LsfNotInstalledError: bsub is not on PATH.
            LsfCommandError: bsub refused a job (its error in the message); the jobs
                submitted before it are killed.
        """
        req = dryrun_info.request
        os.makedirs(req.job_dir, exist_ok=True)
        if req.appdef:
            write_atomic(os.path.join(req.job_dir, appdef_file(req.app_id)), req.appdef, "lsf")
        _index.record(req.app_id, req.job_dir)
        submitted: List[str] = []
        try:
            for r in req.replicas.values():
                out = _client.run(r.bsub, self._timeout, input=r.script, cwd=req.job_dir)
                m = _SUBMITTED.search(out.stdout)
                if m is None:
                    raise LsfError(f"bsub printed no job id (stdout {out.stdout.strip()!r})")
                submitted.append(m.group(1))
        except LsfError:
            if submitted:
                _client.run(["bkill", *submitted], self._timeout, check=False)
            raise
        log.info("lsf_submitted", app_id=req.app_id, jobs=len(submitted))
        return req.app_id

    # -- status ---------------------------------------------------------------------------
    def _bjobs(self, argv: Sequence[str]) -> str:
        """stdout of ``bjobs ARGV``; "" when it knows no such job."""
        proc = _client.run(["bjobs", *argv], self._timeout, check=False)
        if proc.returncode != 0 and not proc.stdout.strip():
            if _NO_JOB.search(proc.stderr) or _NO_JOB.search(proc.stdout):
                return ""
            raise LsfCommandError(["bjobs", *argv], proc.returncode, proc.stderr or proc.stdout)
        return proc.stdout

    def _jobs(self, app_id: str) -> List[Job]:
        """The app's jobs (``bjobs -a -noheader -w -P``), its replicas' only."""
        if not _APP_ID.match(app_id):
            return []
        self.capabilities()  # asked once, before the first bjobs
        jobs = parse_bjobs_w(self._bjobs(["-a", "-noheader", "-w", "-P", app_id]))
        jobs = [j for j in jobs if split_job_name(app_id, j.name) is not None]
        m = TRIAL_ID.match(app_id)
        if not jobs and m:  # a sweep's trial: an element of the job array of project <base>
            base = m.group(1)
            elements = [element_job(attrs.evolve(j, project=base))
                        for j in parse_bjobs_w(self._bjobs(["-a", "-noheader", "-w", "-P", base]))]
            jobs = [j for j in elements if j.project == app_id and split_job_name(app_id, j.name) is not None]
        return jobs

    def _details(self, jobs: List[Job]) -> Dict[str, Job]:
        """``bjobs -l`` of the jobs that are not plainly running or done."""
        ids = [j.job_id for j in jobs if j.stat not in ("RUN", "DONE")]
        return parse_bjobs_l(self._bjobs(["-l", *ids])) if ids else {}

    def _job_dir(self, app_id: str, jobs: Optional[List[Job]] = None) -> str:
        """The app's job directory: from the index, else the CWD ``bjobs -l`` reports."""
        found = _index.lookup(app_id)
        if found:
            return found
        if jobs is None:
            jobs = self._jobs(app_id)
        if not jobs:
            return ""
        detail = parse_bjobs_l(self._bjobs(["-l", jobs[0].job_id])).get(jobs[0].job_id)
        return detail.cwd if detail is not None else ""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state, replicas (exit codes, hosts) and the AppDef it was submitted
        with; None if LSF knows no job of it (or ``app_id`` is not an app id).

        Raises:
            LsfNotInstalledError, LsfTimeoutError, LsfCommandError: bjobs failed.
        """
        jobs = self._jobs(app_id)
        if not jobs:
            return None
        details = self._details(jobs)
        job_dir = self._job_dir(app_id, jobs)
        desc = build_describe(app_id, jobs, details, job_dir)
        if desc is None:
            return None
        stored = read_text(os.path.join(job_dir, appdef_file(app_id))) if job_dir else None
        desc.app, why, desc.metadata["run_options"] = read_stored_appdef_and_options(
            stored, f"{appdef_file(app_id)} in the job directory {job_dir or '(unknown)'}")
        if why:
            desc.metadata["app_not_stored"] = why
        return desc

    def list(self) -> List[ListAppResponse]:
        """The current user's apps that tx submitted and LSF still knows (its jobs named
        ``<project>-<role>-<k>``, grouped by project), from one ``bjobs -a -l``.

        Raises:
            LsfNotInstalledError, LsfTimeoutError, LsfCommandError: bjobs failed.
        """
        self.capabilities()
        details = parse_bjobs_l(self._bjobs(["-a", "-l"]))
        by_app: Dict[str, List[Job]] = {}
        for job in map(element_job, details.values()):
            if job.project and split_job_name(job.project, job.name) is not None:
                by_app.setdefault(job.project, []).append(job)
        out = []
        for app_id, jobs in by_app.items():
            job_dir = _index.lookup(app_id) or jobs[0].cwd
            desc = build_describe(app_id, jobs, details, job_dir)
            if desc is not None:
                out.append(ListAppResponse(app_id, desc.state, name=app_id.rsplit("-", 1)[0]))
        return sorted(out, key=lambda a: a.app_id)

    def states_of(self, app_ids: Sequence[str]) -> Optional[Dict[str, AppState]]:
        """The states of several apps from one ``bjobs -a -l`` (see :meth:`list`)."""
        states = {a.app_id: a.state for a in self.list()}
        return {a: states[a] for a in app_ids if a in states}

    # -- sweeps: one job array ---------------------------------------------------------
    def submit_sweep_dryrun(self, trials: Any, max_parallel: Optional[int]) -> Optional[AppDryRunInfo[Any]]:
        """One ``bsub`` of a job array for single-replica trials with the same options
        (:class:`tx_scheduler_lsf._array.LsfArrayRequest`); None (one app per trial) otherwise."""
        reqs = [t.request for t in trials]
        why = array_unsupported(reqs)
        if why is not None:
            log.info("lsf_sweep_not_an_array", reason=why)
            return None
        base = make_unique(reqs[0].app_id.rsplit("-", 1)[0])
        return AppDryRunInfo(LsfArrayRequest(base, reqs, max_parallel, self.max_array_size()), repr)

    def max_array_size(self) -> Optional[int]:
        """The cluster's ``MAX_JOB_ARRAY_SIZE`` (lsb.params; LSF's and OpenLava's default
        1000 where unset) from one ``bparams -l``, asked once per scheduler; None where it
        cannot be asked (fixed cluster facts for offline dryruns, no LSF here): one array."""
        if self._max_array is None:
            self._max_array = 0
            try:
                out = _client.run(["bparams", "-l"], self._timeout).stdout
                m = _MAX_ARRAY.search(out)
                self._max_array = int(m.group(1)) if m else DEFAULT_MAX_JOB_ARRAY_SIZE
            except LsfError as e:
                log.debug("lsf_bparams_unavailable", error=str(e))
        return self._max_array or None

    def sweep_not_an_array(self, trials: Any) -> str:
        """Why these trials are one app each (:func:`tx_scheduler_lsf._array.array_unsupported`)."""
        return array_unsupported([t.request for t in trials]) or "lsf has no array for these trials"

    def schedule_sweep(self, dryrun_info: AppDryRunInfo[Any]) -> List[str]:
        """Submit the job array with one ``bsub`` (one per array where the trials are more
        than ``MAX_JOB_ARRAY_SIZE``: one line says so); returns each trial's app id
        (``<array project>_<element>``). A bsub refused kills the arrays before it and
        removes the table: nothing is left in the job directory.

        Raises:
            LsfNotInstalledError, LsfCommandError: as :meth:`schedule`.
        """
        req: LsfArrayRequest = dryrun_info.request
        os.makedirs(req.job_dir, exist_ok=True)
        ids = req.trial_ids()
        req.write_table()  # the elements read their rows from it: before bsub
        jobs: List[str] = []
        try:
            for k in range(len(req.arrays)):
                after = jobs[-1] if jobs and req.max_parallel else None
                out = _client.run(req.array_bsub(k, after), self._timeout, input=req.script(k), cwd=req.job_dir)
                m = _SUBMITTED.search(out.stdout)
                if m is None:
                    raise LsfError(f"bsub printed no job id (stdout {out.stdout.strip()!r})")
                jobs.append(m.group(1))
        except BaseException:
            try:
                if jobs:
                    _client.run(["bkill", *jobs], self._timeout, check=False)
            finally:
                req.remove_table()  # a refused array leaves no table behind
            raise
        # after bsub, so that a refused array leaves nothing behind (describe reads them later)
        for trial, app_id in zip(req.trials, ids):
            if trial.appdef:
                write_atomic(os.path.join(req.job_dir, appdef_file(app_id)), trial.appdef, "lsf")
            _index.record(app_id, req.job_dir)
        log.info("lsf_submitted_array", project=req.base, arrays=len(jobs), tasks=len(ids))
        if len(jobs) > 1:
            log.warning(f"{req.split_line()}: jobs {', '.join(jobs)}")
        return ids

    # -- cancel -----------------------------------------------------------------------------
    def _cancel_existing(self, app_id: str) -> None:
        """Mark the app cancelled in its job directory, then ``bkill`` its unfinished jobs
        (a job that just ended is not an error)."""
        jobs = self._jobs(app_id)
        job_dir = self._job_dir(app_id, jobs)
        if job_dir:
            write_atomic(os.path.join(job_dir, cancelled_file(app_id)), "cancelled by tx\n", "lsf")
        ids = [j.job_id for j in jobs if appstate_from_lsf(j.stat) not in (AppState.SUCCEEDED, AppState.FAILED)]
        self._bkill(ids)
        log.info("lsf_cancelled", app_id=app_id, jobs=len(ids))

    def _bkill(self, ids: Sequence[str]) -> None:
        """``bkill`` the jobs (500 a call); jobs that ended or are gone are not errors."""
        for i in range(0, len(ids), 500):
            argv = ["bkill", *ids[i:i + 500]]
            proc = _client.run(argv, self._timeout, check=False)
            errors = [ln for ln in (proc.stderr + proc.stdout).splitlines()
                      if ln.strip() and not _NO_JOB.search(ln) and "is being terminated" not in ln]
            if proc.returncode != 0 and errors:
                raise LsfCommandError(argv, proc.returncode, "\n".join(errors))

    def cancel_many(self, app_ids: Sequence[str]) -> None:
        """A sweep's trials: one ``bjobs`` of each job array's project and one ``bkill`` of
        the unfinished elements (``<job id>[<i>]``), each trial marked cancelled in its job
        directory first; any other app (or a trial LSF does not list) as :meth:`cancel`.

        Raises:
            LsfNotInstalledError, LsfTimeoutError, LsfCommandError: bjobs or bkill failed.
        """
        by_base: Dict[str, List[str]] = {}
        for app_id in app_ids:
            m = TRIAL_ID.match(app_id) if _APP_ID.match(app_id) else None
            if m:
                by_base.setdefault(m.group(1), []).append(app_id)
            else:
                self.cancel(app_id)
        if not by_base:
            return
        self.capabilities()
        kill: List[str] = []
        for base, apps in by_base.items():
            wanted = set(apps)
            jobs = [j for j in (element_job(attrs.evolve(j, project=base))
                                for j in parse_bjobs_w(self._bjobs(["-a", "-noheader", "-w", "-P", base])))
                    if j.project in wanted and split_job_name(j.project, j.name) is not None]
            found = {j.project for j in jobs}
            for app_id in sorted(found):
                job_dir = _index.lookup(app_id)
                if job_dir:
                    write_atomic(os.path.join(job_dir, cancelled_file(app_id)), "cancelled by tx\n", "lsf")
            kill += [j.job_id for j in jobs if appstate_from_lsf(j.stat) not in (AppState.SUCCEEDED, AppState.FAILED)]
            for app_id in sorted(wanted - found):
                self.cancel(app_id)
        self._bkill(kill)
        log.info("lsf_cancelled", apps=len(app_ids), jobs=len(kill))


def create_scheduler(session_name: str, caps: Optional[Capabilities] = None, timeout: Optional[float] = None,
                     **kwargs: Any) -> LsfScheduler:
    """Factory registered as ``lsf`` (see :class:`LsfScheduler` for the arguments). Other
    keyword arguments (scheduler parameters meant for other schedulers) are ignored."""
    if kwargs:
        log.debug("lsf_ignored_scheduler_params", params=sorted(kwargs))
    return LsfScheduler(session_name, caps=caps, timeout=timeout)

