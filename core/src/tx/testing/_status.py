"""Helpers for reading scheduler responses in tests."""
from __future__ import annotations

from typing import Any


def find_replica(desc: Any, role: str, k: int) -> Any:
    """The :class:`tx.specs.ReplicaStatus` of replica ``k`` of ``role`` in a
    :class:`tx.schedulers.DescribeAppResponse`.

    Raises:
        KeyError: ``(role, k)`` is not in the description.
    """
    for rs in desc.roles_statuses:
        if rs.role == role:
            for r in rs.replicas:
                if r.id == k:
                    return r
    raise KeyError((role, k))
