"""``torchx.schedulers.ray.ray_common``: TorchX 0.7.0's description of one Ray actor (a
replica) and the rank-0 host variable.

tx-scheduler-ray does not take actors from the client: its driver starts one actor per replica
from the job's spec (``tx_scheduler_ray.request.build_spec``). :class:`RayActor` is the shape
TorchX projects build or read; it needs neither Ray nor tx-scheduler-ray.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

#: the variable holding rank 0's host (tx sets it with ``TX_RANK0_HOST``)
TORCHX_RANK0_HOST: str = "TORCHX_RANK0_HOST"


@dataclass
class RayActor:
    """One actor (a replica in TorchX's terms).

    Attributes:
        name: the role name.
        command: the entrypoint and its arguments.
        env: environment variables of the replica.
        num_cpus: CPUs the actor reserves (Ray's ``num_cpus``).
        num_gpus: GPUs the actor reserves (Ray's ``num_gpus``).
        min_replicas: the fewest replicas of the role that may run (elastic); None: all.
    """

    name: str
    command: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    num_cpus: int = 1
    num_gpus: int = 0
    min_replicas: Optional[int] = None
