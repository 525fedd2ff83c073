"""Facts about the cluster that shape a request: its partitions (``scontrol show partition``
with the nodes of slurm.conf, :mod:`tx_scheduler_slurm._partitions`, else ``sinfo``) and its
version, and the dryrun's checks of an app against its partitions (:func:`check_partitions`).

Dryrun asks the cluster when Slurm's commands are there and answer; when they do not
(``--dryrun`` on a laptop) it goes on without these facts, as TorchX does.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Dict, List, Mapping, Optional, Set, Tuple

import attrs

from tx.config import state_dir
from tx import get_logger
from tx.specs import AppDef, CfgVal, InvalidRunConfigException
from tx_scheduler_slurm import _client, _partitions
from tx_scheduler_slurm._parse import SINFO_FORMAT, Partition, parse_sinfo, parse_time_min, parse_version
from tx_scheduler_slurm.request import total_replicas

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
        partition_text: ``scontrol show partition --oneliner``'s output where it was asked
            with these facts (its ``GraceTime`` then needs no call of its own), else None.
    """

    partitions: Dict[str, Partition] = attrs.field(factory=dict)
    version: Optional[Tuple[int, int]] = None
    partition_text: Optional[str] = attrs.field(default=None, repr=False)
    #: what :func:`check_partitions` found fits these facts (its inputs: partitions, time,
    #: each role's name, CPUs, memory, replicas), so that a sweep's trials of one shape are
    #: checked once; a refusal is never kept
    _fits: Set[Tuple[object, ...]] = attrs.field(factory=set, init=False, repr=False, eq=False)

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
    """The partitions and the Slurm version: where slurm.conf defines the nodes
    (:func:`tx_scheduler_slurm._partitions.nodes_in_conf`), one ``scontrol show partition``
    (one RPC, which has the partitions' ``GraceTime`` too) with the nodes' CPUs and memory
    from slurm.conf where they agree with slurmctld's totals of every partition
    (:func:`tx_scheduler_slurm._partitions.partitions_from`); else, or where they do not
    agree, ``sinfo`` (two RPCs: partitions and nodes). An empty :class:`ClusterInfo` when
    Slurm is not installed or does not answer (logged at debug level)."""
    text: Optional[str] = None
    try:
        nodes = _partitions.nodes_in_conf()
        if nodes is not None:
            text = _client.run(["scontrol", "show", "partition", "--oneliner"], timeout).stdout
            parts = _partitions.partitions_from(text, nodes)
            if parts is not None:
                return ClusterInfo(partitions=parts, version=client_version(timeout), partition_text=text)
            log.debug("slurm_conf_nodes_differ", conf="slurm.conf's nodes are not slurmctld's: sinfo asked")
        out = _client.run(["sinfo", "--noheader", "--noconvert", f"--format={SINFO_FORMAT}"], timeout)
        version = client_version(timeout)
    except _client.SlurmError as e:
        log.debug("slurm_cluster_unknown", error=str(e))
        return ClusterInfo()
    return ClusterInfo(partitions=parse_sinfo(out.stdout), version=version, partition_text=text)


def hostnames(nodelist: str, timeout: Optional[float] = None) -> List[str]:
    """``node[1-2],gpu3`` expanded by ``scontrol show hostnames`` (no RPC); split at commas
    where Slurm's commands are missing or fail here (dryrun on a laptop)."""
    try:
        return _client.run(["scontrol", "show", "hostnames", nodelist], timeout).stdout.split()
    except _client.SlurmError as e:
        log.debug("slurm_hostnames_unavailable", error=str(e))
        return [n for n in nodelist.split(",") if n]


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


def check_partitions(app: AppDef, cluster: ClusterInfo, name: Optional[str], cfg: Mapping[str, CfgVal]) -> None:
    """Where the cluster facts are known: every named partition (``a,b`` lists several)
    exists, and the largest has a node for each replica (het components never share nodes);
    each role fits (:func:`check_fits`). What fits is kept in ``cluster`` (one check per
    shape of app: a sweep's trials).

    Raises:
        InvalidRunConfigException: no such partition, or ``time`` beyond its limit.
        ValueError: more replicas than nodes, or a role larger than every node.
    """
    if not cluster.partitions:
        return
    key = (name, cfg.get("time"), tuple((r.name, r.resource.cpu, r.resource.memMB, r.num_replicas) for r in app.roles))
    if key in cluster._fits:
        return
    _check_partitions(app, cluster, name, cfg)
    cluster._fits.add(key)


def _check_partitions(app: AppDef, cluster: ClusterInfo, name: Optional[str], cfg: Mapping[str, CfgVal]) -> None:
    """:func:`check_partitions`, never kept."""
    names = [n for n in name.split(",") if n] if name is not None else [None]
    parts = []
    for n in names:
        p = cluster.partition(n)
        if n is not None and p is None:
            raise InvalidRunConfigException(
                f"run option 'partition': no partition {n!r} on this cluster; "
                f"partitions: {', '.join(sorted(cluster.partitions))}",
                "partition", cfg,
            )
        if p is not None:
            parts.append(p)
    if not parts:
        return
    check_fits(app, parts, cfg)
    largest = max(parts, key=lambda p: p.nodes)
    needed = total_replicas(app)
    if needed > largest.nodes:
        per_role = ", ".join(f"{r.name}: {r.num_replicas}" for r in app.roles)
        raise ValueError(
            f"app {app.name!r} needs {needed} nodes ({per_role}) but partition "
            f"{largest.name!r} has {largest.nodes}: each replica is a component of a "
            "heterogeneous job and Slurm never puts two components on one node"
        )


def check_fits(app: AppDef, parts: List[Partition], cfg: Mapping[str, CfgVal]) -> None:
    """Each role's CPUs and memory fit a node of one of the partitions, and ``time`` is
    within the largest time limit (Slurm would otherwise keep the job pending forever as
    ``PartitionConfig``, or store an absurd limit)."""
    names = ", ".join(p.name for p in parts)
    for role in app.roles:
        res = role.resource
        cpus = [p.cpus for p in parts if p.cpus]
        if res.cpu > 0 and cpus and res.cpu > max(cpus):
            raise ValueError(
                f"role {role.name!r} asks for {res.cpu} CPUs per replica but the nodes of partition "
                f"{names} have at most {max(cpus)}: Slurm would keep the job pending forever"
            )
        mems = [p.max_mem_mb for p in parts if p.max_mem_mb]
        if res.memMB > 0 and mems and all((p.mem_mb or 0) > NOMEM_THRESHOLD_MB for p in parts) \
                and res.memMB > max(mems):
            raise ValueError(
                f"role {role.name!r} asks for {res.memMB} MB per replica but the nodes of partition "
                f"{names} have at most {max(mems)} MB: Slurm would keep the job pending forever"
            )
    time = cfg.get("time")
    if time is None:
        return
    minutes = parse_time_min(str(time))
    limits = [p.max_time_min for p in parts]
    if minutes is not None and None not in limits and limits and minutes > max(limits):  # type: ignore[type-var]
        raise InvalidRunConfigException(
            f"run option 'time' is {minutes} minutes but partition {names} allows at most "
            f"{max(limits)} minutes (sinfo %l)", "time", cfg,  # type: ignore[type-var]
        )
