"""``torchx.runner``: tx's Runner at TorchX 0.7's path."""
from tx.runner.api import Runner, get_runner

__all__ = ["Runner", "get_runner"]
