"""``torchx.runner``: tx's Runner at TorchX 0.7's path (:mod:`torchx.runner.api`'s: mounts a
scheduler supports none of are dropped with a warning, as TorchX ignores them)."""
from tx_torchx_compat.torchx.runner.api import Runner, get_runner

__all__ = ["Runner", "get_runner"]
