"""The generic named resources tx-core registers (TorchX's ``cpu.*`` and ``gpu.*`` table).

Depends on :mod:`tx.specs.api` only, so that the plugin registry's built-in plugin can use
it without an import cycle through :mod:`tx.specs.named_resources`.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

from tx.specs.api import NULL_RESOURCE, Resource

GiB = 1024

#: name -> (cpu, gpu, memMB)
GENERIC: Dict[str, Tuple[int, int, int]] = {
    "gpu.small": (8, 1, 32 * GiB),
    "gpu.medium": (16, 2, 64 * GiB),
    "gpu.large": (32, 4, 128 * GiB),
    "gpu.xlarge": (64, 8, 256 * GiB),
    "cpu.nano": (1, 0, 512),
    "cpu.micro": (1, 0, 1 * GiB),
    "cpu.small": (1, 0, 2 * GiB),
    "cpu.medium": (2, 0, 4 * GiB),
    "cpu.large": (2, 0, 8 * GiB),
    "cpu.xlarge": (8, 0, 32 * GiB),
}


def generic_factory(name: str) -> Callable[[], Resource]:
    """A factory of fresh :class:`Resource` objects of the generic size ``name``.

    Raises:
        KeyError: ``name`` is not in :data:`GENERIC`.
    """
    cpu, gpu, mem = GENERIC[name]
    return lambda: Resource(cpu=cpu, gpu=gpu, memMB=mem)


def null_resource() -> Resource:
    """A fresh copy of :data:`tx.specs.NULL_RESOURCE`."""
    return Resource(cpu=NULL_RESOURCE.cpu, gpu=NULL_RESOURCE.gpu, memMB=NULL_RESOURCE.memMB)
