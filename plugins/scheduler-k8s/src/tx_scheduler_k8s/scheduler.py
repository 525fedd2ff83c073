"""What the three Kubernetes schedulers share: the dryrun request, run options, describe,
list, cancel, sweeps (one Indexed Job) and the client; pods as replicas are
:mod:`tx_scheduler_k8s._status`, attempts :mod:`tx_scheduler_k8s._attempts`, logs
:mod:`tx_scheduler_k8s._logs`.

A subclass says how an AppDef becomes its object (``_submit_dryrun``), how to create it
(``schedule``), how its object's status reads (``_app_state``), which roles it holds
(``_roles``) and how to cancel it.
"""
from __future__ import annotations

import abc
import math
import re
import time
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

from tx import get_logger
from tx.schedulers import DescribeAppResponse, ListAppResponse, Scheduler, failure_once
from tx.specs import (
    AppDef, AppDryRunInfo, AppState, CfgVal, FailureKind, InvalidRunConfigException, Role, RoleStatus, is_terminal,
    markdown_table, read_stored_appdef_and_options, runopts)

from tx_scheduler_k8s import _names, _plane, _pod, _preempt, _sweep
from tx_scheduler_k8s._attempts import Saves, build_attempts
from tx_scheduler_k8s._client import Kube, KubeError
from tx_scheduler_k8s._job import KubernetesJob
from tx_scheduler_k8s._logs import PodLogs
from tx_scheduler_k8s._names import DEFAULT_NAMESPACE
from tx_scheduler_k8s._status import (CAUSE_TAIL_LINES, DISRUPTION_TARGET, ERROR_TAIL_LINES, Failed, cause_first,
                                      disruption, failure, pending_reason, replica_statuses, ts)

__all__ = ["CAUSE_TAIL_LINES", "DEFAULT_NAMESPACE", "DISRUPTION_TARGET", "ERROR_TAIL_LINES", "KubernetesBase",
           "KubernetesJob", "check_namespace", "common_runopts", "disruption", "runopts_markdown"]

log = get_logger(__name__)


def common_runopts(opts: runopts) -> runopts:
    """Options every Kubernetes scheduler has (TorchX's names)."""
    opts.add("namespace", type_=str, default=DEFAULT_NAMESPACE, help="Kubernetes namespace to create the app in")
    opts.add("service_account", type_=str, help="service account the pods run as")
    opts.add("image_repo", type_=str, help="(with a workspace) image repository to push the built image to")
    opts.add("image_secret", type_=str, help="name of the Secret pods pull their images with (imagePullSecrets)")
    opts.add("quiet", type_=bool, default=False, help="(with a workspace) do not print the image build log")
    opts.add(_preempt.OPTION, type_=int, default=_preempt.DEFAULT_GRACE,
             help="seconds between the warning (SIGTERM) of a pod evicted, preempted or deleted and its SIGKILL: "
             "terminationGracePeriodSeconds of every pod, and TX_PREEMPT_GRACE in its env")
    return opts


def runopts_markdown(opts: runopts) -> str:
    """Run options as the Markdown table of the README (:func:`tx.specs.runopts.markdown_table`)."""
    return markdown_table(opts)


def check_namespace(cfg: Mapping[str, CfgVal]) -> str:
    """The ``namespace`` option, checked as a DNS label.

    Raises:
        InvalidRunConfigException: not a valid namespace name, or a ``preempt_grace`` that
            is not whole seconds >= 0.
    """
    ns = str(cfg.get("namespace") or DEFAULT_NAMESPACE)
    _preempt.grace(cfg)
    if not _names.is_label(ns):
        raise InvalidRunConfigException(
            f"run option 'namespace': {ns!r} is not a Kubernetes namespace name "
            "(at most 63 lowercase letters, digits and '-')", "namespace", cfg,
        )
    for key in ("service_account", "image_secret", "priority_class", "priority_class_name"):
        val = cfg.get(key)
        if val and not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", str(val)):
            raise InvalidRunConfigException(
                f"run option {key!r}: {val!r} is not a Kubernetes object name", key, cfg,
            )
    return ns


