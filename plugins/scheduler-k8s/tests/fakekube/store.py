"""The fake cluster's object store: what etcd and the API machinery keep.

Objects are plain dicts in the API's JSON shape, keyed by (resource, namespace, name),
where a resource is ``"<group>/<version>/<plural>"`` (``"v1/pods"`` for the core group).
Every write bumps ``metadata.resourceVersion``; deleting an object deletes its dependents
(``metadata.ownerReferences``), as the garbage collector does.
"""
from __future__ import annotations

import copy
import datetime as dt
import itertools
import threading
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

Key = Tuple[str, str, str]


def now() -> str:
    """RFC 3339 time with microseconds, as the API server writes it."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def match_selector(labels: Dict[str, str], selector: str) -> bool:
    """Equality-based label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``, comma-joined
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/)."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


class Store:
    """Thread-safe objects with resource versions, owner-based cascading deletion and
    callbacks on delete (the kubelet stops a deleted pod's process)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: Dict[Key, Dict[str, Any]] = {}
        self._rv = itertools.count(1)
        self.version = "0"  # the latest resourceVersion (of lists)
        self.namespaces = {"default", "kube-system"}
        #: set at each write (and by a container's end): wakes the server's controller loop
        self.changed = threading.Event()
        self.on_delete: List[Callable[[str, Dict[str, Any]], None]] = []
        #: what the API server rejects in an object (``"<field>: <why>"``) or None; objects
        #: the fake's controllers create go through it too, so the fake cannot store what
        #: a real API server would refuse
        self.check: Optional[Callable[[str, Dict[str, Any]], Optional[str]]] = None

    def create(self, resource: str, ns: str, obj: Dict[str, Any], checked: bool = False) -> Dict[str, Any]:
        """Store ``obj`` (its metadata completed); ``checked``: :attr:`check` already passed.

        Raises:
            ValueError: :attr:`check` rejects the object (a bug of the fake's controllers).
        """
        if not checked and self.check is not None:
            why = self.check(resource, {**obj, "metadata": {**obj.get("metadata", {}), "namespace": ns}})
            if why:
                raise ValueError(f"the fake cluster made an invalid {resource} {obj['metadata'].get('name')}: {why}")
        with self.lock:
            meta = obj.setdefault("metadata", {})
            self.version = str(next(self._rv))
            meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now(), resourceVersion=self.version)
            self.objects[(resource, ns, meta["name"])] = obj
            self.changed.set()
            return copy.deepcopy(obj)

    def exists(self, resource: str, ns: str, name: str) -> bool:
        return (resource, ns, name) in self.objects

    def get(self, resource: str, ns: str, name: str) -> Optional[Dict[str, Any]]:
        with self.lock:
            obj = self.objects.get((resource, ns, name))
            return copy.deepcopy(obj) if obj is not None else None

    def live(self, resource: str, ns: str, name: str) -> Optional[Dict[str, Any]]:
        """The stored object itself (callers hold :attr:`lock` and call :meth:`touch`)."""
        return self.objects.get((resource, ns, name))

    def touch(self, obj: Dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = self.version = str(next(self._rv))
        self.changed.set()

    def items(self, resource: str, ns: Optional[str] = None, selector: str = "") -> Iterator[Dict[str, Any]]:
        """The stored objects themselves (hold :attr:`lock`)."""
        for (res, ons, _), obj in list(self.objects.items()):
            if res == resource and (ns is None or ons == ns):
                if not selector or match_selector(obj["metadata"].get("labels") or {}, selector):
                    yield obj

    def list(self, resource: str, ns: Optional[str], selector: str = "") -> List[Dict[str, Any]]:
        with self.lock:
            return [copy.deepcopy(o) for o in self.items(resource, ns, selector)]

    def delete(self, resource: str, ns: str, name: str) -> Optional[Dict[str, Any]]:
        """Delete an object and, recursively, the objects it owns."""
        with self.lock:
            obj = self.objects.pop((resource, ns, name), None)
            if obj is None:
                return None
            uid = obj["metadata"]["uid"]
            for (res, ons, oname), other in list(self.objects.items()):
                owners = other["metadata"].get("ownerReferences") or []
                if ons == ns and any(o.get("uid") == uid for o in owners):
                    self.delete(res, ons, oname)
            self.version = str(next(self._rv))  # a delete is a new revision, as etcd's
            self.changed.set()
        for cb in self.on_delete:
            cb(resource, obj)
        return obj
