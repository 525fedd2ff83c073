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
from typing import Optional, Tuple

_V1_ROOT = "/sys/fs/cgroup/memory"
_V2_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
#: limits at or above this many bytes mean "no limit" (v1 writes 2**63 rounded to pages)
_NO_LIMIT = 1 << 62


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _field(text: str, key: str) -> Optional[int]:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def _cgroups(pid: str = "self") -> Tuple[Optional[str], Optional[str]]:
    """``(v1 memory path, v2 path)`` of the process from ``/proc/<pid>/cgroup``."""
    v1 = v2 = None
    for line in _read(f"/proc/{pid}/cgroup").splitlines():
        num, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if num == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v1, v2


def counter_file(pid: str = "self") -> Optional[str]:
    """The file whose ``oom_kill`` line counts OOM kills in the memory cgroup of process
    ``pid`` (v1 ``memory.oom_control``, else the nearest v2 ``memory.events``); None where
    there is none this process can read."""
    v1, v2 = _cgroups(pid)
    if v1 is not None:
        path = os.path.join(_V1_ROOT, v1.lstrip("/"), "memory.oom_control")
        if _field(_read(path), "oom_kill") is not None:
            return path
    if v2 is not None:
        for root in _V2_ROOTS:
            if not os.path.exists(os.path.join(root, "cgroup.controllers")):
                continue
            rel = v2.strip("/")
            while True:
                path = os.path.join(root, rel, "memory.events")
                if _field(_read(path), "oom_kill") is not None:
                    return path
                if not rel:
                    break
                rel = os.path.dirname(rel)
    return None


def oom_kills(path: Optional[str]) -> Optional[int]:
    """The ``oom_kill`` count in ``path`` (from :func:`counter_file`); None if unknown."""
    return _field(_read(path), "oom_kill") if path else None


def limit_mb(path: Optional[str]) -> Optional[int]:
    """The memory limit, in MB (2**20 bytes), of the cgroup whose counter is ``path``; None
    where it has none or it cannot be read."""
    if not path:
        return None
    d = os.path.dirname(path)
    text = (_read(os.path.join(d, "memory.limit_in_bytes")) if path.endswith("memory.oom_control")
            else _read(os.path.join(d, "memory.max"))).strip()
    if not text.isdigit() or int(text) >= _NO_LIMIT:
        return None
    return int(text) >> 20
