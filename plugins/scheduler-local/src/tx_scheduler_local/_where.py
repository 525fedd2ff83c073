"""Where a process runs (host, boot, PID namespace) and the app's cgroup v2 scope.

Standard library only: the supervisor imports it.

A state directory can be shared by processes that cannot see each other's processes: a
container with its own PID namespace, a second machine mounting the same home over NFS, the
same machine after a reboot. The supervisor records :func:`here` in ``state.json``; a reader
for whom :func:`elsewhere` is not None must not judge the app by ``/proc`` (a pid means
another process there) and answers with the last recorded state instead.

Where the cgroup v2 hierarchy is writable (``/sys/fs/cgroup`` or, on hybrid hosts,
``/sys/fs/cgroup/unified``; see https://docs.kernel.org/admin-guide/cgroup-v2.html), the
supervisor moves itself into a cgroup of its own, ``tx-<app_id>``, below its current one:
every process of the app, including one that escaped with ``setsid`` and a cleared
environment, stays in it, and ``cgroup.kill`` (Linux 5.14+) or a kill of every pid in
``cgroup.procs`` stops them all, even after the supervisor itself was SIGKILLed.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any, Dict, List, Optional

_CGROUP_ROOTS = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
#: set to 0 to keep apps out of their own cgroup (then only the subreaper stops escapees)
ENV_CGROUP = "TX_LOCAL_CGROUP"


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


_FIXED: Dict[str, str] = {}  # this process's boot id and PID namespace: the same for its whole life


def here() -> Dict[str, str]:
    """This process's location: ``host`` (hostname), ``boot_id`` (Linux, changes at every
    boot) and ``pidns`` (``pid:[inode]`` of its PID namespace); values empty where unknown.
    The boot id and the namespace are read once per process (a process never changes
    either: a watcher following 2,000 apps asks for them 10,000 times a tick); the
    hostname every time."""
    if not _FIXED:
        try:
            pidns = os.readlink("/proc/self/ns/pid")
        except OSError:
            pidns = ""
        _FIXED.update(boot_id=_read("/proc/sys/kernel/random/boot_id"), pidns=pidns)
    return {"host": os.uname().nodename, **_FIXED}


def elsewhere(state: Dict[str, Any]) -> Optional[str]:
    """None if the process recorded in ``state`` (its ``host``, ``boot_id``, ``pidns``)
    can be checked from this process; else why not, as a phrase ("on host X", "on host X in
    another PID namespace"). A state recorded on this host before its last boot is
    checkable (its processes are gone). States without a location (older versions) count
    as checkable."""
    me = here()
    host = state.get("host") or "?"
    if state.get("host") and state["host"] != me["host"]:
        return f"on host {host}"
    if rebooted(state):  # same host, a boot later: that process is gone
        return None
    if state.get("pidns") and me["pidns"] and state["pidns"] != me["pidns"]:
        return f"on host {host} in another PID namespace"
    return None


def rebooted(state: Dict[str, Any]) -> bool:
    """True if ``state`` was recorded on this host (same name) before its last boot."""
    me = here()
    return bool(state.get("host") == me["host"] and state.get("boot_id") and me["boot_id"]
                and state["boot_id"] != me["boot_id"])


def _cgroup_root() -> Optional[str]:
    for root in _CGROUP_ROOTS:
        if os.path.exists(os.path.join(root, "cgroup.procs")) and os.path.exists(os.path.join(root, "cgroup.controllers")):
            return root
    return None


def _own_cgroup() -> Optional[str]:
    for line in _read("/proc/self/cgroup").splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def make_scope(app_id: str) -> Optional[str]:
    """Move this process into a new cgroup ``tx-<app_id>`` below its own (cgroup v2);
    returns its directory, or None where cgroup v2 is missing, not writable, or disabled
    by ``TX_LOCAL_CGROUP=0`` (nothing is left behind then)."""
    if os.environ.get(ENV_CGROUP, "1") == "0":
        return None
    root, own = _cgroup_root(), _own_cgroup()
    if root is None or own is None:
        return None
    path = os.path.join(root, own.lstrip("/"), f"tx-{app_id}")
    try:
        os.mkdir(path)
    except OSError:
        return None
    try:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    except OSError:
        try:
            os.rmdir(path)
        except OSError:
            pass
        return None
    return path


def members(scope: str) -> List[int]:
    """The pids in the cgroup ``scope`` and the cgroups below it (empty if it is gone)."""
    out: List[int] = []
    for sub, _dirs, _files in os.walk(scope):
        out += [int(p) for p in _read(os.path.join(sub, "cgroup.procs")).split() if p.isdigit()]
    return out


def kill_scope(scope: str, spare: Optional[int] = None, timeout: float = 5.0) -> None:
    """SIGKILL every process in the cgroup ``scope`` but ``spare`` (the supervisor itself)
    until none is left or ``timeout`` seconds pass; without ``spare``, through
    ``cgroup.kill`` where the kernel has it."""
    if not scope or not os.path.isdir(scope):
        return
    if spare is None:
        try:
            with open(os.path.join(scope, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in members(scope) if p != spare]
        if not left or time.monotonic() > deadline:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)


def leave_scope(scope: str) -> None:
    """Move this process back to the parent cgroup and remove ``scope`` (once empty)."""
    try:
        with open(os.path.join(os.path.dirname(scope), "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    except OSError:
        return
    remove_scope(scope)


def remove_scope(scope: str) -> None:
    """Remove the (empty) cgroup ``scope`` and the empty cgroups below it (those of apps
    launched from inside this one); errors are ignored."""
    for sub, _dirs, _files in list(os.walk(scope, topdown=False))[:-1]:
        try:
            os.rmdir(sub)
        except OSError:
            pass
    for _ in range(100):
        try:
            os.rmdir(scope)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
