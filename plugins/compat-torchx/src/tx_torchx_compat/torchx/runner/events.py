"""``torchx.runner.events``: :mod:`tx.runner.events`."""
from tx.runner.events import *  # noqa: F401,F403
