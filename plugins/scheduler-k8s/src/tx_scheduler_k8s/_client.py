"""The official ``kubernetes`` client, imported lazily, and its errors as one-line
:class:`tx.schedulers.SchedulerError` messages.

The cluster is found as ``kubectl`` finds it: ``$KUBECONFIG`` (or ``~/.kube/config``) and
its current context, else the in-cluster service account
(https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/).
Objects are exchanged as plain dicts: custom objects through ``CustomObjectsApi``, pods and
services through ``CoreV1Api`` with ``_preload_content=False`` (the JSON as the API server
sent it, without building client models).

Every request takes a token of the host's call budget first (:mod:`tx.schedulers.budget`,
``.txconfig`` ``[<scheduler>] max_calls_per_minute``, default
:data:`DEFAULT_CALLS_PER_MINUTE`). An answer ``429 Too Many Requests`` (the API server's
priority and fairness) to a GET (get, list, log) is retried by the client's client-go
compatible retries (``client_go_retries``): after the ``Retry-After`` the server sent, or a
jittered exponential backoff when that is shorter, up to :data:`RETRY_AFTER_RETRIES` times;
then, or for another verb, it is :class:`KubeThrottled` ("unknown, not failed").
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterator, List, Optional

from tx.schedulers import CallBudget, SchedulerError, ThrottledError, budget_for

#: seconds a request may take (connect, read); log streams with follow have no read timeout
REQUEST_TIMEOUT = (10.0, 60.0)
#: QPS 50 and burst 100 for the whole host: this bucket is shared by every tx process on the
#: host that talks to the API server (tx status in three shells, tx ui, the watcher, the sweep
#: supervisors), where client-go's default, QPS 5 and burst 10
#: (https://pkg.go.dev/k8s.io/client-go/rest#Config), limits one client, and is what
#: controllers commonly raise to 50/100; the API server's own limit is its priority and
#: fairness (429 with Retry-After,
#: https://kubernetes.io/docs/concepts/cluster-administration/flow-control/)
DEFAULT_CALLS_PER_MINUTE = 50 * 60
DEFAULT_CALL_BURST = 100
#: retries of a GET answered 429 (client-go's default is 10)
RETRY_AFTER_RETRIES = 5


class KubeError(SchedulerError):
    """The API server refused a request, or cannot be reached (one line for users).

    Attributes:
        status: the HTTP status (0 when the server was not reached).
        reason: the Status ``reason`` (``NotFound``, ``AlreadyExists``, ``Forbidden`` ...).
    """

    def __init__(self, msg: str, status: int = 0, reason: str = "") -> None:
        super().__init__(msg)
        self.status = status
        self.reason = reason


class KubeThrottled(KubeError, ThrottledError):
    """The API server kept answering 429 Too Many Requests: what was asked is unknown (an
    app's state is not known, not failed)."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def translate(exc: BaseException, what: str, host: str = "") -> BaseException:
    """``exc`` raised by the client while doing ``what`` -> a :class:`KubeError` (other
    exceptions are returned unchanged)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(exc, ApiException):
        status, reason, message = exc.status or 0, exc.reason or "", ""
        try:
            body = json.loads(exc.body or "{}")
            message, reason = body.get("message", ""), body.get("reason", reason)
        except (TypeError, ValueError):
            message = str(exc.body or "")
        if status == 0:  # the client wraps connection errors in ApiException(status=0)
            return KubeError(f"cannot reach the Kubernetes API server {host}: {_one_line(exc.reason or exc)}")
        if status == 429:
            return KubeThrottled(f"{what}: the API server is throttling requests ({_one_line(message) or reason}, "
                                 "HTTP 429); the apps' states are unknown, not failed: try again later", status, reason)
        return KubeError(f"{what}: {_one_line(message) or reason} (HTTP {status} {reason})", status, reason)
    if isinstance(exc, HTTPError):
        cause = _one_line(str(getattr(exc, "reason", None) or exc))
        cause = re.sub(r"^<?\w+(?: object at 0x[0-9a-f]+>)?(?:\([^)]*\))?: ", "", cause)  # urllib3's connection repr
        return KubeError(f"cannot reach the Kubernetes API server {host}: {cause}")
    return exc


def kubeconfig_path() -> str:
    """``$KUBECONFIG`` (``:``-separated files allowed), else ``~/.kube/config``: read at
    each call (the client reads ``$KUBECONFIG`` once, when it is first imported)."""
    import os

    return os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


class Kube:
    """A lazily configured API client.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` to use (TorchX's ``client`` factory
            argument); None: one configured from ``$KUBECONFIG``/``~/.kube/config`` (its
            ``context``), else in-cluster.
        context: the kubeconfig context (None: the current one).
    """

    def __init__(self, api_client: Any = None, context: Optional[str] = None, backend: str = "kubernetes") -> None:
        self._api = api_client
        self._context = context
        self.backend = backend
        self._budget: Optional[CallBudget] = None
        self._custom: Any = None
        self._core: Any = None

    @property
    def api(self) -> Any:
        """The ``ApiClient``.

        Raises:
            KubeError: no kubeconfig and not in a cluster.
        """
        if self._api is None:
            from kubernetes import client, config

            cfg = client.Configuration()
            try:
                config.load_kube_config(config_file=kubeconfig_path(), context=self._context, client_configuration=cfg,
                                        persist_config=False)
            except Exception as kube_err:  # noqa: BLE001 - ConfigException, file and YAML errors
                try:
                    config.load_incluster_config(client_configuration=cfg)
                except Exception:  # noqa: BLE001
                    raise KubeError(
                        "no Kubernetes cluster configured: set KUBECONFIG or write ~/.kube/config "
                        f"({_one_line(str(kube_err))})"
                    ) from None
            from kubernetes.utils.retry import Backoff
            from urllib3.util.retry import Retry

            # one retry of a failed connection or read; RETRY_AFTER_RETRIES of a GET answered 429
            cfg.retries = Retry(total=RETRY_AFTER_RETRIES, connect=1, read=1, other=1, redirect=1, status=0)
            cfg.client_go_retries = True
            cfg.client_go_retry_backoff = Backoff(steps=RETRY_AFTER_RETRIES + 1, duration=0.5, factor=2.0, jitter=1.0,
                                                  cap=30.0)
            self._api = client.ApiClient(cfg)
        return self._api

    @property
    def host(self) -> str:
        try:
            return str(self.api.configuration.host)
        except KubeError:
            return ""

    @property
    def custom(self) -> Any:
        if self._custom is None:
            from kubernetes import client

            self._custom = client.CustomObjectsApi(self.api)
        return self._custom

    @property
    def core(self) -> Any:
        if self._core is None:
            from kubernetes import client

            self._core = client.CoreV1Api(self.api)
        return self._core

    @property
    def budget(self) -> CallBudget:
        """The call budget of this scheduler on this API server."""
        if self._budget is None:
            self._budget = budget_for(self.backend, self.host, DEFAULT_CALLS_PER_MINUTE, DEFAULT_CALL_BURST)
        return self._budget

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
        try:
            self.budget.acquire()
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - translated below
            err = translate(e, what, self.host)
            if err is e:
                raise
            raise err from None

    # -- custom objects -------------------------------------------------------------------
    def create_object(self, group: str, version: str, plural: str, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
        """POST a custom object; returns it as stored."""
        name = body.get("metadata", {}).get("name", "")
        return self._call(
            f"cannot create {plural}.{group} {name!r} in namespace {namespace!r}",
            self.custom.create_namespaced_custom_object, group, version, namespace, plural, body,
        )

    def get_object(self, group: str, version: str, plural: str, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        """GET a custom object; None if it does not exist."""
        try:
            return self._call(
                f"cannot read {plural}.{group} {name!r} in namespace {namespace!r}",
                self.custom.get_namespaced_custom_object, group, version, namespace, plural, name,
            )
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def list_objects(self, group: str, version: str, plural: str, namespace: str, selector: str) -> List[Dict[str, Any]]:
        """LIST custom objects matching a label selector."""
        out = self._call(
            f"cannot list {plural}.{group} in namespace {namespace!r}",
            self.custom.list_namespaced_custom_object, group, version, namespace, plural, label_selector=selector,
        )
        return list(out.get("items") or [])

    def delete_object(self, group: str, version: str, plural: str, namespace: str, name: str,
                      propagation: str = "Foreground") -> bool:
        """DELETE a custom object (dependents deleted as ``propagation`` says); False if it
        did not exist."""
        try:
            self._call(
                f"cannot delete {plural}.{group} {name!r} in namespace {namespace!r}",
                self.custom.delete_namespaced_custom_object, group, version, namespace, plural, name,
                propagation_policy=propagation,
            )
            return True
        except KubeError as e:
            if e.status == 404:
                return False
            raise

    def patch_object(self, group: str, version: str, plural: str, namespace: str, name: str,
                     patch: Dict[str, Any]) -> Dict[str, Any]:
        """Merge-patch a custom object."""
        return self._call(
            f"cannot update {plural}.{group} {name!r} in namespace {namespace!r}",
            self.custom.patch_namespaced_custom_object, group, version, namespace, plural, name, patch,
            _content_type="application/merge-patch+json",
        )

    # -- core objects -------------------------------------------------------------------------
    def _json(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        resp = self._call(what, fn, *args, _preload_content=False, **kwargs)
        return json.loads(resp.data)

    def list_pods(self, namespace: str, selector: str) -> List[Dict[str, Any]]:
        """Pods matching a label selector, as dicts."""
        out = self._json(f"cannot list pods in namespace {namespace!r}", self.core.list_namespaced_pod,
                         namespace, label_selector=selector)
        return list(out.get("items") or [])

    def create_service(self, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
        name = body.get("metadata", {}).get("name", "")
        return self._json(f"cannot create service {name!r} in namespace {namespace!r}",
                          self.core.create_namespaced_service, namespace, body)

    def delete_service(self, namespace: str, name: str) -> bool:
        try:
            self._json(f"cannot delete service {name!r} in namespace {namespace!r}",
                       self.core.delete_namespaced_service, name, namespace)
            return True
        except KubeError as e:
            if e.status == 404:
                return False
            raise

    def create_config_map(self, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
        """POST a ConfigMap; returns it as stored."""
        name = body.get("metadata", {}).get("name", "")
        return self._json(f"cannot create configmap {name!r} in namespace {namespace!r}",
                          self.core.create_namespaced_config_map, namespace, body)

    def patch_config_map(self, namespace: str, name: str, patch: Dict[str, Any]) -> Dict[str, Any]:
        """Merge-patch a ConfigMap."""
        return self._json(f"cannot update configmap {name!r} in namespace {namespace!r}",
                          self.core.patch_namespaced_config_map, name, namespace, patch,
                          _content_type="application/merge-patch+json")

    def delete_config_map(self, namespace: str, name: str) -> bool:
        """DELETE a ConfigMap; False if it did not exist."""
        try:
            self._json(f"cannot delete configmap {name!r} in namespace {namespace!r}",
                       self.core.delete_namespaced_config_map, name, namespace)
            return True
        except KubeError as e:
            if e.status == 404:
                return False
            raise

    def pod_log(self, namespace: str, pod: str, *, follow: bool = False,
                timestamps: bool = False, since_seconds: Optional[int] = None,
                tail_lines: Optional[int] = None) -> Iterator[bytes]:
        """The raw bytes of a pod's log (stdout and stderr interleaved, as the kubelet keeps
        them), as they arrive (``follow``: until the container ends)."""
        kwargs: Dict[str, Any] = {"follow": follow, "timestamps": timestamps}
        if since_seconds is not None:
            kwargs["since_seconds"] = since_seconds
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        timeout = None if follow else REQUEST_TIMEOUT
        resp = self._call(f"cannot read the log of pod {pod!r} in namespace {namespace!r}",
                          self.core.read_namespaced_pod_log, pod, namespace, _preload_content=False,
                          _request_timeout=timeout, **kwargs)
        try:
            for chunk in resp.stream(65536, decode_content=True):
                if chunk:
                    yield chunk
        except Exception as e:  # noqa: BLE001
            err = translate(e, f"log of pod {pod!r} broke off", self.host)
            if err is e:
                raise
            raise err from None
        finally:
            resp.release_conn()

    def close(self) -> None:
        if self._api is not None and hasattr(self._api, "close"):
            try:
                self._api.close()
            except Exception:  # noqa: BLE001 - best effort
                pass
