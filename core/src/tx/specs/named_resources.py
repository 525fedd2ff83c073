"""Named resources: ``-h NAME`` in components, ``specs.named_resources["gpu.small"]``.

tx-core registers the generic ``cpu.*`` and ``gpu.*`` sizes (TorchX's table); plugins add
their own through the ``tx_register_named_resources`` hook (AWS instance types, ...).
"""
from __future__ import annotations

import difflib
from typing import Optional

from tx.specs.api import Resource

from tx.specs._generic_resources import GENERIC, GiB, generic_factory, null_resource  # noqa: F401 - re-exported


class _NamedResources:
    """Mapping-like lookup of named resources; each access returns a fresh Resource."""

    def _names(self) -> list:
        from tx.plugins import get_registry

        return get_registry().names("named_resources")

    def __getitem__(self, name: str) -> Resource:
        from tx.plugins import get_registry

        reg = get_registry().get("named_resources", name)
        if reg is None:
            names = self._names()
            close = difflib.get_close_matches(name, names, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(names))}"
            raise KeyError(f"unknown named resource {name!r}; {hint}")
        return reg.load()()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._names()

    def keys(self) -> list:
        return self._names()


named_resources = _NamedResources()


def get_named_resources(res: str) -> Resource:
    """The named resource ``res`` (a fresh copy).

    Raises:
        KeyError: no such name, with close matches suggested.
    """
    return named_resources[res]


def resource(
    cpu: Optional[int] = None,
    gpu: Optional[int] = None,
    memMB: Optional[int] = None,
    h: Optional[str] = None,
) -> Resource:
    """A resource from a named resource ``h`` (takes precedence), else from cpu/gpu/memMB
    with TorchX's defaults for falsy values (2 CPUs, 0 GPUs, 1024 MB).

    Raises:
        KeyError: ``h`` is not a named resource.
    """
    if h:
        return get_named_resources(h)
    return Resource(cpu=cpu or 2, gpu=gpu or 0, memMB=memMB or 1024)
