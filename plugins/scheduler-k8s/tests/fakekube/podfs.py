"""The fake cluster's pod file systems: a private ``/tmp`` and the pod's volumes.

A container of a real pod sees its image's file system, its volumes at their ``mountPath``
and nothing of the node's or of other pods' files
(https://kubernetes.io/docs/concepts/storage/volumes/): a ``hostPath`` volume is the node's
path seen at the ``mountPath`` (with ``readOnly``, read-only); an ``emptyDir`` is a directory
of the pod, new with each pod (a retry's new pod starts with an empty one). The fake kubelet
runs a container as a process of this host, whose file system stands for the image; in the
pod's mount namespace (:func:`podnet.sandbox_prefix`, :func:`script`) it gets:

* a tmpfs of its own on ``/tmp`` (the node's ``/tmp`` is not in the image), into which only
  what stands for the image is bound at its own path: the host paths under ``/tmp`` that
  hold the interpreter, the repository and the server's ``PATH``/``PYTHONPATH``
  (:func:`image_paths`), and the pod's own directory (its working directory, HOME, TMPDIR);
* each ``hostPath`` volume bound at its ``mountPath``; a missing host path is made as a
  directory first, as containerd does for a hostPath volume without ``type``;
* each ``emptyDir`` volume: a directory of the pod at its ``mountPath`` (``medium: Memory``:
  a tmpfs); one at ``/dev/shm`` is the pod's own ``/dev/shm`` tmpfs;
* each ``configMap`` volume: its ConfigMap's keys as files, read-only, at its ``mountPath``
  (a pod whose ConfigMap does not exist stays Pending, as a kubelet retries the mount).

A ``mountPath`` outside ``/tmp`` must exist on the host (the fake has no image root in which
to make it), and ``/tmp`` itself cannot be a volume. Without namespaces the kubelet falls back
to what a plain process can be given: a hostPath volume only at its own path, an emptyDir
only at ``/dev/shm``, and the host's ``/tmp`` (:func:`volume_error`).
"""
from __future__ import annotations

import os
import shlex
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple

TMP = "/tmp"

#: (source, mountPath, read only, kind): kind "bind" (source: a host path) or "tmpfs"
Mount = Tuple[str, str, bool, str]


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def image_paths() -> List[str]:
    """The host paths under ``/tmp`` that stand for the image (the interpreter's prefixes, the
    repository, the entries of ``PATH`` and ``PYTHONPATH``), outermost only; usually none."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    cands = [sys.prefix, sys.base_prefix, repo]
    for var in ("PATH", "PYTHONPATH"):
        cands += [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    real = sorted({os.path.realpath(p) for p in cands if os.path.exists(p)})
    out: List[str] = []
    for p in real:
        if _under(p, TMP) and p != TMP and not any(_under(p, q) for q in out):
            out.append(p)
    return out


def volume_error(pod: Dict[str, Any], sandboxed: bool) -> Optional[str]:
    """Why the fake kubelet cannot give the pod's container its volumes as a real one would,
    or None. ``sandboxed``: the pod runs in a mount namespace of its own (see the module
    docstring for what each case serves)."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    for m in pod["spec"]["containers"][0].get("volumeMounts") or []:
        v, dst = volumes.get(m["name"], {}), m["mountPath"]
        if not sandboxed:
            if "hostPath" in v and v["hostPath"].get("path") == dst:
                continue
            if "emptyDir" in v and dst == "/dev/shm":
                continue
            return (f"volume {m['name']!r} at {dst}: without mount namespaces the fake kubelet serves only "
                    "hostPath volumes mounted at their own path and a /dev/shm emptyDir")
        if "hostPath" not in v and "emptyDir" not in v and "configMap" not in v:
            return (f"volume {m['name']!r} at {dst}: the fake kubelet serves only hostPath, emptyDir and configMap "
                    "volumes")
        if dst == "/dev/shm" and "emptyDir" in v:
            continue
        if os.path.normpath(dst) == TMP:
            return f"volume {m['name']!r} at {dst}: the fake kubelet cannot mount a volume on /tmp itself"
        if not _under(os.path.normpath(dst), TMP) and not os.path.exists(dst):
            return (f"volume {m['name']!r} at {dst}: outside /tmp the fake kubelet mounts only on paths that "
                    "exist on the host (the host's file system stands for the image)")
    return None


