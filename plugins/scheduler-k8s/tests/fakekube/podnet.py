"""The fake cluster's pod network: each pod's own address, host name and name resolution.

A real kubelet gives each pod an IP of its own, sets the container's host name to the pod's
``spec.hostname`` (else its name), writes the pod's ``/etc/hosts`` (the pod's own names) and
points its resolver at the cluster DNS, which answers, for a headless Service ``svc`` in
namespace ``ns`` (https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/):

* ``svc.ns.svc.cluster.local``: the addresses of the pods the Service selects (ready ones, or
  all running ones with ``publishNotReadyAddresses``);
* ``<hostname>.svc.ns.svc.cluster.local``: the address of a selected pod whose
  ``spec.hostname`` is ``<hostname>`` and ``spec.subdomain`` is ``svc``;

and, through the pod's search path (``ns.svc.cluster.local svc.cluster.local cluster.local``),
the same names without ``.ns.svc.cluster.local`` from pods of that namespace.

The fake kubelet runs pods as processes of this host (one network namespace). Each pod gets
an address of the loopback network 127.0.0.0/8 (:class:`Addresses`), a UTS namespace with its
host name, and a mount namespace (``unshare``) in which a file of its own is bind-mounted on
``/etc/hosts``, a private tmpfs on ``/dev/shm`` (what a pod's ``/dev/shm`` is) and on ``/tmp``
with the pod's volumes (:mod:`podfs`, whose :func:`podfs.script` sets the namespace up). The
kubelet rewrites each running pod's file whenever the records change (:func:`hosts_file`):
the pod's own line as the kubelet writes it, then the records the cluster DNS would answer
for the pod's namespace. So a Service name resolves to the pod that backs it, and only while
that pod runs, as with cluster DNS; a name without such a Service does not resolve.

Where the namespaces cannot be made (no ``unshare``, or no privilege for it: not root and no
user namespaces), :func:`sandbox_prefix` says why and pods run without them (no names; the host's /tmp).
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Any, Dict, Iterable, List, Optional, Tuple

CLUSTER_DOMAIN = "cluster.local"

def sandbox_prefix() -> Tuple[Optional[List[str]], str]:
    """``(argv prefix, "")`` that runs a command in a mount and UTS namespace of its own, or
    ``(None, why not)``. The prefix takes the pod's setup script (:func:`podfs.script`), then
    the command: ``prefix + [script, *argv]``. Root unshares directly; another user through a
    user namespace in which it is root (``--map-root-user``). The probe does what the script
    needs: a tmpfs bound onto /tmp, and the host name."""
    base = ["unshare", "--mount", "--uts", "--propagation", "private"]
    tries = [base] if os.geteuid() == 0 else [base[:1] + ["--map-root-user"] + base[1:]]
    why = ""
    stage = tempfile.mkdtemp(prefix="fakekube-probe-")
    try:
        for t in tries:
            try:
                p = subprocess.run([*t, "sh", "-c", 'mount -t tmpfs tmp "$1" && mount --rbind "$1" /tmp && hostname probe',
                                    "probe", stage], capture_output=True, text=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired) as e:
                why = f"{t[0]}: {e}"
                continue
            if p.returncode == 0:
                return [*t, "sh"], ""
            why = f"{' '.join(t)} failed: {(p.stderr.strip().splitlines() or ['exit code %d' % p.returncode])[-1]}"
    finally:
        os.rmdir(stage)
    return None, why


class Addresses:
    """Pod IPs: 127.1.0.1, 127.1.0.2, ... (the loopback network routes all of 127.0.0.0/8
    to this host, so a socket bound to the wildcard address answers on each)."""

    def __init__(self) -> None:
        self._n = 0

    def next(self) -> str:
        n = self._n
        self._n += 1
        return f"127.1.{n // 254}.{n % 254 + 1}"


def _selects(selector: Dict[str, str], labels: Dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def dns_records(services: Iterable[Dict[str, Any]], pods: Iterable[Dict[str, Any]]) -> Dict[str, List[Tuple[str, List[str]]]]:
    """{namespace: [(ip, [names])]}: what the cluster DNS answers for the headless Services
    (``clusterIP: None``) and their pods, fully qualified and as the pods of that namespace
    reach them through their search path. A pod is an endpoint while it runs and has an IP
    (every running pod of the fake is ready)."""
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running" and p["status"].get("podIP")]
    out: Dict[str, List[Tuple[str, List[str]]]] = {}
    for svc in services:
        spec = svc.get("spec") or {}
        if spec.get("clusterIP") != "None":
            continue  # no Service proxy in the fake cluster: only headless Services resolve
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        fq = f"{name}.{ns}.svc.{CLUSTER_DOMAIN}"
        for p in running:
            if p["metadata"]["namespace"] != ns or not _selects(spec.get("selector") or {},
                                                                 p["metadata"].get("labels") or {}):
                continue
            ip = p["status"]["podIP"]
            out.setdefault(ns, []).append((ip, [fq, f"{name}.{ns}.svc", f"{name}.{ns}", name]))
            host, sub = p["spec"].get("hostname"), p["spec"].get("subdomain")
            if host and sub == name:
                out[ns].append((ip, [f"{host}.{fq}", f"{host}.{name}.{ns}.svc", f"{host}.{name}.{ns}", f"{host}.{name}"]))
    return out


def hosts_file(pod: Dict[str, Any], records: List[Tuple[str, List[str]]]) -> str:
    """The pod's ``/etc/hosts``: the kubelet's (localhost, the pod's address with its
    fully qualified and short host name), then ``records`` (its namespace's cluster DNS)."""
    spec, ip = pod["spec"], pod["status"]["podIP"]
    host = spec.get("hostname") or pod["metadata"]["name"]
    own = host
    if spec.get("subdomain"):
        own = f"{host}.{spec['subdomain']}.{pod['metadata']['namespace']}.svc.{CLUSTER_DOMAIN}\t{host}"
    lines = ["# Kubernetes-managed hosts file.", "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
             "fe00::0\tip6-localnet", "fe00::0\tip6-mcastprefix", "fe00::1\tip6-allnodes", "fe00::2\tip6-allrouters",
             "", f"{ip}\t{own}", "", "# the cluster DNS's records of this namespace (the fake's; see podnet.py)"]
    lines += [f"{a}\t{' '.join(names)}" for a, names in records]
    return "\n".join(lines) + "\n"


def rewrite(path: str, text: str) -> None:
    """Write ``text`` into the existing file ``path`` in place (the pod's bind mount keeps
    its inode): one write, then the length cut, so a reader sees no empty file."""
    data = text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
