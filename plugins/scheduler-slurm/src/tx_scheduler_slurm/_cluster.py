"""Facts about the cluster that shape a request: its partitions (``sinfo``) and its version.

Dryrun asks the cluster when Slurm's commands are there and answer; when they do not
(``--dryrun`` on a laptop) it goes on without these facts, as TorchX does.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Dict, Optional, Tuple

import attrs

from tx.config.environ import state_dir
from tx.log import get_logger
from tx_scheduler_slurm import _client
from tx_scheduler_slurm._parse import SINFO_FORMAT, Partition, parse_sinfo, parse_version

log = get_logger(__name__)

#: partitions reporting this much memory per node or less (MB) get no ``--mem``: some
#: clusters (AWS ParallelCluster) report RealMemory=1, which would reject every job
NOMEM_THRESHOLD_MB = 1000


@attrs.frozen
class ClusterInfo:
    """What dryrun knows of the cluster.

    Attributes:
        partitions: partition name -> :class:`Partition`; empty when unknown.
        version: Slurm's ``(major, minor)``, None when unknown.
    """

    partitions: Dict[str, Partition] = attrs.field(factory=dict)
    version: Optional[Tuple[int, int]] = None

    def partition(self, name: Optional[str]) -> Optional[Partition]:
        """The named partition, or the default one for None; None when unknown."""
        if name is None:
            return next((p for p in self.partitions.values() if p.default), None)
        return self.partitions.get(name)

    def nomem(self, name: Optional[str]) -> bool:
        """True when ``--mem`` must be left out: one of the partitions (``name`` may list
        several, ``a,b``; None: the default one) reports too little memory to trust."""
        names = [n for n in name.split(",") if n] if name is not None else [None]
        for n in names:
            p = self.partition(n)
            if p is not None and p.mem_mb is not None and p.mem_mb <= NOMEM_THRESHOLD_MB:
                return True
        return False

    def gpus_per_node(self) -> bool:
        """True on Slurm >= 24.11, where ``--gpus-per-node`` replaces ``--gpus-per-task``
        (select/linear rejects GRES per task since 24.11); False when the version is unknown."""
        return self.version is not None and self.version >= (24, 11)


def query_cluster(timeout: Optional[float] = None) -> ClusterInfo:
    """Ask ``sinfo`` for the partitions and the Slurm version; an empty :class:`ClusterInfo`
    when Slurm is not installed or does not answer (logged at debug level)."""
    try:
        out = _client.run(["sinfo", "--noheader", "--noconvert", f"--format={SINFO_FORMAT}"], timeout)
        version = client_version(timeout)
    except _client.SlurmError as e:
        log.debug("slurm_cluster_unknown", error=str(e))
        return ClusterInfo()
    return ClusterInfo(partitions=parse_sinfo(out.stdout), version=version)


def _version_cache() -> str:
    return os.path.join(state_dir(), "slurm", "client-version.json")


def client_version(timeout: Optional[float] = None) -> Optional[Tuple[int, int]]:
    """Slurm's ``(major, minor)`` as ``sinfo --version`` prints it, kept on disk (under the
    state dir) for as long as the ``sinfo`` binary is the same file (path, size, mtime):
    the version is the installed client's, so each dryrun (each ``tx sweep``, ``tx run``)
    need not start a process for it.

    Raises:
        SlurmError: ``sinfo`` is missing or fails.
    """
    exe = shutil.which("sinfo")
    key = ""
    if exe is not None:
        try:
            st = os.stat(exe)
            key = f"{os.path.realpath(exe)}:{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            key = ""
    path = _version_cache()
    if key:
        try:
            with open(path, encoding="utf-8") as f:
                cached = json.load(f)
            if cached.get("key") == key and isinstance(cached.get("version"), list):
                return (int(cached["version"][0]), int(cached["version"][1]))
        except (OSError, ValueError, TypeError, IndexError, AttributeError):
            pass
    version = parse_version(_client.run(["sinfo", "--version"], timeout).stdout)
    if key and version is not None:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"key": key, "version": list(version)}, f)
            os.replace(tmp, path)
        except OSError as e:  # a read-only state dir: ask again next time
            log.debug("slurm_version_not_cached", error=str(e))
    return version
