"""``torchx.runner.config``: :mod:`tx.runner.config` (``apply``, ``load``, ``dump``,
``find_configs`` ... with TorchX 0.7's signatures)."""
from tx.runner.config import *  # noqa: F401,F403
