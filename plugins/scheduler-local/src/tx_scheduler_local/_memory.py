"""Whether the kernel's OOM killer killed a replica: the OOM-kill counter of the memory
cgroup the supervisor and its replicas run in.

Standard library only: the supervisor imports it.

The kernel counts the processes its OOM killer kills in each memory cgroup, whether the
cgroup's own limit or the whole machine ran out of memory:

* cgroup v1: ``oom_kill N`` in ``memory.oom_control`` of the process's ``memory``
  hierarchy (Linux 4.13+; https://docs.kernel.org/admin-guide/cgroup-v1/memory.html);
* cgroup v2: ``oom_kill N`` in ``memory.events`` of the nearest cgroup, from the process's
  own upwards, that has the memory controller; it counts the cgroups below it too
  (https://docs.kernel.org/admin-guide/cgroup-v2.html#memory-interface-files).

The supervisor reads the counter when it starts a replica and again when the replica dies
of SIGKILL: a larger count means the OOM killer did it (another process of the same cgroup
killed at that moment could be mistaken for it, which the message allows for by naming the
cgroup's limit). Where neither file can be read the answer is None: unknown.
"""
from __future__ import annotations

import os
from typing import Optional

from tx_scheduler_local._where import _cgroup_root, _own_cgroup, _read

_V1_ROOT = "/sys/fs/cgroup/memory"
#: limits at or above this many bytes mean "no limit" (v1 writes 2**63 rounded to pages)
_NO_LIMIT = 1 << 62


def _field(text: str, key: str) -> Optional[int]:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def _v1_memory_cgroup() -> Optional[str]:
    """This process's path in the cgroup v1 ``memory`` hierarchy (``/proc/self/cgroup``)."""
    for line in _read("/proc/self/cgroup").splitlines():
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if "memory" in controllers.split(","):
            return path
    return None


def counter_file() -> Optional[str]:
    """The file whose ``oom_kill`` line counts OOM kills in this process's memory cgroup
    (v1 ``memory.oom_control``, else the nearest v2 ``memory.events``); None where there is
    none this process can read."""
    v1 = _v1_memory_cgroup()
    if v1 is not None:
        path = os.path.join(_V1_ROOT, v1.lstrip("/"), "memory.oom_control")
        if _field(_read(path), "oom_kill") is not None:
            return path
    root, own = _cgroup_root(), _own_cgroup()
    if root is None or own is None:
        return None
    rel = own.strip("/")
    while True:
        path = os.path.join(root, rel, "memory.events")
        if _field(_read(path), "oom_kill") is not None:
            return path
        if not rel:
            return None
        rel = os.path.dirname(rel)


def oom_kills(path: Optional[str]) -> Optional[int]:
    """The ``oom_kill`` count in ``path`` (from :func:`counter_file`); None if unknown."""
    return _field(_read(path), "oom_kill") if path else None


def limit_mb(path: Optional[str]) -> Optional[int]:
    """The memory limit, in MB (2**20 bytes), of the cgroup whose counter is ``path``; None
    where it has none or it cannot be read."""
    if not path:
        return None
    d = os.path.dirname(path)
    text = _read(os.path.join(d, "memory.limit_in_bytes" if path.endswith("memory.oom_control") else "memory.max"))
    if not text.isdigit() or int(text) >= _NO_LIMIT:
        return None
    return int(text) >> 20
