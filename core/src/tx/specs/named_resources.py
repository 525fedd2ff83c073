"""Named resources: ``-h NAME`` in components, ``specs.named_resources["gpu.small"]``.

tx-core registers the generic ``cpu.*`` and ``gpu.*`` sizes (TorchX's table); plugins add
their own through the ``tx_register_named_resources`` hook (AWS instance types, ...).

The model does not know the plugin manager: the names come from a *source*, which the plugin
manager (:mod:`tx.plugins`) installs with :func:`set_source` when it is imported (the
runner, the CLI and the component system import it). Until then, only the generic sizes of
:mod:`tx.specs._generic_resources` are known.
"""
from __future__ import annotations

import difflib
from typing import Callable, List, Optional, Protocol

from tx.specs._generic_resources import GENERIC, GiB, generic_factory, null_resource  # noqa: F401 - re-exported
from tx.specs.api import Resource

__all__ = [
    "GENERIC", "GiB", "NamedResourceSource", "get_named_resources", "named_resources", "resource",
    "set_source",
]


class NamedResourceSource(Protocol):
    """Where named resources come from: every name, and a factory for one name."""

    def names(self) -> List[str]:
        """Every known name."""

    def factory(self, name: str) -> Optional[Callable[[], Resource]]:
        """A zero-argument callable returning a fresh :class:`Resource`, or None for an
        unknown name."""


class _GenericSource:
    """The generic sizes and ``NULL``/``MISSING``: the source until a plugin manager is loaded."""

    def names(self) -> List[str]:
        return [*GENERIC, "NULL", "MISSING"]

    def factory(self, name: str) -> Optional[Callable[[], Resource]]:
        if name in GENERIC:
            return generic_factory(name)
        return null_resource if name in ("NULL", "MISSING") else None


_source: NamedResourceSource = _GenericSource()


def set_source(source: NamedResourceSource) -> None:
    """Install where named resources come from (the plugin manager calls this once, when
    :mod:`tx.plugins` is imported; tests may install their own)."""
    global _source
    _source = source


class _NamedResources:
    """Mapping-like lookup of named resources; each access returns a fresh Resource."""

    def _names(self) -> list:
        return _source.names()

    def __getitem__(self, name: str) -> Resource:
        factory = _source.factory(name)
        if factory is None:
            names = self._names()
            close = difflib.get_close_matches(name, names, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(names))}"
            raise KeyError(f"unknown named resource {name!r}; {hint}")
        return factory()

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
