"""``torchx.schedulers.devices``: TorchX 0.7.0's mapping of named devices
(``Resource.devices``, e.g. ``{"vpc.amazonaws.com/efa": 2}``) to host device files, as
:class:`~tx.specs.api.DeviceMount` objects. tx's docker and aws_batch schedulers map the same
two names to the same files (``/dev/infiniband/uverbs<i>``, ``/dev/neuron<i>``)."""
import functools
import warnings
from typing import Callable, Dict, List, Mapping

from tx.specs import DeviceMount

__all__ = ["DEVICES", "EFA_DEVICE", "NEURON_DEVICE", "efa_to_devicemounts", "get_device_mounts",
           "neuron_to_devicemounts", "to_devicemounts"]

#: AWS Elastic Fabric Adapter devices (one unit: one ``/dev/infiniband/uverbs<i>``)
EFA_DEVICE = "vpc.amazonaws.com/efa"
#: AWS Neuron (Trainium/Inferentia) devices (one unit: one ``/dev/neuron<i>``)
NEURON_DEVICE = "aws.amazon.com/neurondevice"


def to_devicemounts(num_devices: int, device_type: str) -> List[DeviceMount]:
    """``num_devices`` mounts of ``<device_type>0``, ``<device_type>1``, ... at the same
    path in the container (read, write, mknod)."""
    return [DeviceMount(src_path=f"{device_type}{i}", dst_path=f"{device_type}{i}") for i in range(num_devices)]


neuron_to_devicemounts: Callable[[int], List[DeviceMount]] = functools.partial(
    to_devicemounts, device_type="/dev/neuron")
efa_to_devicemounts: Callable[[int], List[DeviceMount]] = functools.partial(
    to_devicemounts, device_type="/dev/infiniband/uverbs")

#: named device -> its mounts for a count
DEVICES: Mapping[str, Callable[[int], List[DeviceMount]]] = {
    EFA_DEVICE: efa_to_devicemounts,
    NEURON_DEVICE: neuron_to_devicemounts,
}


def get_device_mounts(devices: Dict[str, int]) -> List[DeviceMount]:
    """The device mounts of ``devices`` (name -> count), in the dict's order; a name not in
    :data:`DEVICES` is skipped with a ``UserWarning`` naming it."""
    mounts: List[DeviceMount] = []
    for name, count in devices.items():
        if name not in DEVICES:
            warnings.warn(f"Could not find named device: {name}", stacklevel=2)
            continue
        mounts += DEVICES[name](count)
    return mounts
