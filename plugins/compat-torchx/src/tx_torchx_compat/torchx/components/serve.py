"""``torchx.components.serve``: :mod:`tx.components.serve`."""
from tx.components.serve import *  # noqa: F401,F403
