"""The cluster facts from one ``scontrol show partition`` and slurm.conf's nodes
(tx_scheduler_slurm._partitions): what is read, and every case that falls back to sinfo."""
from pathlib import Path

import pytest

from tx_scheduler_slurm._parse import Partition
from tx_scheduler_slurm._partitions import expand_hostlist, nodes_in_conf, partitions_from

CONF = """# a cluster
ClusterName=c
NodeName=DEFAULT RealMemory=4096
NodeName=node[1-3] CPUs=2 NodeAddr=127.0.0.1 State=UNKNOWN
NodeName=big01 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=64000 Reason="big one (test)"
NodeName=tiny CPUs=1 RealMemory=1
PartitionName=debug Nodes=node[1-3] Default=YES
"""

#: what scontrol show partition --oneliner prints for CONF's nodes (shortened)
SCONTROL = (
    "PartitionName=debug Default=YES GraceTime=0 MaxTime=UNLIMITED Nodes=node[1-3] PreemptMode=OFF State=UP "
    "TotalCPUs=6 TotalNodes=3 TRES=cpu=6,mem=12G,node=3,billing=6\n"
    "PartitionName=mixed Default=NO GraceTime=30 MaxTime=1-00:00:00 Nodes=big01,tiny,node1 PreemptMode=REQUEUE "
    "State=UP TotalCPUs=35 TotalNodes=3 TRES=cpu=35,mem=68097M,node=3\n"
)


def test_hostlists() -> None:
    assert expand_hostlist("node[1-3,07],gpu1") == ["node1", "node2", "node3", "node07", "gpu1"]
    assert expand_hostlist("n[08-10]") == ["n08", "n09", "n10"]
    for unsure in ("a[1-2]b[1-2]", "", "n[3-1]", "n[x]", "n[[1]]"):
        assert expand_hostlist(unsure) is None, unsure


def test_nodes_and_partitions_from_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    nodes = nodes_in_conf(str(conf))
    assert nodes == {"node1": (2, 4096), "node2": (2, 4096), "node3": (2, 4096), "big01": (32, 64000),
                     "tiny": (1, 1)}
    parts = partitions_from(SCONTROL, nodes)
    assert parts == {"debug": Partition("debug", 4096, 3, True, 2, None, 4096, "OFF"),
                     "mixed": Partition("mixed", 1, 3, False, 32, 1440, 64000, "REQUEUE")}


@pytest.mark.parametrize("text", [
    SCONTROL.replace("mem=12G", "mem=16G"),  # slurmctld's memory is not slurm.conf's (edited since)
    SCONTROL.replace("TotalCPUs=6", "TotalCPUs=8"),
    SCONTROL.replace("TotalNodes=3 TRES=cpu=6", "TotalNodes=4 TRES=cpu=6"),
    SCONTROL.replace("Nodes=node[1-3]", "Nodes=node[1-4]"),  # a node slurm.conf does not define
    SCONTROL.replace("mem=12G", "mem=12.5G"),
    SCONTROL.replace("TRES=cpu=6,mem=12G,node=3,billing=6", "TRES=cpu=6,node=3"),
    "",
])
def test_what_disagrees_asks_sinfo(tmp_path: Path, text: str) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    assert partitions_from(text, nodes_in_conf(str(conf)) or {}) is None


@pytest.mark.parametrize("extra", [
    "Include /etc/slurm/nodes.conf\n", "NodeSet=gpus Feature=gpu\n", "NodeName=f1 CPUs=2 State=FUTURE\n",
    "NodeName=c[1-2] CPUs=2 State=CLOUD\n", "NodeName=n9 CPUs=x\n", "NodeName=n9 CPUs=2 \\\n",
    "NodeName=n9 CPUs=4 Sockets=2 CoresPerSocket=4\n",  # CPUs that Slurm would reconcile with the topology
])
def test_what_is_not_read_with_certainty_asks_sinfo(tmp_path: Path, extra: str) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF + extra)
    assert nodes_in_conf(str(conf)) is None
    assert nodes_in_conf(str(tmp_path / "missing.conf")) is None
