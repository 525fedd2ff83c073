"""``torchx.components.utils``: :mod:`tx.components.utils`."""
from tx.components.utils import *  # noqa: F401,F403
