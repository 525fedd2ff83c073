"""``torchx.schedulers.ids``: :mod:`tx.schedulers.ids`."""
from tx.schedulers.ids import *  # noqa: F401,F403
