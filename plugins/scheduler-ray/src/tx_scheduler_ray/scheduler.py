"""The ``ray`` scheduler: apps as Ray jobs that run tx's driver.

* submit: :class:`ray.job_submission.JobSubmissionClient` ``submit_job`` of the request
  :mod:`tx_scheduler_ray.request` builds, to the dashboard at run option
  ``dashboard_address``, else the head of ``cluster_config_file``, else ``$RAY_ADDRESS``,
  else ``127.0.0.1:8265``. The app id is ``<host>:<port>-<submission_id>`` (TorchX's format),
  so ``tx status/log/cancel`` find the cluster from the handle alone.
* status: the Ray job's status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED -> CANCELLED)
  and the driver's ``state.json`` (per-replica state, host, exit code; why the app waits;
  its first failure), read through the dashboard's log API. The job's status comes from the
  head's shared snapshot (:mod:`tx_scheduler_ray._plane`: one ``list_jobs`` a tick for every
  app followed); the driver's state is read only for the apps described, at most once per
  snapshot and shared by the host's processes (an ended job's final state once), and every
  call of the head takes a token of its call budget (``.txconfig`` ``[ray] max_calls_per_minute``).
* logs: each replica's own ``stdout``, ``stderr`` and line-merged ``combined`` files, never
  the job's mixed output; regex, streams and following (``should_tail``).
* cancel: ``stop_job``: the driver stops every replica (SIGTERM, then SIGKILL after 5 s),
  kills their actors and removes its placement groups.

Ray docs: https://docs.ray.io/en/latest/cluster/running-applications/job-submission/sdk.html,
https://docs.ray.io/en/latest/cluster/running-applications/job-submission/jobs-package-ref.html,
https://docs.ray.io/en/latest/ray-core/scheduling/placement-group.html.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import time
from types import SimpleNamespace
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from tx import get_logger
from tx.schedulers import (
    DescribeAppResponse, ListAppResponse, Scheduler, SchedulerError, Stream, add_infra_retries_opt, filter_regex,
    line_blocks, make_unique, split_lines)
from tx.specs import (
    AppDef, AppDryRunInfo, AppState, CfgVal, InvalidRunConfigException, Role, UnknownAppException, make_app_handle,
    read_stored_appdef_and_options, runopts)

from tx_scheduler_ray import _client, _logs, _package, _plane, tx_ray_driver
from tx_scheduler_ray._describe import describe_job, replica_record, roles_of
from tx_scheduler_ray._states import JOB_STATES
from tx_scheduler_ray.request import DEFAULT_PREEMPT_GRACE, METADATA_APPDEF, RayJob, build_request, hostport, submission_name, validate_app

__all__ = ["DEFAULT_DASHBOARD", "RayScheduler", "create_scheduler", "ray_runopts"]

log = get_logger(__name__)

#: the dashboard address when neither the run options nor RAY_ADDRESS give one (TorchX's)
DEFAULT_DASHBOARD = "127.0.0.1:8265"
_APP_ID = re.compile(r"^(?P<addr>[^/\s]+?:\d+)-(?P<sid>[A-Za-z0-9_][A-Za-z0-9_.-]*)$")
_SID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def ray_runopts() -> runopts:
    """The ray scheduler's run options (TorchX's names and meaning)."""
    opts = runopts()
    opts.add("cluster_config_file", type_=str, default=None,
             help="Ray cluster launcher config (YAML) of the cluster to submit to; its head's "
                  "dashboard (port 8265) is used when dashboard_address is not set")
    opts.add("cluster_name", type_=str, default=None,
             help="overrides the cluster name of cluster_config_file")
    opts.add("dashboard_address", type_=str, default=None,
             help=f"the Ray dashboard (Job Submission API) to submit to, host:port or URL "
                  f"(default: $RAY_ADDRESS, else {DEFAULT_DASHBOARD})")
    opts.add("requirements", type_=str, default=None,
             help="pip requirements file installed into the job's runtime env; a relative path "
                  "is read from the current directory, else from the working_dir (default: "
                  "requirements.txt of the working_dir, if there is one)")
    # TorchX 0.7 names the uploaded directory RayJob.working_dir but drops -cfg working_dir
    # (projects' READMEs pass it, e.g. torchrec's): here it is that directory
    opts.add("working_dir", type_=str, default=None,
             help="local directory uploaded as the Ray job's working_dir, where the replicas "
                  "run (default: the workspace, else the current directory); with --workspace "
                  "it must be the same directory")
    opts.add("preempt_grace", type_=float, default=float(DEFAULT_PREEMPT_GRACE),
             help="seconds from SIGTERM to SIGKILL of a replica whose actor Ray stopped or lost (ray stop, "
                  "ray.kill, its node removed); TX_PREEMPT_GRACE in its env; rounded up to whole seconds")
    add_infra_retries_opt(opts)  # a replica's actor or node lost (ActorDiedError WORKER_DIED/NODE_DIED)
    return opts


def _url(address: str) -> str:
    address = address.strip().rstrip("/")
    return address if "://" in address else f"http://{address}"


class RayScheduler(Scheduler[RayJob]):
    """Runs apps on the Ray cluster whose dashboard is at ``dashboard_address``.

    Args:
        session_name: the session part of app handles.
        dashboard_address: the default dashboard for submit and list (run option
            ``dashboard_address`` and ``$RAY_ADDRESS`` come first).
    """

    #: ``--workspace DIR``: with run option ``job_dir`` the workspace is copied there by
    #: core's ``dir`` kind first; the directory (job_dir or DIR) becomes the first role's
    #: image and is uploaded as the job's runtime-env ``working_dir``
    workspace_kind = "dir"
    #: a Ray job has no mounts (its runtime env has none): tx refuses them, torchx drops them
    supports_mounts = False
    mounts_advice = ("Ray jobs see each node's filesystem as it is: make the path exist on every node "
                     "(the cluster's own setup), or run on kubernetes or local_docker")

    def __init__(self, session_name: str, dashboard_address: Optional[str] = None) -> None:
        super().__init__("ray", session_name)
        self._default_address = dashboard_address
        self._clients: Dict[str, Any] = {}
        self._http: Any = None

    # -- addresses and clients -------------------------------------------------------------
    def _default_url(self) -> str:
        env = os.environ.get("RAY_ADDRESS", "").strip()
        if self._default_address:
            return _url(self._default_address)
        if env and env != "auto" and not env.startswith("ray://"):
            return _url(env)
        return _url(DEFAULT_DASHBOARD)

    def _submit_url(self, cfg: Mapping[str, CfgVal]) -> str:
        if cfg.get("dashboard_address"):
            return _url(str(cfg["dashboard_address"]))
        if cfg.get("cluster_config_file"):
            return _url(f"{self._head_ip(cfg)}:8265")
        return self._default_url()

    @staticmethod
    def _head_ip(cfg: Mapping[str, CfgVal]) -> str:
        path = str(cfg["cluster_config_file"])
        if not os.path.isfile(path):
            raise InvalidRunConfigException(
                f"run option 'cluster_config_file': no file {path!r}", "cluster_config_file", cfg)
        from ray.autoscaler.sdk import get_head_node_ip

        try:
            return str(get_head_node_ip(path, override_cluster_name=cfg.get("cluster_name")))
        except Exception as e:  # noqa: BLE001 - the launcher's errors are varied
            raise SchedulerError(f"cannot find the head node of the cluster in {path}: {e}") from None

    def _url_of(self, addr: str) -> str:
        """The dashboard URL of an app id's ``host:port`` (https where RAY_ADDRESS says so)."""
        for candidate in (os.environ.get("RAY_ADDRESS", ""), self._default_address or ""):
            if candidate.startswith("https://") and hostport(candidate) == addr:
                return _url(candidate)
        return f"http://{addr}"

    def _job_client(self, url: str) -> Any:
        client = self._clients.get(url)
        if client is None:
            client = _client.make_client(url)
            self._clients[url] = client
        return client

    def _session(self) -> Any:
        if self._http is None:
            import requests

            self._http = requests.Session()
        return self._http

    def _parse(self, app_id: str) -> Tuple[str, str]:
        """``(dashboard URL, submission id)`` of an app id; ``("", "")`` if malformed."""
        m = _APP_ID.match(app_id)
        if m:
            return self._url_of(m.group("addr")), m.group("sid")
        if _SID.match(app_id):  # a bare submission id: the default dashboard
            return self._default_url(), app_id
        return "", ""

    # -- options and dryrun ------------------------------------------------------------------
    def _run_opts(self) -> runopts:
        return ray_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without a resource run with 1 CPU; see
        :func:`tx_scheduler_ray.request.validate_app` for what is rejected."""
        validate_app(app)
        for role in app.roles:
            if role.resource.capabilities or role.resource.devices:
                log.warning("ray_resource_extras_ignored", role=role.name)

    def build_workspace(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> Optional[Role]:
        """The ``dir`` kind puts the workspace into ``job_dir`` when that is set; without it
        the workspace directory itself becomes the role's image (uploaded as is, minus what
        its ``.txignore`` excludes).

        Raises:
            tx.workspace.WorkspaceError: as the ``dir`` kind.
        """
        import attrs

        new = super().build_workspace(role, workspace, cfg)
        if new is None or not cfg.get("job_dir"):
            if not os.path.isdir(workspace):
                from tx.workspace import WorkspaceError

                raise WorkspaceError(f"workspace {workspace!r} is not a directory")
            return attrs.evolve(role, image=os.path.abspath(workspace))
        return new

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[RayJob]:
        url = self._submit_url(cfg)
        sid = make_unique(submission_name(app.name))
        req = build_request(app, cfg, url, sid, self.session_name)
        return AppDryRunInfo(req, repr)

    # -- submit ---------------------------------------------------------------------------------
    def schedule(self, dryrun_info: AppDryRunInfo[RayJob]) -> str:
        """Submit the Ray job; returns the app id ``<host>:<port>-<submission_id>``.

        Raises:
            SchedulerError: the dashboard cannot be reached or refused the job.
        """
        req = dryrun_info.request
        client = self._job_client(req.address)
        try:
            with _client.quiet_sdk():
                # one zip of the working_dir, under its own hash (_package: the SDK's own
                # upload can name a package it never uploaded)
                runtime_env = _package.upload_working_dir(client, req.runtime_env)
                _plane.call(req.address, lambda: client.submit_job(
                    entrypoint=req.entrypoint, submission_id=req.submission_id,
                    runtime_env=runtime_env, metadata=req.metadata,
                ), "submit_job", read=False)
        except SchedulerError:
            raise
        except Exception as e:  # noqa: BLE001 - the SDK raises RuntimeError, ValueError, OSError...
            raise SchedulerError(f"Ray refused job {req.submission_id} at {req.address}: {_client.one_line(e)}") from None
        _plane.plane(req.address).invalidate()  # the next look asks the head
        log.info("ray_submitted", app_id=req.app_id, replicas=sum(r["num_replicas"] for r in req.spec["roles"]))
        return req.app_id

    # -- status ---------------------------------------------------------------------------------
    def _snapshot(self, url: str) -> Any:
        """The head's shared snapshot (:mod:`tx_scheduler_ray._plane`).

        Raises:
            SchedulerError: the dashboard cannot be reached or answered an error
                (:class:`tx.schedulers.budget.ThrottledError` while it stays busy), here or
                in the shared look of another process within the snapshot's age.
        """

        def fetch() -> Dict[str, Any]:
            try:
                return _plane.fetch_jobs(url, self._job_client(url))
            except SchedulerError:  # no dashboard answers (make_client), ThrottledError: already one line
                raise
            except RuntimeError as e:
                raise SchedulerError(f"Ray dashboard {url}: {_client.one_line(e)}") from None
            except OSError as e:  # requests' ConnectionError
                raise SchedulerError(f"no Ray dashboard answers at {url}: {_client.one_line(e)}") from None

        # a failed list is shared like an answer: a head that does not answer is waited for once
        return _plane.plane(url).get(fetch, shared_failure=SchedulerError)

    def _job(self, app_id: str) -> Tuple[str, str, Any]:
        """``(dashboard URL, submission id, job info)``: the info from the head's shared
        snapshot (a namespace of :func:`tx_scheduler_ray._plane.job_item`'s fields, with
        ``fetched_at``), else asked on its own (a job submitted since, or not tx's); None
        where the head does not know the job."""
        url, sid = self._parse(app_id)
        if not url:
            return "", "", None
        snap = self._snapshot(url)
        item = (snap.items.get("jobs") or {}).get(sid)
        if item is not None:
            return url, sid, SimpleNamespace(**item, fetched_at=snap.fetched_at)
        client = self._job_client(url)
        asked = time.time()
        try:
            info = _plane.call(url, lambda: client.get_job_info(sid), "get_job_info")
        except SchedulerError:  # ThrottledError (a SchedulerError is a RuntimeError too)
            raise
        except RuntimeError as e:
            if "404" in str(e) or "does not exist" in str(e):
                return url, sid, None
            raise SchedulerError(f"Ray dashboard {url}: {_client.one_line(e)}") from None
        except OSError as e:  # requests' ConnectionError: the head went away since the client was made
            raise SchedulerError(f"no Ray dashboard answers at {url}: {_client.one_line(e)}") from None
        return url, sid, SimpleNamespace(**_plane.job_item(info), fetched_at=asked)

    def _read_state(self, url: str, sid: str, node: Optional[str]) -> Optional[Dict[str, Any]]:
        """The driver's ``state.json`` (one log-API read, within the head's budget); None
        where it has written none (or no driver started).

        Raises:
            tx_scheduler_ray._logs.LogAPIError, requests.RequestException: the read failed.
        """
        if not node:
            return None
        name = f"{tx_ray_driver.state_dir(sid)}/{tx_ray_driver.STATE_FILE}"
        data = _plane.call(url, lambda: _logs.read_file(url, node, name, self._session()), "read state.json")
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:  # written atomically, so this is not a partial write
            return None

    def _state(self, url: str, sid: str, info: Any) -> Optional[Dict[str, Any]]:
        """The driver's ``state.json``, shared by the host's processes (one read per job and
        snapshot; an ended job's final state once: :func:`tx_scheduler_ray._plane.driver_state`);
        None where there is none yet or the log API cannot read it."""
        node = getattr(info, "driver_node_id", None)
        if not node:  # no driver started: nothing to read (and nothing recorded)
            return None
        try:
            return _plane.driver_state(url, sid, info, lambda: self._read_state(url, sid, node))
        except _logs.LogAPIError as e:
            log.debug("ray_state_unreadable", error=str(e))
            return None

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state, replicas (state, host, exit code) and roles; None if the cluster
        does not know the job (or ``app_id`` is malformed). The job's status is the head's
        shared snapshot's (``metadata["status_fetched_at"]``: when the head was asked, epoch s).

        Raises:
            SchedulerError: the dashboard cannot be reached; a head that stays busy (429,
                5xx) is :class:`tx.schedulers.budget.ThrottledError`, never a failed app.
        """
        url, sid, info = self._job(app_id)
        if info is None:
            return None
        state = self._state(url, sid, info)
        desc = describe_job(app_id, url, sid, info, state)
        stored = (getattr(info, "metadata", None) or {}).get(METADATA_APPDEF)
        desc.app, why, desc.metadata["run_options"] = read_stored_appdef_and_options(
            stored, f"the job's metadata {METADATA_APPDEF}")
        if why:
            desc.metadata["app_not_stored"] = why
        desc.metadata["status_fetched_at"] = info.fetched_at  # epoch s; the status is at most this old
        return desc

    def list(self) -> List[ListAppResponse]:
        """The tx apps of the default dashboard (``$RAY_ADDRESS`` or 127.0.0.1:8265),
        oldest first; Ray jobs not submitted by tx are left out."""
        url = self._default_url()
        jobs = (self._snapshot(url).items.get("jobs") or {})
        out = []
        for sid, job in sorted(jobs.items(), key=lambda kv: kv[1].get("start_time") or 0):
            out.append(ListAppResponse(
                app_id=f"{hostport(url)}-{sid}",
                state=JOB_STATES.get(str(job["status"]), AppState.UNKNOWN), name=job["metadata"]["tx_app"],
            ))
        return out

    def _cancel_existing(self, app_id: str) -> None:
        """``stop_job``: the driver stops the replicas; a job that already ended is left."""
        url, sid = self._parse(app_id)
        client = self._job_client(url)
        try:
            _plane.call(url, lambda: client.stop_job(sid), "stop_job", read=False)
        except SchedulerError:
            raise
        except RuntimeError as e:
            raise SchedulerError(f"Ray dashboard {url}: cannot stop {sid}: {_client.one_line(e)}") from None
        except OSError as e:  # requests' ConnectionError and timeouts
            raise SchedulerError(f"no Ray dashboard answers at {url}: {_client.one_line(e)}") from None
        _plane.plane(url).invalidate()  # the next look asks the head
        log.info("ray_cancelled", app_id=app_id)

    # -- logs -------------------------------------------------------------------------------------
    def _replica(self, app_id: str, role_name: str, k: int) -> Tuple[str, str, Any, Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
        url, sid, info = self._job(app_id)
        if info is None:  # e.g. the head restarted: the log archive may stand in (tx.runner)
            raise UnknownAppException(make_app_handle(self.backend, self.session_name, app_id))
        state = self._state(url, sid, info)
        roles = roles_of(info, state)
        known = [f"{r}/{i}" for r, n in roles for i in range(n)]
        if f"{role_name}/{k}" not in known:
            raise ValueError(f"app {app_id} has no replica {role_name}/{k}; replicas: {', '.join(known)}")
        return url, sid, info, state, replica_record(state, role_name, k)

    def log_iter_blocks(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[bytes]:
        """The replica's stream as byte blocks of whole lines; with ``should_tail``, followed
        until the app is terminal (restarts append to the same stream).

        Args:
            streams: ``combined`` (default: stdout and stderr, merged line by line),
                ``stdout`` or ``stderr``.

        Raises:
            tx.specs.UnknownAppException: the cluster does not know the app.
            ValueError: the replica does not exist.
            SchedulerError: the dashboard cannot be reached.
        """
        stream = str(Stream(streams)) if streams is not None else str(Stream.COMBINED)
        url, sid, info, _state, rec = self._replica(app_id, role_name, k)
        name = tx_ray_driver.log_name(sid, role_name, k, stream)
        if str(info.status) in ("SUCCEEDED", "FAILED", "STOPPED"):
            should_tail = False  # the files are complete: one read
        return self._blocks(app_id, url, name, rec, stream, role_name, k, should_tail)

    def _blocks(self, app_id: str, url: str, name: str, rec: Optional[Dict[str, Any]], stream: str,
                role_name: str, k: int, should_tail: bool) -> Iterator[bytes]:
        import time

        if not should_tail:
            if rec is None or not rec.get("node_id"):
                return
            data = _logs.read_file(url, rec["node_id"], name, self._session())
            if data:
                yield data
            return
        # wait until the replica has a node (its actor made the files), or the app ends
        while rec is None or not rec.get("node_id"):
            desc_url, sid, info = self._job(app_id)
            state = self._state(desc_url, sid, info) if info is not None else None
            rec = replica_record(state, role_name, k)
            if rec is not None and rec.get("node_id"):
                break
            if info is None or str(info.status) in ("SUCCEEDED", "FAILED", "STOPPED"):
                return
            time.sleep(0.5)
        node = rec["node_id"]

        def final_size() -> Optional[int]:
            _u, sid2, info2 = self._job(app_id)
            if info2 is None:
                return -1
            if str(info2.status) not in ("SUCCEEDED", "FAILED", "STOPPED"):
                return None
            st = self._state(url, sid2, info2)
            r = replica_record(st, role_name, k)
            if r is None or r.get("node_id") != node or stream not in (r.get("sizes") or {}):
                return -1
            return int(r["sizes"][stream])

        yield from line_blocks(_logs.follow(url, node, name, final_size))

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
        """Lines (each with its ``\\n``) of replica ``k`` of ``role_name``.

        Args:
            regex: keep only lines where it is found (``re.search``).
            since, until: ignored: the replica files carry no times (logged at debug level).
            should_tail: follow until the app is terminal.
            streams: ``combined`` (default), ``stdout`` or ``stderr``.

        Raises:
            tx.specs.UnknownAppException: the cluster does not know the app.
            ValueError: the replica does not exist; an unknown stream.
            SchedulerError: the dashboard cannot be reached.
        """
        if since or until:
            log.debug("ray_log_times_ignored", app_id=app_id)
        blocks = self.log_iter_blocks(app_id, role_name, k, should_tail, streams)
        return filter_regex(regex, _lines(blocks))

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        self._clients.clear()


def _lines(blocks: Iterable[bytes]) -> Iterator[str]:
    for block in blocks:
        yield from split_lines(block.decode("utf-8", "replace"))


def create_scheduler(session_name: str, dashboard_address: Optional[str] = None, **kwargs: Any) -> RayScheduler:
    """Factory registered as ``ray`` (see :class:`RayScheduler` for the arguments). Other
    keyword arguments (scheduler parameters meant for other schedulers) are ignored."""
    if kwargs:
        log.debug("ray_ignored_scheduler_params", params=sorted(kwargs))
    return RayScheduler(session_name, dashboard_address=dashboard_address)
