"""Mounts a role asks for, and the ``type=...,src=...,dst=...`` syntax that parses them.

The syntax is TorchX's (``torchx.specs.parse_mounts``), itself modelled on
``docker run --mount`` (https://docs.docker.com/engine/storage/bind-mounts/).
"""
from __future__ import annotations

import enum
import os
from typing import Any, Callable, List, Optional, Tuple, Union

import attrs

__all__ = ["BindMount", "DeviceMount", "Mount", "MountType", "mount_text", "parse_mounts", "refuse_ignored_mounts", "VolumeMount",
           "without_mounts"]


class MountType(str, enum.Enum):
    BIND = "bind"
    VOLUME = "volume"
    DEVICE = "device"


@attrs.define
class BindMount:
    """A host path mounted into the replica: ``src_path`` on the host at ``dst_path``."""

    src_path: str
    dst_path: str
    read_only: bool = False


@attrs.define
class VolumeMount:
    """A named volume (docker volume, Kubernetes PVC claim, EFS id) mounted at ``dst_path``."""

    src: str
    dst_path: str
    read_only: bool = False


@attrs.define
class DeviceMount:
    """A host device (``/dev/...``) exposed at ``dst_path`` with cgroup ``permissions``
    (a subset of ``r``, ``w``, ``m``)."""

    src_path: str
    dst_path: str
    permissions: str = attrs.field(default="rwm")

    @permissions.validator
    def _check(self, _attr: object, value: str) -> None:
        bad = set(value) - set("rwm")
        if bad:
            raise ValueError(f"device permissions must be a subset of 'rwm', got {value!r}")


Mount = Union[BindMount, VolumeMount, DeviceMount]

_KEYS = {
    "type": "type",
    "src": "src",
    "source": "src",
    "dst": "dst",
    "destination": "dst",
    "target": "dst",
    "readonly": "readonly",
    "read_only": "readonly",
    "perm": "perm",
}


def parse_mounts(opts: List[str]) -> List[Mount]:
    """Parse mount options into mounts.

    ``opts`` is a list of ``key=value`` tokens (or comma-joined strings of them), each
    mount starting with ``type=bind|volume|device``: ``type=bind,src=~/data,dst=/data,readonly``,
    ``type=volume,src=myvol,dst=/data``, ``type=device,src=/dev/fuse[,dst=/dev/fuse][,perm=rw]``.
    Keys may be spelt ``source``/``src``, ``destination``/``dst``/``target``,
    ``readonly``/``read_only``; ``~`` in a bind source is expanded.

    Raises:
        ValueError: an unknown key, type or a token before the first ``type=``.
    """
    tokens: List[str] = []
    for opt in opts:
        tokens.extend(t.strip() for t in opt.split(",") if t.strip())
    groups: List[dict] = []
    for tok in tokens:
        key, _, val = tok.partition("=")
        norm = _KEYS.get(key.strip().lower())
        if norm is None:
            raise ValueError(f"unknown mount option {key!r} in {tok!r}")
        if norm == "type":
            groups.append({"type": val.strip().lower()})
            continue
        if not groups:
            raise ValueError(f"mount option {tok!r} comes before type=; each mount starts with type=")
        groups[-1][norm] = val.strip() if val else True
    mounts: List[Mount] = []
    for g in groups:
        kind = g["type"]
        readonly = g.get("readonly", False)
        readonly = readonly is True or str(readonly).lower() in ("true", "1", "yes")

        def need(k: str) -> str:
            if k not in g or g[k] is True:
                raise ValueError(f"{kind} mount needs {k}=")
            return str(g[k])

        if kind == "bind":
            mounts.append(BindMount(os.path.expanduser(need("src")), need("dst"), readonly))
        elif kind == "volume":
            mounts.append(VolumeMount(need("src"), need("dst"), readonly))
        elif kind == "device":
            src = need("src")
            mounts.append(DeviceMount(src, str(g.get("dst") or src), str(g.get("perm") or "rwm")))
        else:
            raise ValueError(f"unknown mount type {kind!r}: expected bind, volume or device")
    return mounts


def mount_text(mount: Mount) -> str:
    """A mount in a few words for messages: ``volume nas-pvc -> /mnt/data``,
    ``bind /data -> /data (read-only)``, ``device /dev/fuse -> /dev/fuse``."""
    if isinstance(mount, VolumeMount):
        text = f"volume {mount.src} -> {mount.dst_path}"
    elif isinstance(mount, BindMount):
        text = f"bind {mount.src_path} -> {mount.dst_path}"
    else:
        text = f"device {mount.src_path} -> {mount.dst_path}"
    return text + (" (read-only)" if getattr(mount, "read_only", False) else "")


def without_mounts(app: Any, which: Optional[Callable[[Any], List[Mount]]] = None) -> Tuple[Any, str]:
    """``(copy of app whose roles have no mounts, what was dropped)``; the text names each
    role with mounts and its mounts (``role 'trainer': volume nas-pvc -> /mnt/data``), ""
    (and ``app`` itself) when no role has any. ``which(role)``: only the mounts it returns
    are dropped (a scheduler's ``ignored_mounts``); None: all of them. ``app`` (a
    :class:`tx.specs.AppDef`) is not modified."""
    drop = {r.name: list(which(r)) if which is not None else list(r.mounts) for r in app.roles}
    dropped = "; ".join(f"role {r.name!r}: " + ", ".join(mount_text(m) for m in drop[r.name])
                        for r in app.roles if drop[r.name])
    if not dropped:
        return app, ""
    return attrs.evolve(app, roles=[attrs.evolve(r, mounts=[m for m in r.mounts if m not in drop[r.name]])
                                    for r in app.roles]), dropped


def refuse_ignored_mounts(app: Any, scheduler: str, which: Callable[[Any], List[Mount]], advice: str) -> None:
    """Raise when a role of ``app`` has mounts the ``scheduler`` would run without
    (``which(role)``: its ``Scheduler.ignored_mounts``), instead of running without them.

    Raises:
        ValueError: one line naming the first such role, its ignored mounts, the scheduler
            and ``advice`` (what to do instead).
    """
    for role in app.roles:
        ignored = which(role)
        if ignored:
            raise ValueError(f"role {role.name!r}: the {scheduler} scheduler cannot honour mount"
                             f"{'s' if len(ignored) > 1 else ''} {', '.join(mount_text(m) for m in ignored)} "
                             f"(it would run without {'them' if len(ignored) > 1 else 'it'}); {advice}")
