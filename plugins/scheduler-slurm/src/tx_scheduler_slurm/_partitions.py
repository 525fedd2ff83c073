"""The cluster facts a dryrun checks against from one RPC: ``scontrol show partition``.

``sinfo`` costs slurmctld two RPCs (REQUEST_PARTITION_INFO and REQUEST_NODE_INFO), and a
partition with preemption a third (``scontrol show partition`` for its ``GraceTime``). A
partition's own record (``scontrol show partition --oneliner``, one REQUEST_PARTITION_INFO)
has all but the nodes' hardware: its name, ``Default``, ``MaxTime``, ``PreemptMode``,
``GraceTime``, its ``Nodes`` and their totals as slurmctld holds them now (``TotalNodes``,
``TotalCPUs``, the ``mem`` of ``TRES``, MB). The smallest and largest node of a partition
(``sinfo %m``/``%c``: whether ``--mem`` is given at all, whether a role fits a node) come
from the nodes' definitions in slurm.conf (``CPUs``, ``RealMemory``: what slurmctld uses,
not what a node reports), and are used only where they agree with slurmctld's totals of
every partition (node count, CPUs and memory summed over its ``Nodes``): a slurm.conf edited
since slurmctld read it, a node slurm.conf does not define (dynamic nodes), an ``Include``,
a ``NodeSet``, FUTURE or CLOUD nodes, or anything this module does not read with certainty
give None, and the caller asks ``sinfo`` as before. Standard library only.
"""
from __future__ import annotations

import os
import re
import shlex
from typing import Dict, List, Mapping, Optional, Tuple

from tx_scheduler_slurm._index import conf_path
from tx_scheduler_slurm._parse import Partition, parse_time_min

__all__ = ["expand_hostlist", "nodes_in_conf", "partitions_from"]

