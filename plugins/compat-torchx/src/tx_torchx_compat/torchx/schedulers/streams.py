"""``torchx.schedulers.streams``: :mod:`tx.schedulers.streams`."""
from tx.schedulers.streams import *  # noqa: F401,F403
