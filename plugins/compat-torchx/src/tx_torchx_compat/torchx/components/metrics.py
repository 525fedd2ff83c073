"""``torchx.components.metrics``: :mod:`tx.components.metrics`."""
from tx.components.metrics import *  # noqa: F401,F403
