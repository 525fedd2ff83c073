"""``torchx.runner.events``: :mod:`tx.runner.events`; ``TorchxEvent`` is tx's ``TxEvent``."""
from tx.runner.events import *  # noqa: F401,F403
from tx.runner.events import TxEvent as TorchxEvent  # noqa: F401
