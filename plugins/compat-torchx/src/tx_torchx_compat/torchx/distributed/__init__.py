"""``torchx.distributed``: :mod:`tx.distributed` (rank, local_rank, local_device ...)."""
from tx.distributed import *  # noqa: F401,F403
