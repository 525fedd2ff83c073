"""``local_docker``: one container per replica on a Docker engine (or podman's Docker API).

Each app gets a bridge network ``tx-<app_id>``; each replica a container named
``<app_id>-<role>-<replica_id>`` with that name as its host name on the network, so that
replicas reach each other by name (``TX_RANK0_HOST`` is role 0's replica 0). Everything tx
needs later (describe, list, logs, cancel from another process) lives in the engine, in the
containers' labels: no state is kept on the submitting host.

Containers as replicas and why an app failed: :mod:`tx_scheduler_docker._status`; replicas
the engine lost, started again: :mod:`tx_scheduler_docker._attempts`; logs:
:mod:`tx_scheduler_docker._logs`.

API reference: https://docs.docker.com/reference/api/engine/ (through the official SDK,
https://docker-py.readthedocs.io/). TorchX 0.7.0's ``local_docker`` is the model for names
and run options.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tx import get_logger
from tx.schedulers import (
    DescribeAppResponse, ListAppResponse, Scheduler, SchedulerError, add_infra_retries_opt, infra_retries)
from tx.specs import (
    NONE, AppDef, AppDryRunInfo, AppState, Attempt, CfgVal, FailureKind, InvalidRunConfigException, ReplicaStatus, Role,
    RoleStatus, read_stored_appdef_and_options, runopts)
from tx_scheduler_docker import _preempted, _states
from tx_scheduler_docker._attempts import start_again, start_quietly
from tx_scheduler_docker._client import api_reason, engine_call, engine_location
from tx_scheduler_docker._logs import ContainerLogs
from tx_scheduler_docker._status import CANCELLED_SUFFIX, CAUSE_TAIL_LINES, failure
# defined here before the split: still importable from here
from tx_scheduler_docker._status import ERROR_TAIL_LINES as ERROR_TAIL_LINES
from tx_scheduler_docker._status import LABEL_ATTEMPT as LABEL_ATTEMPT
from tx_scheduler_docker._status import RETIRED as _RETIRED
from tx_scheduler_docker._status import attempt_of as _attempt_of
from tx_scheduler_docker._status import labels as _labels
from tx_scheduler_docker._status import name_of as _name_of
from tx_scheduler_docker._status import role_from as _role_from
from tx_scheduler_docker._status import summary_name as _summary_name
from tx_scheduler_docker._status import to_int as _int
from tx_scheduler_docker.request import (
    LABEL_APP_ID, LABEL_APP_NAME, LABEL_APPDEF, LABEL_REPLICA_ID, LABEL_ROLE_IDX, LABEL_ROLE_NAME,
    DEFAULT_PREEMPT_GRACE, LABEL_VERSION, DockerContainer, DockerJob, build_request, stop_timeout,
)
from tx_scheduler_docker.version import __version__

__all__ = ["DockerContainer", "DockerJob", "DockerScheduler", "create_scheduler", "LABEL_APP_ID"]

log = get_logger(__name__)

#: seconds a cancelled container has to exit after SIGTERM before SIGKILL
STOP_TIMEOUT = 5
#: seconds an app's network with no container yet is left alone: another submit made it and
#: is creating the containers (older: a submit that died in between; collected)
NETWORK_GRACE = 600


def local_docker_runopts() -> runopts:
    """The run options of ``local_docker`` (TorchX 0.7.0's names and meaning, and tx's `volumes`)."""
    opts = runopts()
    opts.add("copy_env", type_=List[str], default=None,
             help="list of glob patterns of environment variables to copy into the containers "
                  "from the submitter's environment, e.g. [FOO_*, BAR]")
    opts.add("env", type_=Dict[str, str], default=None,
             help="environment variables to set in every container (K:V;K2:V2); these win over copy_env")
    opts.add("privileged", type_=bool, default=False,
             help="give the containers extended privileges (docker run --privileged)")
    opts.add("volumes", type_=List[str], default=None,
             help="volumes of every container, as docker run -v: SRC:DST[:ro|rw] (a host path or a "
                  "named volume), e.g. /shared:/shared;/data:/data:ro (the role's mounts win)")
    opts.add("preempt_grace", type_=float, default=float(DEFAULT_PREEMPT_GRACE),
             help="seconds between a preemption warning (the engine stopping a container: docker stop, "
                  "an engine shutting down; SIGTERM, TX_PREEMPT_GRACE in every container's env) and "
                  "SIGKILL: each container's stop timeout, rounded up to whole seconds")
    add_infra_retries_opt(opts)
    return opts


class DockerScheduler(ContainerLogs, Scheduler[DockerJob]):
    """Runs each replica as a container on the engine at ``DOCKER_HOST`` (see
    :func:`tx_scheduler_docker._client.make_client`).

    Args:
        session_name: the session part of app handles.
        client: a ``docker.DockerClient`` to use (default: one made from the environment
            when first needed).

    Replica states come from container states and exit codes
    (:mod:`tx_scheduler_docker._states`); an app is SUCCEEDED when every container exited
    with 0, FAILED when every container ended and one did not, CANCELLED after
    :meth:`cancel`, otherwise the state of its first replica that has not ended.
    Containers stay after they end (``docker ps -a``), so that describe and logs work
    later; ``docker rm`` them by label ``tx.app-id=<app_id>``.
    """

    workspace_kind = "docker"
    runs_on_host = True

    def __init__(self, session_name: str, client: Optional[Any] = None) -> None:
        super().__init__("local_docker", session_name)
        self._client = client
        #: one client per scheduler, also when relay threads ask for it at once
        self._client_lock = threading.Lock()
        self._cgroup_version: Optional[str] = None
        self._podman: Optional[bool] = None

    # -- the client ------------------------------------------------------------------------------
    def _docker(self) -> Any:
        with self._client_lock:
            if self._client is None:
                from tx_scheduler_docker._client import make_client

                self._client = make_client()
            return self._client

    def close(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    # -- submission ------------------------------------------------------------------------------
    def _run_opts(self) -> runopts:
        return local_docker_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without resources run without limits; a role without an image cannot run.

        Raises:
            ValueError: a role has no image.
        """
        for role in app.roles:
            if not role.image:
                raise ValueError(f"role {role.name!r} has no image; local_docker runs role.image as a container")
        try:
            stop_timeout(cfg)
        except ValueError as e:
            raise InvalidRunConfigException(str(e), "preempt_grace", cfg) from None

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[DockerJob]:
        job = build_request(app, cfg, self.session_name)
        return AppDryRunInfo(job, str)

    def schedule(self, dryrun_info: AppDryRunInfo[DockerJob]) -> str:
        """Create the app's network and containers, then start them.

        Raises:
            SchedulerError: no engine, an image that is neither local nor pullable, or the
                engine refused a container; whatever was created is removed first.
        """
        import docker

        job = dryrun_info.request
        for d in job.host_dirs:  # the engine would make a missing bind source root's (docker) or refuse it (podman)
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as e:
                raise SchedulerError(f"{job.app_id}: cannot create {d} to mount into the containers: "
                                     f"{e.strerror or e}") from None
        client = self._docker()
        self._collect_networks(client)
        for image in dict.fromkeys(c.image for c in job.containers):
            self._ensure_image(client, image)
        created: List[Any] = []
        network = None
        try:
            network = client.networks.create(job.network, driver="bridge", labels={LABEL_APP_ID: job.app_id,
                                                                                   LABEL_VERSION: __version__})
            for c in job.containers:
                kw = dict(c.kwargs)
                if "device_requests" in kw:
                    kw["device_requests"] = [docker.types.DeviceRequest(
                        driver=d["Driver"], count=d["Count"], capabilities=d["Capabilities"]) for d in kw["device_requests"]]
                created.append(_create(client, c.image, c.command, kw))
            for ct in created:
                ct.start()
        except docker.errors.APIError as e:
            self._remove_quietly(created, network)
            raise SchedulerError(f"{job.app_id}: the engine refused the app: {api_reason(e)}") from None
        except BaseException:
            self._remove_quietly(created, network)
            raise
        log.info("submitted", app_id=job.app_id, containers=len(created))
        return job.app_id

    @staticmethod
    def _remove_quietly(containers: List[Any], network: Optional[Any]) -> None:
        for ct in containers:
            try:
                ct.remove(force=True)
            except Exception:  # noqa: BLE001 - clean-up after a failed submit
                pass
        if network is not None:
            try:
                network.remove()
            except Exception:  # noqa: BLE001
                pass

    @staticmethod
    def _ensure_image(client: Any, image: str) -> None:
        """Pull ``image`` when the engine does not have it.

        Raises:
            SchedulerError: it is not there and cannot be pulled.
        """
        import docker

        try:
            client.images.get(image)
            return
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as e:
            log.warning("cannot inspect image; trying to pull it", image=image, error=api_reason(e))
        try:
            log.info("pulling image", image=image)
            client.images.pull(image)
        except docker.errors.DockerException as e:
            raise SchedulerError(
                f"image {image!r} is not on the engine at {engine_location()} and cannot be pulled: {api_reason(e)}"
            ) from None

    def _collect_networks(self, client: Any) -> None:
        """Remove the networks of tx apps whose containers have all ended (each app makes
        one; ended apps keep their containers but need no network). A network with no
        container is another submit's, between creating it and its containers, until it is
        :data:`NETWORK_GRACE` seconds old."""
        try:
            nets = client.api.networks(filters={"label": LABEL_APP_ID})
        except Exception:  # noqa: BLE001 - housekeeping never fails a submit
            return
        for net in nets:
            app_id = (net.get("Labels") or {}).get(LABEL_APP_ID)
            if not app_id:
                continue
            try:
                summaries = client.api.containers(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
                created = _states.engine_time_ns(net.get("Created"))
                if not summaries and (created is None or time.time() - created / 1e9 < NETWORK_GRACE):
                    continue
                if any(not _RETIRED.search(_summary_name(s))
                       and (s.get("State") or "").lower() in ("running", "created", "restarting", "paused", "configured",
                                                          "initialized", "stopping") for s in summaries):
                    continue
                self._remove_network(client, net.get("Name") or net.get("Id"), [s["Id"] for s in summaries])
            except Exception:  # noqa: BLE001
                continue

    @staticmethod
    def _remove_network(client: Any, name: str, container_ids: List[str]) -> None:
        for cid in container_ids:
            try:
                client.api.disconnect_container_from_network(cid, name, force=True)
            except Exception:  # noqa: BLE001 - not connected (any more)
                pass
        try:
            client.api.remove_network(name)
        except Exception as e:  # noqa: BLE001
            log.debug("network not removed", network=name, error=str(e))

    # -- queries ----------------------------------------------------------------------------------
    def _inspect_app(self, app_id: str) -> List[Dict[str, Any]]:
        client = self._docker()
        import docker

        out = []
        for s in client.api.containers(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"}):
            try:
                out.append(client.api.inspect_container(s["Id"]))
            except docker.errors.NotFound:
                continue  # removed meanwhile
        return out

    @engine_call
    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state from its containers (None: no container has its label).

        ``roles_statuses`` has one replica per container with its exit code; for a failed
        app, ``structured_error_msg`` names the replica that failed first (unless it only
        lost a peer that failed within 10 s of it: :func:`tx.schedulers.why.first_cause`),
        how it ended (exit code, signal, out of memory) and its last lines of output.

        A replica whose container the engine lost while it ran (a host reboot,
        :func:`tx_scheduler_docker._states.lost_while_running`) is started again here, in a
        new container of the same name and labels (the lost one is renamed
        ``<name>.infra<attempt>`` and kept with its logs), while the app's attempts so far
        are fewer than its run option ``infra_retries`` (read from the stored run options;
        default :data:`tx.schedulers.api.DEFAULT_INFRA_RETRIES`); the roles' ``max_retries``
        are not spent. ``attempts`` lists each attempt. Two tx processes doing it at once
        start one container: the engine's unique names refuse the second.

        Raises:
            SchedulerError: no engine answers.
        """
        return self._describe(app_id, retry=True)

    def _describe(self, app_id: str, retry: bool) -> Optional[DescribeAppResponse]:
        infos = self._inspect_app(app_id)
        if not infos:
            return None
        # the replicas' containers now; those the engine lost and tx replaced are "retired"
        retired = [i for i in infos if _RETIRED.search(_name_of(i))]
        infos = [i for i in infos if not _RETIRED.search(_name_of(i))]
        attempt = max((_attempt_of(i) for i in infos + retired), default=0)
        stored = _labels((infos or retired)[0]).get(LABEL_APPDEF)
        stored_app, why_not_stored, run_options = read_stored_appdef_and_options(
            stored, f"the containers' label {LABEL_APPDEF}")
        present = {(_labels(i).get(LABEL_ROLE_NAME, "unknown"), _int(_labels(i).get(LABEL_REPLICA_ID), 0))
                   for i in infos}
        missing = {}  # replicas whose new container is not created yet: their last retired one
        for i in sorted(retired, key=_attempt_of):
            key = (_labels(i).get(LABEL_ROLE_NAME, "unknown"), _int(_labels(i).get(LABEL_REPLICA_ID), 0))
            if key not in present:
                missing[key] = i
        roles: Dict[str, List[ReplicaStatus]] = {}
        role_order: Dict[str, int] = {}
        role_defs: Dict[str, Role] = {}
        replica_info: Dict[Tuple[str, int], Dict[str, Any]] = {}
        cancelled = any(_name_of(i).endswith(CANCELLED_SUFFIX) for i in retired)
        restarts = 0
        unknown: List[str] = []
        lost: List[Tuple[str, int, str]] = []  # (role, replica, why): containers the engine lost
        for info in infos:
            labels = info.get("Config", {}).get("Labels") or {}
            role = labels.get(LABEL_ROLE_NAME, "unknown")
            k = _int(labels.get(LABEL_REPLICA_ID), 0)
            st = info.get("State") or {}
            status = st.get("Status")
            code = st.get("ExitCode")
            state = _states.container_state(status, code)
            gone = _states.lost_while_running(st)
            if (gone is None and _attempt_of(info) > 0 and not _states._is_set(st.get("StartedAt"))
                    and str(status or "").lower() == "created" and retry):
                start_quietly(self._docker(), info)  # tx created it to retry but ended before starting it
            if gone is not None:  # podman's "created" (or "exited", code 0) after a reboot
                state = AppState.FAILED  # (CANCELLED below, where tx was cancelling it)
                if not _name_of(info).endswith(CANCELLED_SUFFIX):
                    lost.append((role, k, f"{role}[{k}]: {gone}"))
            elif not _states.known_state(status):
                unknown.append(f"{info.get('Name', '').lstrip('/')}: {status!r}")
            name = (info.get("Name") or "").lstrip("/")
            policy = (info.get("HostConfig") or {}).get("RestartPolicy") or {}
            if (state == AppState.FAILED and gone is None and policy.get("Name") == "on-failure"
                    and int(info.get("RestartCount") or 0) < int(policy.get("MaximumRetryCount") or 0)
                    and not name.endswith(CANCELLED_SUFFIX)):
                state = AppState.PENDING  # the engine restarts it (max_retries left)
            if name.endswith(CANCELLED_SUFFIX):
                cancelled = True
                if state == AppState.FAILED:
                    state = AppState.CANCELLED
            restarts += int(info.get("RestartCount") or 0)
            ended = state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)
            roles.setdefault(role, []).append(ReplicaStatus(
                id=k, state=state, role=role, hostname=(info.get("Config") or {}).get("Hostname", ""),
                exit_code=int(code) if ended and code is not None and gone is None else None,
                structured_error_msg=gone if gone is not None else NONE,
            ))
            role_order[role] = _int(labels.get(LABEL_ROLE_IDX), 0)
            replica_info[(role, k)] = info
            if role not in role_defs:
                role_defs[role] = _role_from(role, info)
        restarts += sum(int(i.get("RestartCount") or 0) for i in retired)
        for (role, k), info in missing.items():  # being started again (by this or another tx)
            roles.setdefault(role, []).append(ReplicaStatus(id=k, state=AppState.PENDING, role=role))
            role_order.setdefault(role, _int(_labels(info).get(LABEL_ROLE_IDX), 0))
            replica_info[(role, k)] = info
            if role not in role_defs:
                role_defs[role] = _role_from(role, info)
        tails: Dict[str, bytes] = {}  # containers' output read in this describe

        def output(cid: str) -> bytes:
            if cid not in tails:
                tails[cid] = self._output_tail(cid)
            return tails[cid]

        stops = {} if cancelled or lost or missing else _preempted.stopped_from_outside(
            self._docker(), infos, output, self._is_podman())  # no events call where every container noted or runs
        preempted = [] if cancelled or lost or missing else [i for i in infos if _preempted.is_preempted(i, stops)]
        if retry and preempted:  # stopped by the engine from outside: the attempt is the infrastructure's
            if any(_preempted.is_live(i) for i in infos):
                _preempted.warn_the_others(self._docker(), infos, stops)
            elif attempt < self._infra_bound(run_options):
                why = _preempted.reason(infos, stops)
                for info in infos:  # every replica again, as the next attempt (they resume)
                    start_again(self._docker(), app_id, info, attempt + 1, why)
                return self._describe(app_id, retry=False)
        if retry and not cancelled and (lost or missing):
            if missing or attempt < self._infra_bound(run_options):
                for r, k, _w in lost:  # a new attempt of the app
                    start_again(self._docker(), app_id, replica_info[(r, k)], attempt + 1)
                for info in missing.values():  # the attempt its retired container was retried as
                    start_again(self._docker(), app_id, info, _attempt_of(info) + 1)
                return self._describe(app_id, retry=False)
        if unknown:
            log.warning("unknown container states reported as UNKNOWN", app_id=app_id, states=unknown)
        ordered = sorted(roles, key=lambda r: (role_order[r], r))
        role_statuses = [RoleStatus(r, sorted(roles[r], key=lambda x: x.id)) for r in ordered]
        replicas = [x for rs in role_statuses for x in rs.replicas]
        app_state, msg = _states.app_state(replicas, cancelled)
        desc = DescribeAppResponse(
            app_id=app_id, state=app_state, num_restarts=restarts + attempt, msg=msg,
            roles_statuses=role_statuses, roles=[role_defs[r] for r in ordered],
            metadata={"network": f"tx-{app_id}", "engine": engine_location()},
        )
        desc.app, desc.metadata["run_options"] = stored_app, run_options
        if why_not_stored:
            desc.metadata["app_not_stored"] = why_not_stored
        if unknown:
            desc.msg = (desc.msg + "; " if desc.msg != NONE else "") + "unknown container states: " + ", ".join(unknown)
        why_lost = [why for _r, _k, why in sorted(lost, key=lambda x: (role_order[x[0]], x[0], x[1]))]
        if why_lost:
            desc.msg = (desc.msg + "; " if desc.msg != NONE else "") + "; ".join(why_lost)
        # the attempts tx retried: one per attempt index, why its first lost replica was lost
        earlier: Dict[int, str] = {}
        for n in {_attempt_of(i) for i in retired}:  # an attempt preempted: every replica retired
            earlier[n] = _preempted.reason([i for i in retired if _attempt_of(i) == n]) or next(
                (_labels(i)[_preempted.LABEL_RETRIED_BECAUSE] for i in infos + retired
                 if _attempt_of(i) == n + 1 and _labels(i).get(_preempted.LABEL_RETRIED_BECAUSE)), "")
        for i in sorted(retired, key=lambda i: (_attempt_of(i), _name_of(i))):
            lb = _labels(i)
            gone = _states.lost_while_running(i.get("State") or {}) or "the engine lost the container"
            if not earlier.get(_attempt_of(i)):
                earlier[_attempt_of(i)] = f"{lb.get(LABEL_ROLE_NAME, 'unknown')}[{lb.get(LABEL_REPLICA_ID, 0)}]: {gone}"
        desc.attempts = [Attempt(n, AppState.FAILED, FailureKind.INFRA, earlier.get(n, ""), retried=True)
                         for n in range(attempt)]
        if app_state == AppState.FAILED and why_lost:
            # the infrastructure's: no exit code or log of the container says why
            desc.structured_error_msg = why_lost[0]
            desc.attempts.append(Attempt(attempt, AppState.FAILED, FailureKind.INFRA, why_lost[0]))
        elif app_state == AppState.FAILED and preempted:  # beyond infra_retries
            bound = self._infra_bound(run_options)
            why = _preempted.reason(infos, stops) + (f"; infra_retries={bound} exhausted" if bound
                                              else "; infra_retries=0: not restarted")
            desc.structured_error_msg = why
            desc.attempts.append(Attempt(attempt, AppState.FAILED, FailureKind.INFRA, why))
        elif app_state == AppState.FAILED:
            desc.structured_error_msg, desc.root_cause = failure(replicas, replica_info, output, self._oom_reported)
            if attempt:
                desc.attempts.append(Attempt(attempt, AppState.FAILED, FailureKind.USER, desc.structured_error_msg))
        elif attempt:
            desc.attempts.append(Attempt(attempt, app_state))
        return desc

    @staticmethod
    def _infra_bound(run_options: Optional[Mapping[str, Any]]) -> int:
        """The app's ``infra_retries`` from its stored run options (a stored value tx would
        not take now: the default)."""
        try:
            return infra_retries(run_options or {})
        except InvalidRunConfigException:
            return infra_retries({})

    def _output_tail(self, cid: str) -> bytes:
        """The last :data:`CAUSE_TAIL_LINES` lines of container ``cid``'s output."""
        return self._docker().api.logs(cid, stdout=True, stderr=True, tail=CAUSE_TAIL_LINES)

    def _oom_reported(self) -> bool:
        """Whether the engine reports every out-of-memory kill: it runs on cgroup v2
        (``CgroupVersion`` of the engine's ``/info``; Docker's and podman's API both have
        it). Asked once per scheduler; False when the engine does not say."""
        if self._cgroup_version is None:
            try:
                self._cgroup_version = str(self._docker().info().get("CgroupVersion") or "")
            except Exception:  # noqa: BLE001 - unknown: the message then names the limit
                self._cgroup_version = ""
        return self._cgroup_version == "2"

    def _is_podman(self) -> bool:
        """Whether the engine is podman (a ``Components`` name of its ``/version``); asked
        once per scheduler; False where it does not say."""
        if self._podman is None:
            try:
                parts = self._docker().version().get("Components") or []
                self._podman = any("podman" in str(c.get("Name") or "").lower() for c in parts)
            except Exception:  # noqa: BLE001 - Docker's way then
                self._podman = False
        return self._podman

    @engine_call
    def list(self) -> List[ListAppResponse]:
        """Every app that has containers with tx's labels on this engine (any session).

        Raises:
            SchedulerError: no engine answers.
        """
        client = self._docker()
        apps: Dict[str, List[ReplicaStatus]] = {}
        names: Dict[str, str] = {}
        cancelled: Dict[str, bool] = {}
        for s in client.api.containers(all=True, filters={"label": LABEL_APP_ID}):
            labels = s.get("Labels") or {}
            app_id = labels.get(LABEL_APP_ID)
            if not app_id:
                continue
            status = s.get("State")
            code = _states.exit_code_from_status_text(s.get("Status") or "")
            state = _states.container_state(status, code)
            cname = _summary_name(s)
            if _RETIRED.search(cname):  # a container the engine lost, replaced by a new one
                continue
            if cname.endswith(CANCELLED_SUFFIX):
                cancelled[app_id] = True
                if state == AppState.FAILED:
                    state = AppState.CANCELLED
            apps.setdefault(app_id, []).append(ReplicaStatus(id=0, state=state, role=labels.get(LABEL_ROLE_NAME, "")))
            names[app_id] = labels.get(LABEL_APP_NAME, "")
        return [ListAppResponse(app_id=a, state=_states.app_state(r, cancelled.get(a, False))[0], name=names[a])
                for a, r in sorted(apps.items())]

    # -- cancel -------------------------------------------------------------------------------------
    @engine_call
    def _cancel_existing(self, app_id: str) -> None:
        """Mark every container of the app cancelled (its name gets ``.cancelled``), stop
        them (SIGTERM, SIGKILL after :data:`STOP_TIMEOUT` seconds; in parallel, so this
        takes at most about that long) and remove the app's network. The containers stay,
        with their logs. An app that has already ended is left as it is."""
        client = self._docker()
        import docker

        summaries = client.api.containers(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
        live = [s for s in summaries if (s.get("State") or "").lower() not in ("exited", "stopped", "dead")]
        if not live and not any(_summary_name(s).endswith(CANCELLED_SUFFIX) for s in summaries):
            self._remove_network(client, f"tx-{app_id}", [s["Id"] for s in summaries])
            return
        for s in summaries:
            name = _summary_name(s)
            if not name.endswith(CANCELLED_SUFFIX):
                try:
                    client.api.rename(s["Id"], name + CANCELLED_SUFFIX)
                except docker.errors.APIError as e:
                    log.warning("cannot mark container cancelled", container=name, error=api_reason(e))

        def stop(cid: str) -> None:
            try:
                client.api.stop(cid, timeout=STOP_TIMEOUT)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                log.warning("cannot stop container", container=cid[:12], error=api_reason(e))

        threads = [threading.Thread(target=stop, args=(s["Id"],), daemon=True) for s in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join(STOP_TIMEOUT + 30)
        self._remove_network(client, f"tx-{app_id}", [s["Id"] for s in summaries])
        log.info("cancelled", app_id=app_id, stopped=len(live))

def _create(client: Any, image: str, command: List[str], kwargs: Dict[str, Any]) -> Any:
    """``client.containers.create(image, command, **kwargs)``, with ``stop_timeout`` (the
    container's ``StopTimeout``, which the SDK's high-level ``create`` does not take: its
    low-level ``create_container`` does) passed through."""
    kw = dict(kwargs)
    timeout = kw.pop("stop_timeout", None)
    if timeout is None:
        return client.containers.create(image, command, detach=True, **kw)
    from docker.models.containers import _create_container_args  # the SDK's own translation

    args = _create_container_args({**kw, "image": image, "command": command, "detach": True,
                                   "version": client.api._version})
    created = client.api.create_container(**args, stop_timeout=int(timeout))
    return client.containers.get(created["Id"])


def create_scheduler(session_name: str, client: Optional[Any] = None, **kwargs: Any) -> DockerScheduler:
    """Factory registered as ``local_docker``.

    Args:
        session_name: the session part of app handles.
        client: a ``docker.DockerClient`` (default: from ``DOCKER_HOST`` and Docker's
            other environment variables, made on first use).
    """
    return DockerScheduler(session_name=session_name, client=client)
