"""``torchx.tracker``: :mod:`tx.tracker`."""
from tx.tracker import *  # noqa: F401,F403
