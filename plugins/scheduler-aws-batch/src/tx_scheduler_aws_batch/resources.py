"""AWS named resources: TorchX 0.7.0's ``aws_*`` instance types.

Each name (``aws_p4d.24xlarge``) maps to a zero-argument function (``aws_p4d_24xlarge``)
returning a fresh :class:`tx.specs.Resource` with:

* ``cpu``: the instance's vCPUs; ``gpu``: its GPUs;
* ``memMB``: its memory in GiB times :data:`GiB` (1024 MB less the :data:`MEM_TAX` of 4%:
  the ECS agent and the OS keep part of an instance's memory, and Batch's memory
  requirement is a hard limit, so asking for the full amount would never place the job;
  https://docs.aws.amazon.com/batch/latest/userguide/memory-management.html);
* ``capabilities``: ``{"node.kubernetes.io/instance-type": "<type>"}``, which the
  ``aws_batch`` scheduler turns into the node range's ``instanceType`` (needed where a
  compute environment mixes instance types);
* ``devices``: EFA interfaces (``vpc.amazonaws.com/efa``) and Neuron devices
  (``aws.amazon.com/neurondevice``) where the instance has them.

Instance facts from https://aws.amazon.com/ec2/instance-types/.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

from tx.specs import Resource

#: share of an instance's memory a job may ask for
MEM_TAX = 0.96
#: MB per GiB of instance memory, after the tax
GiB = int(1024 * MEM_TAX)
#: the capability that names the instance type (TorchX's and Kubernetes' key)
K8S_ITYPE = "node.kubernetes.io/instance-type"
EFA_DEVICE = "vpc.amazonaws.com/efa"
NEURON_DEVICE = "aws.amazon.com/neurondevice"

#: instance type -> (vCPUs, GPUs, memory GiB, devices)
INSTANCES: Dict[str, Tuple[int, int, int, Dict[str, int]]] = {
    "t3.medium": (2, 0, 4, {}),
    "m5.2xlarge": (8, 0, 32, {}),
    "p3.2xlarge": (8, 1, 61, {}),
    "p3.8xlarge": (32, 4, 244, {}),
    "p3.16xlarge": (64, 8, 488, {}),
    "p3dn.24xlarge": (96, 8, 768, {EFA_DEVICE: 1}),
    "p4d.24xlarge": (96, 8, 1152, {EFA_DEVICE: 4}),
    "p4de.24xlarge": (96, 8, 1152, {EFA_DEVICE: 4}),
    "p5.48xlarge": (192, 8, 2048, {EFA_DEVICE: 32}),
    "g4dn.xlarge": (4, 1, 16, {}),
    "g4dn.2xlarge": (8, 1, 32, {}),
    "g4dn.4xlarge": (16, 1, 64, {}),
    "g4dn.8xlarge": (32, 1, 128, {}),
    "g4dn.12xlarge": (48, 4, 192, {}),
    "g4dn.16xlarge": (64, 1, 256, {}),
    "g4dn.metal": (96, 8, 384, {}),
    "g5.xlarge": (4, 1, 16, {}),
    "g5.2xlarge": (8, 1, 32, {}),
    "g5.4xlarge": (16, 1, 64, {}),
    "g5.8xlarge": (32, 1, 128, {}),
    "g5.12xlarge": (48, 4, 192, {}),
    "g5.16xlarge": (64, 1, 256, {}),
    "g5.24xlarge": (96, 4, 384, {}),
    "g5.48xlarge": (192, 8, 768, {}),
    "trn1.2xlarge": (8, 0, 32, {NEURON_DEVICE: 1}),
    "trn1.32xlarge": (128, 0, 512, {NEURON_DEVICE: 16, EFA_DEVICE: 8}),
}


def _factory(itype: str) -> Callable[[], Resource]:
    cpu, gpu, mem_gib, devices = INSTANCES[itype]

    def make() -> Resource:
        return Resource(
            cpu=cpu, gpu=gpu, memMB=mem_gib * GiB,
            capabilities={K8S_ITYPE: itype}, devices=dict(devices),
        )

    make.__name__ = "aws_" + itype.replace(".", "_")
    make.__doc__ = f"AWS {itype}: {cpu} vCPUs, {gpu} GPUs, {mem_gib} GiB (x {MEM_TAX} as memMB)."
    return make


#: registered name (``aws_p4d.24xlarge``) -> function name in this module (``aws_p4d_24xlarge``)
NAMES: Dict[str, str] = {f"aws_{t}": "aws_" + t.replace(".", "_") for t in INSTANCES}

for _itype in INSTANCES:
    globals()["aws_" + _itype.replace(".", "_")] = _factory(_itype)


def instance_type_from_resource(resource: Resource) -> str:
    """The instance type named by ``resource.capabilities`` (empty string if none)."""
    return str(resource.capabilities.get(K8S_ITYPE) or "")
