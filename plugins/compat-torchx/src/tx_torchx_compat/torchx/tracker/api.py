"""``torchx.tracker.api``: :mod:`tx.tracker.api`."""
from tx.tracker.api import *  # noqa: F401,F403
