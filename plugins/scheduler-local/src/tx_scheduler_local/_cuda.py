"""``auto_set_cuda_visible_devices``: give each replica its own GPUs (TorchX 2023 rules).

* total = sum over roles of ``resource.gpu * num_replicas`` (roles with gpu <= 0 skipped);
  0 -> nothing to do.
* the host's count comes from ``nvidia-smi -L`` (non-empty lines; the scheduler's
  ``nvidia_smi_device_count``, passed in): a missing binary or a failing command counts as 0.
  torch is never imported. Nothing here runs a command.
* fewer devices than requested -> a warning, nothing set (all or nothing).
* otherwise contiguous, non-overlapping ranges in role order then replica order, which
  replace any ``CUDA_VISIBLE_DEVICES`` the role sets. On 8 GPUs, roles [1 x 2 GPUs,
  3 x 1 GPU] get ``0,1``, ``2``, ``3``, ``4``.

When the option is off and more than one replica asks for GPUs, a warning says they all see
(and share) every GPU.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple


def plan(
    roles: Sequence[Tuple[str, int, int]],
    enabled: bool,
    device_count: Callable[[], int],
) -> Tuple[Optional[List[Optional[List[str]]]], List[str]]:
    """Plan ``CUDA_VISIBLE_DEVICES`` for ``roles`` given as ``(name, gpus per replica,
    replicas)``.

    Returns:
        ``(assignment, warnings)``: ``assignment`` is None when nothing is to be set, else
        one entry per role: None for a role without GPUs, or one value per replica.
    """
    total = sum(gpu * n for _, gpu, n in roles if gpu > 0)
    sharing = sum(n for _, gpu, n in roles if gpu > 0)
    if not enabled:
        if total > 0 and sharing > 1:
            return None, [
                f"{sharing} replicas request GPUs and will share every GPU of this host; "
                "run with auto_set_cuda_visible_devices=True to give each replica its own"
            ]
        return None, []
    if total == 0:
        return None, []
    count = device_count()
    if count < total:
        return None, [
            f"the app requests {total} GPUs but this host has {count}: "
            "CUDA_VISIBLE_DEVICES is not set (replicas share the GPUs)"
        ]
    out: List[Optional[List[str]]] = []
    nxt = 0
    for _, gpu, n in roles:
        if gpu <= 0:
            out.append(None)
            continue
        values = []
        for _k in range(n):
            values.append(",".join(str(d) for d in range(nxt, nxt + gpu)))
            nxt += gpu
        out.append(values)
    return out, []
