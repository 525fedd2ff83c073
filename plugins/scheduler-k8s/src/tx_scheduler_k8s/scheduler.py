"""What the three Kubernetes schedulers share: the dryrun request, run options, pods as
replicas (states, exit codes, why an app waits or failed), logs, list and the client.

A subclass says how an AppDef becomes its object (``_submit_dryrun``), how to create it
(``schedule``), how its object's status reads (``_app_state``), which roles it holds
(``_roles``) and how to cancel it.
"""
from __future__ import annotations

import abc
import codecs
import datetime as _dt
import math
import re
import time
from typing import Any, ClassVar, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import attrs

from tx.log import get_logger
from tx.schedulers import (DescribeAppResponse, ListAppResponse, Scheduler, SchedulerError, Stream, filter_regex,
                           line_blocks, split_lines_iterator)
from tx.specs import AppDef, AppDryRunInfo, AppState, CfgVal, InvalidRunConfigException, Role, is_terminal, runopts
from tx.schedulers.why import names_cause, root_cause
from tx.specs.files import read_stored_appdef_and_options
from tx.specs.status import Attempt, FailureKind, ReplicaStatus, RoleStatus, RootCause

from tx_scheduler_k8s import _names, _pod, _sweep
from tx_scheduler_k8s._client import Kube, KubeError
from tx_scheduler_k8s._states import POD_STATES

log = get_logger(__name__)

DEFAULT_NAMESPACE = "default"
#: lines of a failed pod's log read for its root cause (tx.schedulers.why): torchrun prints
#: its report after the failed worker's traceback, and other workers' lines may follow
CAUSE_TAIL_LINES = 1000
#: lines of a failed pod's log quoted in ``structured_error_msg`` when no root cause is named
ERROR_TAIL_LINES = 3
_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ")

def _yaml_dump(obj: Any) -> str:
    from tx_scheduler_k8s import _yaml

    return _yaml.dump(obj)


@attrs.define
class KubernetesJob:
    """A dryrun request: the object to create (``resource``, a dict in the API's JSON
    shape), its namespace, and the images a workspace build would push.

    ``str()`` is the object as YAML, as ``kubectl create -f`` reads it.
    """

    resource: Dict[str, Any]
    namespace: str
    images_to_push: Dict[str, Tuple[str, str]] = attrs.field(factory=dict)

    @property
    def app_id(self) -> str:
        """The object's name (the app id without its namespace)."""
        return str(self.resource["metadata"]["name"])

    def __str__(self) -> str:
        return _yaml_dump(self.resource)

    __repr__ = __str__


def common_runopts(opts: runopts) -> runopts:
    """Options every Kubernetes scheduler has (TorchX's names)."""
    opts.add("namespace", type_=str, default=DEFAULT_NAMESPACE, help="Kubernetes namespace to create the app in")
    opts.add("service_account", type_=str, help="service account the pods run as")
    opts.add("image_repo", type_=str, help="(with a workspace) image repository to push the built image to")
    opts.add("image_secret", type_=str, help="name of the Secret pods pull their images with (imagePullSecrets)")
    opts.add("quiet", type_=bool, default=False, help="(with a workspace) do not print the image build log")
    return opts


#: the pod condition of a pod evicted, preempted or lost with its node
#: (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions)
DISRUPTION_TARGET = "DisruptionTarget"


