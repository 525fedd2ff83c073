"""``torchx.apps.utils.process_monitor``: :mod:`tx.apps.process_monitor`."""
from tx.apps.process_monitor import *  # noqa: F401,F403
from tx.apps.process_monitor import __all__  # noqa: F401
