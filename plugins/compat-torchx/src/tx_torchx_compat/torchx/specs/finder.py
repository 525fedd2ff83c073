"""``torchx.specs.finder``: :mod:`tx.specs.finder` at TorchX 0.7's path."""
from tx.specs.finder import *  # noqa: F401,F403
