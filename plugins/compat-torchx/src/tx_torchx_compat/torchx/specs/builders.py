"""``torchx.specs.builders``: :mod:`tx.specs.builders` at TorchX 0.7's path."""
from tx.specs.builders import *  # noqa: F401,F403
