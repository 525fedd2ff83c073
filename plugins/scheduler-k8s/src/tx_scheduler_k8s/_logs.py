"""Replica logs of the Kubernetes schedulers: each replica's pod's container log (``GET
.../pods/NAME/log``), the pods of its earlier attempts first, followed while the container
runs. :class:`PodLogs` is the log half of
:class:`tx_scheduler_k8s.scheduler.KubernetesBase`.
"""
from __future__ import annotations

import codecs
import datetime as _dt
import math
import re
import time
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Iterable, Iterator, List, Optional, Tuple

from tx.schedulers import DescribeAppResponse, SchedulerError, Stream, filter_regex, line_blocks, split_lines_iterator
from tx.specs import AppState, is_terminal

from tx_scheduler_k8s import _names, _pod, _sweep
from tx_scheduler_k8s._client import Kube, KubeError
from tx_scheduler_k8s._names import DEFAULT_NAMESPACE
from tx_scheduler_k8s._status import ts as _ts

__all__ = ["PodLogs"]

_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ")


class PodLogs:
    """``log_iter`` and ``log_iter_blocks`` of the Kubernetes schedulers, over what the
    scheduler class provides: its client (``kube``), its pods (``_pods``), its
    ``describe`` and the label of a replica's index (``REPLICA_LABEL``)."""

    kube: Kube
    REPLICA_LABEL: ClassVar[str]

    if TYPE_CHECKING:  # the scheduler class defines them
        def _pods(self, namespace: str, name: str, extra: str = "") -> List[Dict[str, Any]]: ...

        def describe(self, app_id: str) -> Optional[DescribeAppResponse]: ...

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