#: ``prefix[ranges]suffix``: one bracket group (Slurm allows several; those give None)
_GROUP = re.compile(r"^([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
#: the most host names one hostlist may expand to here (more: None, sinfo is asked)
MAX_HOSTS = 100_000
#: MB in one unit of slurmctld's TRES ``mem=`` (an exact conversion: 16G is 16384 MB)
_UNIT_MB = {"": 1, "M": 1, "G": 1024, "T": 1024 ** 2, "P": 1024 ** 3}
#: node keys of slurm.conf whose product is a node's CPUs where ``CPUs`` is not given
_TOPOLOGY = ("boards", "socketsperboard", "sockets", "corespersocket", "threadspercore")

_cache: Optional[Tuple[Tuple[str, int, int], Optional[Dict[str, Tuple[int, int]]]]] = None


def expand_hostlist(text: str) -> Optional[List[str]]:
    """``node[1-3,07],gpu1`` -> ``['node1', 'node2', 'node3', 'node07', 'gpu1']`` (a range's
    width is its first number's, as Slurm pads it); None for what is not read with certainty
    here (several bracket groups in one name, an empty list, more than :data:`MAX_HOSTS`)."""
    parts, depth, cur = [], 0, ""
    for ch in text.strip():
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (ch == "[") - (ch == "]")
        if depth not in (0, 1):
            return None
        cur += ch
    parts.append(cur)
    out: List[str] = []
    for part in parts:
        if not part:
            return None
        if "[" not in part and "]" not in part:
            out.append(part)
            continue
        m = _GROUP.match(part)
        if m is None:
            return None
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            rm = _RANGE.match(r)
            if rm is None:
                return None
            lo, hi = int(rm[1]), int(rm[2] if rm[2] is not None else rm[1])
            if hi < lo or len(out) + hi - lo >= MAX_HOSTS:
                return None
            out.extend(f"{prefix}{i:0{len(rm[1])}d}{suffix}" for i in range(lo, hi + 1))
    return out


def _node_line(words: List[str], defaults: Mapping[str, str]) -> Optional[Tuple[List[str], Tuple[int, int]]]:
    """The host names and ``(CPUs, RealMemory MB)`` of one ``NodeName=`` line (its keys over
    ``defaults``, lower case); None where not read with certainty."""
    fields = dict(defaults)
    for w in words[1:]:
        key, sep, value = w.partition("=")
        if not sep:
            return None
        fields[key.lower()] = value
    if fields.get("state", "").upper().split("+")[0] in ("FUTURE", "CLOUD"):
        return None  # sinfo leaves FUTURE nodes out, CLOUD nodes come and go: ask sinfo
    names = expand_hostlist(words[0].partition("=")[2])
    cpus_text = fields.get("cpus", fields.get("procs"))
    try:
        mem = int(fields.get("realmemory", "1"))  # Slurm's default RealMemory is 1 MB
        topo = {k: int(fields[k]) for k in _TOPOLOGY if k in fields}
        # Slurm: Boards x SocketsPerBoard (or Sockets) x CoresPerSocket x ThreadsPerCore
        sockets = topo.get("sockets", topo.get("boards", 1) * topo.get("socketsperboard", 1))
        product = sockets * topo.get("corespersocket", 1) * topo.get("threadspercore", 1)
        cpus = int(cpus_text) if cpus_text is not None else product
    except ValueError:
        return None
    if topo and cpus != product:
        return None  # Slurm reconciles CPUs with the topology in ways not repeated here
    return (names, (cpus, mem)) if names and cpus > 0 else None


def nodes_in_conf(path: Optional[str] = None) -> Optional[Dict[str, Tuple[int, int]]]:
    """Node name -> ``(CPUs, RealMemory MB)`` as slurm.conf (``path``, default
    :func:`tx_scheduler_slurm._index.conf_path`) defines them; read again when the file
    changes (path, mtime, size). None where it cannot be read (configless clusters), has an
    ``Include``, a ``NodeSet``, a continued line, FUTURE or CLOUD nodes, or a node line this
    module does not read with certainty: the caller asks ``sinfo``."""
    global _cache
    path = path or conf_path()
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        if _cache is not None and _cache[0] == key:
            return _cache[1]
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    _cache = (key, _read_nodes(text))
    return _cache[1]


def _read_nodes(text: str) -> Optional[Dict[str, Tuple[int, int]]]:
    nodes: Dict[str, Tuple[int, int]] = {}
    defaults: Dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.endswith("\\"):
            return None
        head = line.split("=", 1)[0].strip().lower()
        if head.startswith("include") or head == "nodeset":
            return None
        if head != "nodename":
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            return None
        if words[0].partition("=")[2].upper() == "DEFAULT":
            defaults.update((k.lower(), v) for k, _, v in (w.partition("=") for w in words[1:]))
            continue
        read = _node_line(words, defaults)
        if read is None:
            return None
        for name in read[0]:
            nodes[name] = read[1]
    return nodes or None


def _mem_mb(tres: str) -> Optional[int]:
    """The ``mem=`` of a TRES text (``cpu=8,mem=16G,node=4``) in MB; None where absent or not
    a whole number of MB."""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "mem":
            m = re.match(r"^(\d+)([MGTP]?)$", value)
            return int(m[1]) * _UNIT_MB[m[2]] if m else None
    return None


def partitions_from(scontrol_out: str, nodes: Mapping[str, Tuple[int, int]]) -> Optional[Dict[str, Partition]]:
    """The partitions of ``scontrol show partition --oneliner`` output as ``sinfo`` would
    give them (:func:`tx_scheduler_slurm._parse.parse_sinfo`), their nodes' smallest and
    largest CPUs and memory from ``nodes`` (:func:`nodes_in_conf`); None where any partition
    lists a node ``nodes`` lacks, or its node count, CPUs or memory summed over ``nodes``
    differ from slurmctld's totals (slurm.conf is not what slurmctld runs with)."""
    out: Dict[str, Partition] = {}
    for line in scontrol_out.splitlines():
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        name = fields.get("PartitionName")
        if not name:
            continue
        listed = fields.get("Nodes", "")
        hosts = [] if listed in ("", "(null)") else expand_hostlist(listed)
        if hosts is None or any(h not in nodes for h in hosts):
            return None
        hw = [nodes[h] for h in hosts]
        total_mem = _mem_mb(fields.get("TRES", ""))
        try:
            total_nodes, total_cpus = int(fields["TotalNodes"]), int(fields["TotalCPUs"])
        except (KeyError, ValueError):
            return None
        if (len(set(hosts)), sum(c for c, _ in hw), sum(m for _, m in hw)) != (total_nodes, total_cpus, total_mem) \
                or len(set(hosts)) != len(hosts):
            return None
        mems = [m for _, m in hw if m > 0]
        out[name] = Partition(
            name, min(mems) if mems else None, total_nodes, fields.get("Default") == "YES",
            max((c for c, _ in hw), default=None), parse_time_min(fields.get("MaxTime", "")),
            max(mems) if mems else None, fields.get("PreemptMode", "").upper() or None)
    return out or None
