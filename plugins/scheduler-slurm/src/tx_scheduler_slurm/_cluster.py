"""Facts about the cluster that shape a request: its partitions (``sinfo``) and its version.

Dryrun asks the cluster when Slurm's commands are there and answer; when they do not
(``--dryrun`` on a laptop) it goes on without these facts, as TorchX does.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import attrs

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
        ver = _client.run(["sinfo", "--version"], timeout)
    except _client.SlurmError as e:
        log.debug("slurm_cluster_unknown", error=str(e))
        return ClusterInfo()
    return ClusterInfo(partitions=parse_sinfo(out.stdout), version=parse_version(ver.stdout))