class KubernetesBase(PodLogs, Scheduler[KubernetesJob]):
    """Shared behaviour of ``kubernetes``, ``kubernetes_jobset`` and ``kubernetes_mcad``.

    Args:
        backend: the scheduler name.
        session_name: the session part of app handles.
        client: a ``kubernetes.client.ApiClient`` (None: from ``$KUBECONFIG``, else
            in-cluster; see :class:`tx_scheduler_k8s._client.Kube`).
        context: kubeconfig context to use (None: the current one).
    """

    #: ``--workspace`` builds an image (tx-scheduler-docker's ``docker`` kind)
    workspace_kind = "docker"
    #: (group, version, plural, kind) of the object each app is
    GVK: ClassVar[Tuple[str, str, str, str]] = ("", "", "", "")
    #: the pod label that holds the replica's index within its role
    REPLICA_LABEL: ClassVar[str] = _pod.LABEL_REPLICA_ID

    def __init__(self, backend: str, session_name: str, client: Any = None, context: Optional[str] = None) -> None:
        super().__init__(backend, session_name)
        self.kube = Kube(client, context, backend)

    @classmethod
    def create(cls, session_name: str, client: Any = None, context: Optional[str] = None,
               **kwargs: Any) -> "KubernetesBase":
        """The factory of each Kubernetes scheduler (``create_scheduler`` of its module, as
        registered in hooks.py; TorchX's signature): ``cls(session_name, client, context)``.

        Args:
            session_name: the session part of app handles.
            client: a ``kubernetes.client.ApiClient`` (None: from ``$KUBECONFIG``, else
                in-cluster).
            context: kubeconfig context to use (None: the current one).
            kwargs: other keyword arguments (TorchX's factories take some): ignored, logged
                at debug level.
        """
        if kwargs:
            log.debug("k8s_ignored_scheduler_params", params=sorted(kwargs))
        return cls(session_name, client=client, context=context)  # type: ignore[call-arg]

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without resources are allowed (the cluster's defaults apply); names and
        options are checked by the dryrun."""
        if not app.roles:
            raise ValueError(f"app {app.name!r} has no roles")

    # -- object access ----------------------------------------------------------------------
    def _group(self, cfg: Optional[Mapping[str, CfgVal]] = None) -> Tuple[str, str, str, str]:
        return self.GVK

    def _get(self, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        g, v, plural, _ = self._group()
        return self.kube.get_object(g, v, plural, namespace, name)

    def _namespace_of_context(self) -> str:
        """The namespace of the kubeconfig context in use (``default`` without one)."""
        try:
            from kubernetes import config

            from tx_scheduler_k8s._client import kubeconfig_path

            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig_path())
            if self.kube._context:
                active = next((c for c in contexts if c.get("name") == self.kube._context), active)
            return str((active or {}).get("context", {}).get("namespace") or DEFAULT_NAMESPACE)
        except Exception:  # noqa: BLE001 - no kubeconfig: in-cluster or default
            try:  # a pod's own namespace (https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/)
                with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                    return f.read().strip() or DEFAULT_NAMESPACE
            except OSError:
                return DEFAULT_NAMESPACE

    def _create(self, req: KubernetesJob) -> Dict[str, Any]:
        g, v, plural, _ = self._group()
        return self.kube.create_object(g, v, plural, req.namespace, req.resource)

    def schedule(self, dryrun_info: Any) -> str:
        """Create the app's object; returns ``<namespace>:<name>``.

        Raises:
            KubeError: the API server refused it (409: the name exists; 403: no permission;
                404: no such namespace) or cannot be reached; nothing is left behind.
        """
        req: KubernetesJob = dryrun_info.request
        try:
            self._create(req)
        finally:
            self._plane(req.namespace).invalidate()  # the next look asks the API server
        log.info("k8s_submitted", scheduler=self.backend, namespace=req.namespace, name=req.app_id)
        return f"{req.namespace}:{req.app_id}"

    # -- subclass hooks: each backend (Volcano Job, JobSet, AppWrapper) defines both -------------
    @abc.abstractmethod
    def _app_state(self, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> Tuple[AppState, str, int]:
        """``(state, backend message, restarts)`` of the app's object."""

    @abc.abstractmethod
    def _roles(self, obj: Dict[str, Any]) -> List[Role]:
        """The app's roles, in order, rebuilt from its object."""

    # -- describe ---------------------------------------------------------------------------
    def _pods(self, namespace: str, name: str, extra: str = "") -> List[Dict[str, Any]]:
        sel = f"{_pod.LABEL_INSTANCE}={name}" + (f",{extra}" if extra else "")
        return self.kube.list_pods(namespace, sel)

    # -- the status plane: one list per kind for every app of a namespace --------------------------
    def _plane(self, namespace: str) -> Any:
        return _plane.plane(self.backend, self.kube.host, namespace)

    def _fetch(self, ns: str) -> Dict[str, Any]:
        """One label-selected list per kind (:mod:`tx_scheduler_k8s._plane`)."""
        g, v, plural, _ = self._group()
        selector = f"{_pod.LABEL_MANAGED_BY}={_pod.MANAGED_BY}"
        objs = {o["metadata"]["name"]: o for o in self.kube.list_objects(g, v, plural, ns, selector)}
        pods = _plane.group_pods(self.kube.list_pods(ns, selector), _pod.LABEL_INSTANCE)
        jobs = {j["metadata"]["name"]: j for j in self.kube.list_objects(
            _sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, ns, f"{selector},{_sweep.SWEEP_LABEL}")} if self.SWEEP_ARRAYS else {}
        return {"objs": objs, "pods": pods, "jobs": jobs}

    def _looked_up(self, ns: str, name: str, kind: str) -> Tuple[Optional[Dict[str, Any]], Optional[List[Dict[str, Any]]], float]:
        """The object ``name`` (``kind``: ``objs`` or ``jobs``) and its pods from the
        namespace's shared snapshot, and when it was asked (epoch s); ``(None, None, t)``
        when the snapshot lacks it (created since, or not tx's) or cannot be had (a
        namespace that does not exist, no permission to list)."""
        try:
            snap = self._plane(ns).get(lambda: self._fetch(ns))
        except KubeError as e:
            if e.status in (403, 404):
                return None, None, time.time()
            raise
        obj = (snap.items.get(kind) or {}).get(name)
        if obj is None:
            return None, None, time.time()
        return obj, list((snap.items.get("pods") or {}).get(name, ())), snap.fetched_at

    def states_of(self, app_ids: Sequence[str]) -> Optional[Dict[str, AppState]]:  # type: ignore[override]
        """The states of many apps (a sweep's trials) from their namespaces' shared snapshots
        (one list per kind and namespace); apps a snapshot lacks are left out (the Runner
        describes them).

        Raises:
            KubeError: the API server refused a list or cannot be reached.
        """
        out: Dict[str, AppState] = {}
        snaps: Dict[str, Any] = {}
        for app_id in app_ids:
            ns, name = _names.split_app_id(app_id, DEFAULT_NAMESPACE)
            if not _names.is_label(ns):
                continue
            if ns not in snaps:
                try:
                    snaps[ns] = self._plane(ns).get(lambda: self._fetch(ns)).items
                except KubeError as e:
                    if e.status not in (403, 404):
                        raise
                    snaps[ns] = {}
            items, trial = snaps[ns], _sweep.trial_of(name)
            obj = (items.get("jobs" if trial else "objs") or {}).get(trial[0] if trial else name)
            if obj is None:
                continue
            pods = list((items.get("pods") or {}).get(obj["metadata"]["name"], ()))
            if trial is not None:
                out[app_id] = _sweep.trial_state(obj, trial[1], _sweep.trial_pods(pods, trial[1]))[0]
            else:
                out[app_id] = self._app_state(obj, pods)[0]
        return out

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """State, per-replica states (exit codes, host names), why a pending app waits
        (``msg``), why a failed one failed (``structured_error_msg``) and the rebuilt
        roles; None if the object does not exist. From the namespace's shared snapshot
        (``metadata["status_fetched_at"]``: when the API server was asked, epoch s); an
        object it lacks is asked on its own.

        Raises:
            KubeError: the API server refused the request or cannot be reached
                (:class:`tx_scheduler_k8s._client.KubeThrottled`: it kept answering 429).
        """
        ns, name = _names.split_app_id(app_id, DEFAULT_NAMESPACE)
        trial = _sweep.trial_of(name)
        if trial is not None and _names.is_label(ns):
            obj, all_pods, fetched_at = self._looked_up(ns, trial[0], "jobs")
            if obj is None:
                obj = self.kube.get_object(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, ns, trial[0])
                all_pods = self._pods(ns, trial[0]) if obj is not None else []
            if obj is None:
                return None
            pods = _sweep.trial_pods(all_pods or [], trial[1])
            state, msg, restarts = _sweep.trial_state(obj, trial[1], pods)
            roles = _sweep.trial_roles(obj)
            statuses, failed = self._replicas(roles, pods, state, _pod.LABEL_REPLICA_ID)
        else:
            if not _names.is_label(name) or not _names.is_label(ns):
                return None
            obj, pods, fetched_at = self._looked_up(ns, name, "objs")  # type: ignore[assignment]
            if obj is None:
                obj = self._get(ns, name)
                if obj is None:
                    return None
                pods = self._pods(ns, name)
            state, msg, restarts = self._app_state(obj, pods)
            roles = self._roles(obj)
            statuses, failed = self._replicas(roles, pods, state)
        resp = DescribeAppResponse(app_id=app_id, state=state, num_restarts=restarts, msg=msg, roles=roles,
                                   roles_statuses=statuses)
        resp.metadata["status_fetched_at"] = fetched_at  # epoch s; the status is at most this old
        stored = (obj["metadata"].get("annotations") or {}).get(_pod.ANNOTATION_APPDEF)
        resp.app, why, resp.metadata["run_options"] = read_stored_appdef_and_options(
            stored, f"annotation {_pod.ANNOTATION_APPDEF}", _pod.APPDEF_LIMIT)
        if why:
            resp.metadata["app_not_stored"] = why
        if state == AppState.PENDING:
            why = pending_reason(pods, roles)
            if why:
                resp.msg = why if not msg else f"{msg}: {why}"
        if state == AppState.FAILED:
            resp.structured_error_msg, resp.root_cause = self._failure(ns, failed, msg, statuses)
        if trial is None:
            resp.attempts = build_attempts(self._restart_kinds(obj), lambda: self._infra_end(obj, pods), pods, state,
                                           restarts, cause_first(failed, resp.root_cause), self._saves(resp, obj, pods))
            resp.metadata["attempts"] = [a.to_json() for a in resp.attempts]
        return resp

    def _failure(self, ns: str, failed: List[Failed], msg: str, statuses: List[RoleStatus]) -> Any:
        """:func:`failure`, its pods' logs read once per process while the failed pods are
        unchanged (following 1,000 failed apps reads their logs once, not every tick; a pod
        that fails after a look is another key: it may be the cause)."""
        if not failed:
            return failure(self.kube, ns, failed, msg, statuses)
        key = (ns, tuple((f[3]["metadata"].get("uid"), f[3]["metadata"].get("resourceVersion")) for f in failed), msg)
        return failure_once(self.__dict__.setdefault("_failures", {}), key, statuses,
                            lambda: failure(self.kube, ns, failed, msg, statuses))

    # -- attempts: infrastructure or user failures ---------------------------------------------
    def _saves(self, resp: DescribeAppResponse, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> Saves:
        """What names an evicted attempt's save (:class:`tx_scheduler_k8s._attempts.Saves`):
        the app's ``TX_CHECKPOINT_DIR`` (its stored AppDef's roles, else its pods' env) where
        this host reads it, the pods' grace, the object's last state change, and the creation
        of the current attempt's first pod."""
        envs = [dict(r.env) for r in (resp.app.roles if resp.app else [])] + _preempt.container_env(pods)
        location = _preempt.checkpoint_dir(envs)
        if location is None:
            return Saves()
        st = obj.get("status") or {}
        changes = [ts(c.get("lastTransitionTime")) for c in [st.get("state") or {}, *(st.get("conditions") or [])]
                   if c.get("lastTransitionTime")]
        live = [ts(p["metadata"].get("creationTimestamp")) for p in pods
                if not p["metadata"].get("deletionTimestamp") and not disruption(p)]
        opts = resp.metadata.get("run_options") or {}
        default = opts.get(_preempt.OPTION) if isinstance(opts.get(_preempt.OPTION), int) else _preempt.DEFAULT_GRACE
        return Saves(location, float(_preempt.pod_grace(pods, default)),
                     max(changes) if changes else math.inf, min(live) if live else math.inf)

    def _restart_kinds(self, obj: Dict[str, Any]) -> List[FailureKind]:
        """Which kinds of failure restart this app's object (its controller's retry
        settings, as the dryrun wrote them); the base: none."""
        return []

    def _infra_end(self, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> str:
        """Where the controller's own status says the app ended on an infrastructure failure
        whose pod is gone (evicted pods are deleted): why, in a few words
        (``DisruptionTarget EvictionByEvictionAPI``), else ""."""
        return ""

    def _replicas(self, roles: List[Role], pods: List[Dict[str, Any]], state: AppState,
                  replica_label: Optional[str] = None) -> Tuple[List[RoleStatus], List[Failed]]:
        return replica_statuses(roles, pods, state, replica_label or self.REPLICA_LABEL)

    # -- list and cancel ----------------------------------------------------------------------
    def list(self) -> List[ListAppResponse]:
        """Apps tx created in the kubeconfig context's namespace (label
        ``app.kubernetes.io/managed-by=tx``), ids ``<namespace>:<name>``."""
        ns = self._namespace_of_context()
        g, v, plural, _ = self._group()
        out = []
        selector = f"{_pod.LABEL_MANAGED_BY}={_pod.MANAGED_BY}"
        objs = self.kube.list_objects(g, v, plural, ns, selector)
        pods: Dict[str, List[Dict[str, Any]]] = {}
        if objs:
            for pod in self.kube.list_pods(ns, selector):
                pods.setdefault((pod["metadata"].get("labels") or {}).get(_pod.LABEL_INSTANCE, ""), []).append(pod)
        for obj in objs:
            meta = obj["metadata"]
            state, _, _ = self._app_state(obj, pods.get(meta["name"], []))
            out.append(ListAppResponse(app_id=f"{ns}:{meta['name']}", state=state,
                                       name=(meta.get("labels") or {}).get(_pod.LABEL_APP_NAME, "")))
        return out + self._list_trials(ns, selector, pods if objs else None)

    def _list_trials(self, ns: str, selector: str,
                     pods: Optional[Dict[str, List[Dict[str, Any]]]]) -> List[ListAppResponse]:
        """The trials of the sweeps' Indexed Jobs in ``ns``, one row each (ids
        ``<namespace>:<job>_<index>``): one label-selected list of Jobs (and of pods, where
        not listed already)."""
        if not self.SWEEP_ARRAYS:
            return []
        jobs = self.kube.list_objects(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, ns, f"{selector},{_sweep.SWEEP_LABEL}")
        if jobs and pods is None:
            pods = {}
            for pod in self.kube.list_pods(ns, selector):
                pods.setdefault((pod["metadata"].get("labels") or {}).get(_pod.LABEL_INSTANCE, ""), []).append(pod)
        out = []
        for job in jobs:
            meta = job["metadata"]
            name = (meta.get("labels") or {}).get(_pod.LABEL_APP_NAME, "")
            job_pods = (pods or {}).get(meta["name"], [])
            for i in range(int(job["spec"].get("completions") or 1)):
                state, _, _ = _sweep.trial_state(job, i, _sweep.trial_pods(job_pods, i))
                out.append(ListAppResponse(app_id=f"{ns}:{meta['name']}_{i}", state=state, name=name))
        return out

    # -- sweeps: one Indexed Job ---------------------------------------------------------------
    #: whether single-replica trials go as one Indexed Job (tx_scheduler_k8s._sweep)
    SWEEP_ARRAYS: ClassVar[bool] = True
    #: inside :meth:`submit_dryrun_many`: trial 0's app where the trials are alike
    _like: Optional[AppDef] = None

    def submit_dryrun_many(self, apps: Any, cfg: Mapping[str, CfgVal]) -> List[AppDryRunInfo[Any]]:
        """:meth:`tx.schedulers.Scheduler.submit_dryrun_many` (raises as it does); each trial's
        AppDef annotation made on first use of its ``resource`` where the scheduler defers it
        (an Indexed Job keeps none): the first's now (one that cannot be stored is refused).
        Of trials alike but for their args and env (:func:`tx_scheduler_k8s._sweep.alike`),
        a flavour that dry-runs with :meth:`_dryrun_job` makes trial 0's request now (what the
        trials share is checked there), each other's on first use (an Indexed Job uses none)."""
        apps = list(apps)
        self._like = apps[0] if _sweep.alike(apps) else None
        try:
            infos = super().submit_dryrun_many(apps, cfg)  # (with _many: trials' AppDefs deferred)
        finally:
            self._like = None
        if infos:
            _ = infos[0].request.resource  # noqa: F841 - made now (TypeError: it cannot be stored)
        return infos

    def _dryrun_job(self, app: AppDef, cfg: Mapping[str, CfgVal],
                    make: Callable[[AppDef, Mapping[str, CfgVal]], KubernetesJob]) -> AppDryRunInfo[KubernetesJob]:
        """``make(app, cfg)``: the flavour's request; of a trial alike trial 0 inside
        :meth:`submit_dryrun_many`, made on first use of its ``resource``. Raises as ``make``."""
        if self._like is None or app is self._like:
            return AppDryRunInfo(make(app, cfg), str)
        own = dict(cfg)
        return AppDryRunInfo(KubernetesJob(resource={}, namespace=check_namespace(own),
                                           later=lambda _: make(app, own).resource), str)

    def _sweep_unsupported(self, cfg: Mapping[str, CfgVal]) -> Optional[str]:
        """Why this scheduler, with these run options, submits no Indexed Job (None: it does)."""
        return None if self.SWEEP_ARRAYS else f"{self.backend} has no native array"

    def _sweep_template(self, cfg: Mapping[str, CfgVal]) -> Optional[Any]:
        """What the scheduler adds to the Indexed Job's pod template (a function of the
        template), or None."""
        return None

    def _sweep_job(self, trials: Sequence[AppDryRunInfo[Any]],
                   max_parallel: Optional[int]) -> Tuple[Optional[KubernetesJob], str]:
        apps = [t._app for t in trials]
        cfg = trials[0]._cfg if trials else {}
        why = _sweep.not_an_array(apps) or self._sweep_unsupported(cfg or {})
        if why:
            return None, why
        ns = check_namespace(cfg)
        job, table, why = _sweep.indexed_job(apps, cfg, max_parallel, ns, self._sweep_template(cfg))
        return (KubernetesJob(resource=job, namespace=ns, table=table) if job is not None else None), why

    def submit_sweep_dryrun(self, trials: Sequence[AppDryRunInfo[Any]],
                            max_parallel: Optional[int]) -> Optional[AppDryRunInfo[Any]]:
        """One Indexed Job (``batch/v1``) for trials of one replica each
        (:mod:`tx_scheduler_k8s._sweep`); None (one app per trial) for trials of several
        replicas (gangs) and where the scheduler or its options rule it out
        (:meth:`sweep_not_an_array` says why).

        Raises:
            ValueError: a role name that cannot be made a Kubernetes name.
            InvalidRunConfigException: a bad namespace.
        """
        req, why = self._sweep_job(trials, max_parallel)
        if req is None:
            log.info("k8s_sweep_not_an_array", scheduler=self.backend, reason=why)
            return None
        return AppDryRunInfo(req, str)

    def sweep_not_an_array(self, trials: Sequence[AppDryRunInfo[Any]]) -> str:
        """Why these trials are one app each (see :meth:`submit_sweep_dryrun`)."""
        return self._sweep_job(trials, None)[1] or f"{self.backend} has no native array for these trials"

    def schedule_sweep(self, dryrun_info: AppDryRunInfo[Any]) -> List[str]:
        """Create the table's ConfigMap, then the Indexed Job, then make the ConfigMap the
        Job's dependent (deleted with it); returns ``<namespace>:<job>_<index>`` for each
        trial. A Job the API server refuses leaves no ConfigMap behind.

        Raises:
            KubeError: the API server refused the ConfigMap or the Job, or cannot be reached.
        """
        req: KubernetesJob = dryrun_info.request
        try:
            if req.table is None:
                self.kube.create_object(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, req.namespace, req.resource)
            else:
                self._create_with_table(req)
        finally:
            self._plane(req.namespace).invalidate()  # the next look asks the API server
        n = int(req.resource["spec"]["completions"])
        log.info("k8s_submitted_indexed_job", scheduler=self.backend, namespace=req.namespace, name=req.app_id,
                 trials=n)
        return [f"{req.namespace}:{req.app_id}_{i}" for i in range(n)]

    def _create_with_table(self, req: KubernetesJob) -> None:
        assert req.table is not None
        cm = req.table["metadata"]["name"]
        self.kube.create_config_map(req.namespace, req.table)
        try:
            job = self.kube.create_object(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, req.namespace, req.resource)
        except Exception as e:
            try:
                self.kube.delete_config_map(req.namespace, cm)
            except Exception as e2:  # noqa: BLE001 - said with the refusal
                raise KubeError(f"{e}; and the sweep's ConfigMap {req.namespace}/{cm} is left: {e2}",
                                getattr(e, "status", 0)) from e
            raise
        owner = {"apiVersion": _sweep.API_VERSION, "kind": _sweep.KIND, "name": job["metadata"]["name"],
                 "uid": job["metadata"]["uid"]}
        try:
            self.kube.patch_config_map(req.namespace, cm, {"metadata": {"ownerReferences": [owner]}})
        except Exception as e:  # noqa: BLE001 - the Job runs; only its clean-up is the user's
            log.warning("k8s_sweep_table_not_owned", namespace=req.namespace, config_map=cm, error=str(e),
                        hint=f"delete ConfigMap {cm} with the Job")

    def cancel_many(self, app_ids: Sequence[str]) -> None:
        """Cancel apps and trials: a sweep's Indexed Job is suspended and marked cancelled
        (one patch for all its trials: Kubernetes stops a Job's indexes only all together,
        so the unfinished trials of a Job are cancelled together); others as :meth:`cancel`.

        Raises:
            ValueError: some, not all, unfinished trials of one Job are asked for.
            KubeError: the API server refused or cannot be reached.
        """
        jobs: Dict[Tuple[str, str], List[int]] = {}
        for app_id in app_ids:
            ns, name = _names.split_app_id(app_id, DEFAULT_NAMESPACE)
            trial = _sweep.trial_of(name)
            if trial is None:
                self.cancel(app_id)
            else:
                jobs.setdefault((ns, trial[0]), []).append(trial[1])
        for (ns, job), indexes in jobs.items():
            self._cancel_trials(ns, job, indexes)

    def _cancel_trials(self, ns: str, job: str, indexes: List[int]) -> None:
        obj = self.kube.get_object(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, ns, job)
        if obj is None:
            return
        pods = self._pods(ns, job)
        live = [i for i in range(int(obj["spec"].get("completions") or 1))
                if not is_terminal(_sweep.trial_state(obj, i, _sweep.trial_pods(pods, i))[0])]
        if not live:
            return
        if not set(live) <= set(indexes):
            raise ValueError(f"trials {','.join(map(str, sorted(set(live) - set(indexes))))} of Job {ns}/{job} are "
                             "still running: Kubernetes stops the trials of one Indexed Job only all together, so "
                             "cancel the sweep")
        try:
            self.kube.patch_object(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, ns, job, {
                "metadata": {"annotations": {_sweep.CANCELLED: "true"}}, "spec": {"suspend": True}})
        finally:
            self._plane(ns).invalidate()  # the next look asks the API server
        log.info("k8s_cancelled_sweep_job", scheduler=self.backend, namespace=ns, name=job, trials=len(live))

    def cancel(self, app_id: str) -> None:
        """Cancel the app if it exists and has not ended (idempotent); a sweep's trial as
        :meth:`cancel_many` does."""
        trial = _sweep.trial_of(_names.split_app_id(app_id, DEFAULT_NAMESPACE)[1])
        if trial is not None:
            self.cancel_many([app_id])
            return
        desc = self.describe(app_id)
        if desc is not None and not is_terminal(desc.state):
            try:
                self._cancel_existing(app_id)
            finally:
                self._plane(_names.split_app_id(app_id, DEFAULT_NAMESPACE)[0]).invalidate()

    def close(self) -> None:
        self.kube.close()

