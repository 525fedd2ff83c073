"""``torchx.components.structured_arg``: :mod:`tx.components.structured_arg`."""
from tx.components.structured_arg import *  # noqa: F401,F403