def mounts(pod: Dict[str, Any], pod_dir: str) -> List[Mount]:
    """The pod's volumes as mounts (after :func:`volume_error` said None, sandboxed): a
    hostPath's missing path is made (a directory), an emptyDir's directory is made beside
    ``pod_dir`` (the pod's own directory)."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    out: List[Mount] = []
    for m in pod["spec"]["containers"][0].get("volumeMounts") or []:
        v, dst, ro = volumes[m["name"]], os.path.normpath(m["mountPath"]), bool(m.get("readOnly"))
        if "configMap" in v:  # its files, written by the kubelet (configmap_dir), read-only as a kubelet mounts it
            out.append((configmap_dir(pod_dir, m["name"]), dst, True, "bind"))
        elif "hostPath" in v:
            src = v["hostPath"]["path"]
            if not os.path.exists(src):
                os.makedirs(src, exist_ok=True)
            out.append((src, dst, ro, "bind"))
        elif dst != "/dev/shm":  # emptyDir (/dev/shm is the pod's own tmpfs already)
            if (v["emptyDir"] or {}).get("medium") == "Memory":
                out.append(("", dst, ro, "tmpfs"))
            else:
                src = os.path.join(pod_dir + ".emptydir", m["name"])
                os.makedirs(src, exist_ok=True)
                out.append((src, dst, ro, "bind"))
    return out


def configmap_dir(pod_dir: str, volume: str) -> str:
    """Where the kubelet writes the files of the pod's configMap volume ``volume`` (one per
    key), beside the pod's own directory."""
    return os.path.join(pod_dir + ".configmap", volume)


def _ro_flags(src: str) -> str:
    """The options that remount a bind of ``src`` read-only, keeping the flags of the mount
    it comes from (in a user namespace those are locked: dropping one is EPERM)."""
    f = os.statvfs(src).f_flag
    opts = ["remount", "bind", "ro"]
    for bit, name in ((os.ST_NOSUID, "nosuid"), (os.ST_NODEV, "nodev"), (os.ST_NOEXEC, "noexec"),
                      (os.ST_NOATIME, "noatime"), (os.ST_NODIRATIME, "nodiratime")):
        if f & bit:
            opts.append(name)
    return ",".join(opts)


def _mount(src: str, ro: bool, kind: str, at: str, make: bool) -> List[str]:
    """Shell lines that mount ``src`` (``kind``) at ``at``, first made there if ``make``."""
    q = shlex.quote
    lines = []
    if make:
        isdir = kind == "tmpfs" or os.path.isdir(src)
        lines.append(f"mkdir -p {q(at)}" if isdir else f"mkdir -p {q(os.path.dirname(at))} && touch {q(at)}")
    if kind == "tmpfs":
        lines.append(f"mount -t tmpfs -o mode=1777 emptydir {q(at)}")
        return lines + ([f"mount -o remount,ro {q(at)}"] if ro else [])
    lines.append(f"mount --rbind {q(src)} {q(at)}")
    return lines + ([f"mount -o {_ro_flags(src)} {q(at)}"] if ro else [])


def script(hosts: str, hostname: str, stage: str, keep: Iterable[str], vols: List[Mount]) -> str:
    """The shell script that sets up a pod's namespaces, then runs the container's command
    (its arguments, ``"$@"``): ``hosts`` bound on /etc/hosts, a private /dev/shm, ``/tmp`` a
    tmpfs built at the empty directory ``stage`` (so the host's paths stay reachable while it
    is built) with ``keep`` (host paths under /tmp the pod sees at their own path) and the
    volumes under /tmp bound in, then bound onto /tmp; the other volumes; the host name.
    Each command is a process (a pod starts later by each): none is spent on a writable
    hostPath outside /tmp at its own path (the host's path is there already), and the
    directories for the stage's mounts are made by one ``mkdir``."""
    q = shlex.quote
    lines = ["set -e", f"mount --bind {q(hosts)} /etc/hosts", "mount -t tmpfs -o size=64m,mode=1777 shm /dev/shm"]
    for src, dst, ro, kind in vols:
        if not _under(dst, TMP) and (ro or kind != "bind" or src != dst):
            lines += _mount(src, ro, kind, dst, False)  # outside /tmp the path exists (volume_error)
    inside = sorted(dict.fromkeys([(p, p, False, "bind") for p in keep] + [m for m in vols if _under(m[1], TMP)]),
                    key=lambda m: m[1].count("/"))
    at = {m: stage + m[1][len(TMP):] for m in inside}
    # a mount inside another one's directory is made after that one is bound (below it)
    nested = {m for m in inside if any(_under(m[1], o[1]) and m[1] != o[1] for o in inside)}
    first = [at[m] for m in inside if m not in nested and (m[3] == "tmpfs" or os.path.isdir(m[0]))]
    lines.append(f"mount -t tmpfs -o mode=1777 tmp {q(stage)}")
    if first:
        lines.append("mkdir -p " + " ".join(q(a) for a in first))
    for m in inside:
        lines += _mount(m[0], m[2], m[3], at[m], at[m] not in first)
    # the stage with what is bound in it onto /tmp (a recursive bind: in a user namespace
    # "mount --move" is refused), then the working directory again through the new /tmp
    lines += [f"mount --rbind {q(stage)} {TMP}", 'cd "$PWD"', f"hostname {q(hostname)}", 'exec "$@"']
    return "\n".join(lines) + "\n"
