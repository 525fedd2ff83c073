"""A Kubernetes scheduler's dryrun request (:class:`KubernetesJob`): the object to create,
made now or on first use (a sweep's trials, which an Indexed Job does not use)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import attrs

from tx_scheduler_k8s import _sweep, _yaml

__all__ = ["KubernetesJob"]


@attrs.define
class KubernetesJob:
    """A dryrun request: the object to create (``resource``, a dict in the API's JSON
    shape), its namespace, and the images a workspace build would push.

    ``str()`` is the object as YAML, as ``kubectl create -f`` reads it. A sweep's Indexed
    Job also has ``table``: the ConfigMap of its trials' table, created with it
    (:mod:`tx_scheduler_k8s._sweep`); ``str()`` shows its name, size and first rows as
    comments after the Job. With ``later`` (a sweep's trials: an Indexed Job uses none of their
    requests), ``resource`` is ``later(resource)``, made on first use: the AppDef's annotation, or all.
    """

    _resource: Dict[str, Any] = attrs.field(alias="resource")
    namespace: str
    images_to_push: Dict[str, Tuple[str, str]] = attrs.field(factory=dict)
    table: Optional[Dict[str, Any]] = None
    _later: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = attrs.field(
        default=None, repr=False, eq=False, kw_only=True, alias="later")

    @property
    def resource(self) -> Dict[str, Any]:
        if self._later is not None:
            later, self._later = self._later, None
            self._resource = later(self._resource)
        return self._resource

    @property
    def app_id(self) -> str:
        """The object's name (the app id without its namespace)."""
        return str(self.resource["metadata"]["name"])

    def __eq__(self, other: object) -> bool:  # as made (``later`` applied)
        return other.__class__ is self.__class__ and all(
            getattr(self, k) == getattr(other, k) for k in ("resource", "namespace", "images_to_push", "table"))

    def __str__(self) -> str:
        text = _yaml.dump(self.resource)
        if self.table is not None:
            rows = self.table["data"][_sweep.TABLE_KEY]
            first = "".join(f"#   {line}\n" for line in rows.splitlines()[:3])
            text += (f"# ConfigMap {self.table['metadata']['name']} (created with the Job, mounted at "
                     f"{_sweep.TABLE_DIR}): key {_sweep.TABLE_KEY!r}, {rows.count(chr(10))} rows, "
                     f"{len(rows.encode())} bytes; row i is trial i's values. First 3:\n{first}")
        return text

    __repr__ = __str__