def disruption(pod: Mapping[str, Any]) -> str:
    """The reason of ``pod``'s ``DisruptionTarget`` condition (status True):
    ``EvictionByEvictionAPI``, ``PreemptionByScheduler``, ``DeletionByTaintManager``,
    ``TerminationByKubelet`` ...; "" when the pod has none (its end was not the
    infrastructure's)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == DISRUPTION_TARGET and c.get("status") == "True":
            return str(c.get("reason") or DISRUPTION_TARGET)
    return ""


def runopts_markdown(opts: runopts) -> str:
    """Run options as the Markdown table of the README (option, type, default, help)."""
    from tx.specs.runopts import get_type_name

    rows = ["| option | type | default | description |", "| --- | --- | --- | --- |"]
    for key, opt in opts:
        req = " (required)" if opt.is_required else ""
        rows.append(f"| `{key}` | {get_type_name(opt.opt_type)} | {opt.default!r} | {opt.help}{req} |")
    return "\n".join(rows) + "\n"


def check_namespace(cfg: Mapping[str, CfgVal]) -> str:
    """The ``namespace`` option, checked as a DNS label.

    Raises:
        InvalidRunConfigException: not a valid namespace name.
    """
    ns = str(cfg.get("namespace") or DEFAULT_NAMESPACE)
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


_FRACTION = re.compile(r"(\.\d{1,6})\d*")


def _container_status(code: Any, sig: Any) -> Optional[int]:
    """A terminated container's status as :func:`tx.schedulers.why.root_cause` takes it:
    its exit code, or minus its signal where the kubelet reports one (``signal``, set by
    some runtimes) or the code is 128 + a signal (129..159, as shells report it)."""
    if isinstance(sig, int) and sig > 0:
        return -sig
    if not isinstance(code, int):
        return None
    return -(code - 128) if 128 < code < 160 else code


def _ts(value: Optional[str]) -> float:
    """An RFC 3339 time of the API server (``Z``, nanoseconds) as epoch seconds (inf if
    unreadable)."""
    if not value:
        return math.inf
    text = _FRACTION.sub(r"\1", value.replace("Z", "+00:00"), count=1)
    try:
        return _dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return math.inf


def _terminated(pod: Mapping[str, Any]) -> Dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term:
            return term
    return {}


class KubernetesBase(Scheduler[KubernetesJob]):
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
        self.kube = Kube(client, context)

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
        self._create(req)
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

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """State, per-replica states (exit codes, host names), why a pending app waits
        (``msg``), why a failed one failed (``structured_error_msg``) and the rebuilt
        roles; None if the object does not exist.

        Raises:
            KubeError: the API server refused the request or cannot be reached.
        """
        ns, name = _names.split_app_id(app_id, DEFAULT_NAMESPACE)
        trial = _sweep.trial_of(name)
        if trial is not None and _names.is_label(ns):
            obj = self.kube.get_object(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, ns, trial[0])
            if obj is None:
                return None
            pods = _sweep.trial_pods(self._pods(ns, trial[0]), trial[1])
            state, msg, restarts = _sweep.trial_state(obj, trial[1], pods)
            roles = _sweep.trial_roles(obj)
            statuses, failed = self._replicas(roles, pods, state, _pod.LABEL_REPLICA_ID)
        else:
            if not _names.is_label(name) or not _names.is_label(ns):
                return None
            obj = self._get(ns, name)
            if obj is None:
                return None
            pods = self._pods(ns, name)
            state, msg, restarts = self._app_state(obj, pods)
            roles = self._roles(obj)
            statuses, failed = self._replicas(roles, pods, state)
        resp = DescribeAppResponse(app_id=app_id, state=state, num_restarts=restarts, msg=msg, roles=roles,
                                   roles_statuses=statuses)
        stored = (obj["metadata"].get("annotations") or {}).get(_pod.ANNOTATION_APPDEF)
        resp.app, why, resp.metadata["run_options"] = read_stored_appdef_and_options(
            stored, f"annotation {_pod.ANNOTATION_APPDEF}", _pod.APPDEF_LIMIT)
        if why:
            resp.metadata["app_not_stored"] = why
        if state == AppState.PENDING:
            why = self._pending_reason(pods, roles)
            if why:
                resp.msg = why if not msg else f"{msg}: {why}"
        if state == AppState.FAILED:
            resp.structured_error_msg, resp.root_cause = self._failure(ns, failed, msg, statuses)
        if trial is None:
            resp.attempts = self._attempts(obj, pods, state, restarts, failed)
            resp.metadata["attempts"] = [a.to_json() for a in resp.attempts]
        return resp

    # -- attempts: infrastructure or user failures ---------------------------------------------
    def _restart_kinds(self, obj: Dict[str, Any]) -> List[FailureKind]:
        """Which kinds of failure restart this app's object (its controller's retry
        settings, as the dryrun wrote them); the base: none."""
        return []

    def _infra_end(self, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> str:
        """Where the controller's own status says the app ended on an infrastructure failure
        whose pod is gone (evicted pods are deleted): why, in a few words
        (``DisruptionTarget EvictionByEvictionAPI``), else ""."""
        return ""

    def _attempts(self, obj: Dict[str, Any], pods: List[Dict[str, Any]], state: AppState, restarts: int,
                  failed: List[Tuple[float, str, int, Dict[str, Any]]]) -> List[Attempt]:
        """Every attempt with why it ended. The attempts restarted by the controller are
        infrastructure failures where only evictions restart the app (the roles have no
        ``max_retries``), the user's where only theirs do; where both may, the controller
        does not record which one it was (kind unknown). The last attempt of a FAILED app
        is the infrastructure's when a pod of it has the ``DisruptionTarget`` condition or
        the controller says it acted on one (:meth:`_infra_end`), else the user's (the
        first failed replica's exit code)."""
        kinds = self._restart_kinds(obj)
        past = kinds[0] if len(kinds) == 1 else None
        why = {FailureKind.INFRA: DISRUPTION_TARGET, FailureKind.USER: "a replica failed"}.get(past, "restarted")  # type: ignore[arg-type]
        out = [Attempt(i, AppState.FAILED, past, why, retried=True) for i in range(restarts)]
        if state != AppState.FAILED:
            out.append(Attempt(restarts, state))
            return out
        evicted = next((f"{DISRUPTION_TARGET} {disruption(p)}" for p in pods if disruption(p)), "")
        evicted = evicted or self._infra_end(obj, pods)
        if evicted:
            out.append(Attempt(restarts, AppState.FAILED, FailureKind.INFRA, evicted))
            return out
        reason = ""
        if failed:
            term = _terminated(failed[0][3])
            if term.get("reason") == "OOMKilled":
                reason = "OOMKilled"
            elif term.get("exitCode") is not None:
                reason = f"exit code {term['exitCode']}"
        out.append(Attempt(restarts, AppState.FAILED, FailureKind.USER, reason))
        return out

    def _replicas(
        self, roles: List[Role], pods: List[Dict[str, Any]], state: AppState, replica_label: Optional[str] = None,
    ) -> Tuple[List[RoleStatus], List[Tuple[float, str, int, Dict[str, Any]]]]:
        by_key: Dict[Tuple[int, int], Dict[str, Any]] = {}
        for pod in pods:
            labels = pod["metadata"].get("labels") or {}
            try:
                key = (int(labels[_pod.LABEL_ROLE_INDEX]), int(labels[replica_label or self.REPLICA_LABEL]))
            except (KeyError, ValueError):
                continue
            old = by_key.get(key)
            if old is None or _ts(old["metadata"].get("creationTimestamp")) <= _ts(pod["metadata"].get("creationTimestamp")):
                by_key[key] = pod
        statuses, failed = [], []
        for idx, role in enumerate(roles):
            rs = RoleStatus(role.name)
            for k in range(role.num_replicas):
                pod = by_key.get((idx, k))
                if pod is None:
                    rstate = state if is_terminal(state) else AppState.PENDING
                    rs.replicas.append(ReplicaStatus(id=k, state=rstate, role=role.name))
                    continue
                phase = (pod.get("status") or {}).get("phase", "Unknown")
                rstate = POD_STATES.get(phase, AppState.UNKNOWN)
                if state == AppState.CANCELLED and not is_terminal(rstate):
                    rstate = AppState.CANCELLED
                term = _terminated(pod)
                spec = pod.get("spec") or {}
                host = spec.get("hostname") or pod["metadata"]["name"]
                if spec.get("subdomain"):
                    host = f"{host}.{spec['subdomain']}"
                rep = ReplicaStatus(id=k, state=rstate, role=role.name, hostname=host,
                                    exit_code=term.get("exitCode") if term else None)
                if rstate == AppState.FAILED:
                    failed.append((_ts(term.get("finishedAt")), role.name, k, pod))
                    rep.structured_error_msg = self._pod_error(pod)
                rs.replicas.append(rep)
            statuses.append(rs)
        failed.sort(key=lambda f: (f[0], f[1], f[2]))
        return statuses, failed

    @staticmethod
    def _pod_error(pod: Dict[str, Any]) -> str:
        term = _terminated(pod)
        st = pod.get("status") or {}
        parts = []
        if term:
            parts.append(f"exit code {term.get('exitCode')}")
            if term.get("signal"):
                parts.append(f"signal {term['signal']}")
        reason = term.get("reason") or st.get("reason")
        if reason:
            parts.append(str(reason))
        message = term.get("message") or st.get("message")
        if message:
            parts.append(" ".join(str(message).split()))
        return ", ".join(parts) or "failed"

    def _failure(self, ns: str, failed: List[Tuple[float, str, int, Dict[str, Any]]], msg: str,
                 statuses: List[RoleStatus]) -> Tuple[str, Optional[RootCause]]:
        """Why the pod that failed first failed: the root cause the end of its log names (a
        torchrun worker's exception, :mod:`tx.schedulers.why`), set on its replica too; else
        how its container ended and its last lines. Not for a pod the kernel's OOM killer
        ended (its reason says so)."""
        if not failed:
            return msg or "the app failed", None
        _, role, k, pod = failed[0]
        text = f"{role}/{k} (pod {pod['metadata']['name']}) failed first: {self._pod_error(pod)}"
        try:
            raw = b"".join(self.kube.pod_log(ns, pod["metadata"]["name"], tail_lines=CAUSE_TAIL_LINES))
        except KubeError:
            raw = b""
        term = _terminated(pod)
        if term.get("reason") != "OOMKilled":
            code = term.get("exitCode")
            cause = root_cause(role, k, raw, exit_code=_container_status(code, term.get("signal")))
            if names_cause(cause):
                rep = next((r for rs in statuses if rs.role == role for r in rs.replicas if r.id == k), None)
                if rep is not None:
                    rep.structured_error_msg, rep.root_cause = cause.text, cause
                return cause.text, cause
        lines = [ln.strip() for ln in raw.decode("utf-8", "replace").splitlines() if ln.strip()][-ERROR_TAIL_LINES:]
        if lines:
            text += "; last lines: " + " | ".join(lines)
        return text, None

    @staticmethod
    def _pending_reason(pods: List[Dict[str, Any]], roles: List[Role]) -> str:
        for pod in pods:
            st = pod.get("status") or {}
            if st.get("phase") != "Pending":
                continue
            for cond in st.get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("message"):
                    return f"pod {pod['metadata']['name']} unschedulable: {cond['message']}"
            for cs in st.get("containerStatuses") or []:
                waiting = (cs.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") and waiting["reason"] != "ContainerCreating":
                    return f"pod {pod['metadata']['name']} waiting: {waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
        return ""

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

    def _sweep_unsupported(self, cfg: Mapping[str, CfgVal]) -> Optional[str]:
        """Why this scheduler, with these run options, submits no Indexed Job (None: it does)."""
        return None if self.SWEEP_ARRAYS else f"{self.backend} has no native array"

    def _sweep_template(self, cfg: Mapping[str, CfgVal]) -> Optional[Any]:
        """What the scheduler adds to the Indexed Job's pod template (a function of the
        template), or None."""
        return None

    def _sweep_job(self, trials: Sequence[AppDryRunInfo[Any]],
                   max_parallel: Optional[int]) -> Tuple[Optional[Dict[str, Any]], str, str]:
        apps = [t._app for t in trials]
        cfg = trials[0]._cfg if trials else {}
        why = _sweep.not_an_array(apps) or self._sweep_unsupported(cfg or {})
        if why:
            return None, "", why
        ns = check_namespace(cfg)
        job, why = _sweep.indexed_job(apps, cfg, max_parallel, ns, self._sweep_template(cfg))
        return job, ns, why

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
        job, ns, why = self._sweep_job(trials, max_parallel)
        if job is None:
            log.info("k8s_sweep_not_an_array", scheduler=self.backend, reason=why)
            return None
        return AppDryRunInfo(KubernetesJob(resource=job, namespace=ns), str)

    def sweep_not_an_array(self, trials: Sequence[AppDryRunInfo[Any]]) -> str:
        """Why these trials are one app each (see :meth:`submit_sweep_dryrun`)."""
        return self._sweep_job(trials, None)[2] or f"{self.backend} has no native array for these trials"

    def schedule_sweep(self, dryrun_info: AppDryRunInfo[Any]) -> List[str]:
        """Create the Indexed Job; returns ``<namespace>:<job>_<index>`` for each trial.

        Raises:
            KubeError: the API server refused it or cannot be reached.
        """
        req: KubernetesJob = dryrun_info.request
        self.kube.create_object(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, req.namespace, req.resource)
        n = int(req.resource["spec"]["completions"])
        log.info("k8s_submitted_indexed_job", scheduler=self.backend, namespace=req.namespace, name=req.app_id,
                 trials=n)
        return [f"{req.namespace}:{req.app_id}_{i}" for i in range(n)]

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
        self.kube.patch_object(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, ns, job, {
            "metadata": {"annotations": {_sweep.CANCELLED: "true"}}, "spec": {"suspend": True}})
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
            self._cancel_existing(app_id)

    # -- logs ---------------------------------------------------------------------------------
    def _find_pod(self, ns: str, name: str, role_name: str, k: int) -> Optional[Dict[str, Any]]:
        pods = self._replica_pods(ns, name, role_name, k)
        return pods[-1] if pods else None

    def _replica_pods(self, ns: str, name: str, role_name: str, k: int) -> List[Dict[str, Any]]:
        """Every pod the API server still has of the replica, oldest first: one per attempt
        where a retry creates a new pod and keeps the failed one (a Job's
        ``backoffLimitPerIndex``: JobSet REPLICA retries, a sweep's trials); one where a
        retry recreates the pod under the same name (Volcano)."""
        sel = f"{_pod.LABEL_ROLE_NAME}={_names.label_value(role_name) or 'role'},{self.REPLICA_LABEL}={k}"
        trial = _sweep.trial_of(name)
        if trial is not None:  # a sweep's trial: its Job's pods of its index
            name = trial[0]
            sel = (f"{_pod.LABEL_ROLE_NAME}={_names.label_value(role_name) or 'role'},{_pod.LABEL_REPLICA_ID}={k},"
                   f"{_sweep.COMPLETION_INDEX}={trial[1]}")
        return sorted(self._pods(ns, name, sel), key=lambda p: _ts(p["metadata"].get("creationTimestamp"))
                      if p["metadata"].get("creationTimestamp") else 0)

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
        """Lines (each with its ``\\n``) of the log of replica ``k`` of ``role_name``: its
        pod's container log (``GET .../pods/NAME/log``), followed until the container ends
        with ``should_tail`` (waiting for the pod to start first).

        Args:
            regex: keep lines where it is found.
            since, until: time window (the API server's timestamps; ``since`` is also sent
                as ``sinceSeconds``).
            streams: None or ``combined``: Kubernetes keeps one log per container, stdout
                and stderr interleaved (reading them apart needs the alpha feature gate
                ``PodLogsQuerySplitStreams``, off on a GA cluster, which ignores the request).

        Raises:
            ValueError: the app has no such replica, or ``stdout``/``stderr`` (or an
                unknown stream) was asked for.
            KubeError: the API server refused the request.
        """
        ns, pod_names = self._log_pod(app_id, role_name, k, should_tail, streams)
        since_seconds = None
        if since is not None:
            since_seconds = max(1, int(math.ceil(time.time() - since.timestamp())))
        chunks = self._pod_logs(ns, pod_names, should_tail, timestamps=since is not None or until is not None,
                                since_seconds=since_seconds)
        lines = split_lines_iterator(_decode(chunks))
        if since is not None or until is not None:
            lines = _window(lines, since, until)
        return filter_regex(regex, lines)

    def _pod_logs(self, ns: str, pod_names: List[str], follow: bool, **kw: Any) -> Iterator[bytes]:
        """The logs of the pods one after the other, the last one followed with ``follow``;
        an earlier attempt's pod deleted meanwhile is skipped."""
        for name in pod_names[:-1]:
            try:
                yield from self.kube.pod_log(ns, name, follow=False, **kw)
            except KubeError as e:
                if e.status != 404:
                    raise
        yield from self.kube.pod_log(ns, pod_names[-1], follow=follow, **kw)

    def _log_pod(self, app_id: str, role_name: str, k: int, should_tail: bool,
                 streams: Optional[Any]) -> Tuple[str, List[str]]:
        """``(namespace, pod names)`` whose logs, one after the other, are replica ``k``'s:
        the pods of its earlier attempts the API server still has, oldest first, then its
        newest (with ``should_tail``, waiting for it to be created and to start).

        Raises:
            ValueError: a stream other than ``combined``, or no pod for the replica (yet).
            SchedulerError: the app ran but the replica's pod is gone (deleted): the Runner
                then reads tx's log archive.
        """
        stream = Stream(streams) if streams is not None else Stream.COMBINED
        if stream != Stream.COMBINED:
            raise ValueError(f"Kubernetes keeps one combined log per container (stdout and stderr apart need the "
                             f"alpha feature gate PodLogsQuerySplitStreams): use --streams combined, not {stream.value}")
        ns, name = _names.split_app_id(app_id, DEFAULT_NAMESPACE)
        pods = self._replica_pods(ns, name, role_name, k)
        pod = pods[-1] if pods else None
        if pod is None and should_tail:
            pod = self._wait_pod(app_id, ns, name, role_name, k)
        if pod is None:
            desc = self.describe(app_id)
            if desc is not None and (is_terminal(desc.state) or desc.state == AppState.RUNNING) \
                    and any(r.name == role_name and k < r.num_replicas for r in desc.roles):
                raise SchedulerError(f"the pod of replica {role_name}/{k} of app {app_id} is gone although the app "
                                     "ran: it was deleted (or lost with its node), and its log with it")
            raise ValueError(f"app {app_id} has no pod for replica {role_name}/{k} (yet)")
        if should_tail:
            self._wait_started(ns, name, role_name, k, app_id)
        newest = str(pod["metadata"]["name"])
        # a pod being deleted (a JobSet restart tears its Jobs down) is left out: its log is
        # about to go, and reading it now and not later would make the log look restarted
        earlier = [str(p["metadata"]["name"]) for p in pods if not p["metadata"].get("deletionTimestamp")
                   or p["metadata"]["name"] == newest]
        return ns, earlier[:earlier.index(newest)] + [newest] if newest in earlier else [newest]

    def log_iter_blocks(self, app_id: str, role_name: str, k: int = 0, should_tail: bool = False,
                        streams: Optional[Any] = None) -> Iterable[bytes]:
        """The pod's log as the kubelet keeps it (every attempt's pod the API server still
        has, oldest first), byte for byte (invalid UTF-8 and a last line without ``\\n`` included), in blocks of whole lines (the last may end
        mid-line); with ``should_tail``, followed until the container ends. What tx's log
        archive copies (docs/recovery.md) and ``tx log`` relays.

        Raises:
            ValueError: as :meth:`log_iter`.
            KubeError: the API server refused the request.
        """
        ns, pod_names = self._log_pod(app_id, role_name, k, should_tail, streams)
        return line_blocks(self._pod_logs(ns, pod_names, should_tail))

    def _wait_pod(self, app_id: str, ns: str, name: str, role_name: str, k: int) -> Optional[Dict[str, Any]]:
        while True:
            pod = self._find_pod(ns, name, role_name, k)
            if pod is not None:
                return pod
            desc = self.describe(app_id)
            if desc is None or is_terminal(desc.state):
                return None
            time.sleep(0.5)

    def _wait_started(self, ns: str, name: str, role_name: str, k: int, app_id: str) -> None:
        while True:
            pod = self._find_pod(ns, name, role_name, k)
            if pod is None or (pod.get("status") or {}).get("phase") != "Pending":
                return
            desc = self.describe(app_id)
            if desc is None or is_terminal(desc.state):
                return
            time.sleep(0.5)

    def close(self) -> None:
        self.kube.close()


def _decode(chunks: Iterable[bytes]) -> Iterator[str]:
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    for chunk in chunks:
        text = dec.decode(chunk)
        if text:
            yield text
    tail = dec.decode(b"", final=True)
    if tail:
        yield tail


def _window(lines: Iterable[str], since: Optional[_dt.datetime], until: Optional[_dt.datetime]) -> Iterator[str]:
    lo = since.timestamp() if since is not None else -math.inf
    hi = until.timestamp() if until is not None else math.inf
    for line in lines:
        m = _TIMESTAMP.match(line)
        if not m:
            yield line
            continue
        t = _ts(m.group(1))
        if lo <= t <= hi:
            yield line[m.end():]
