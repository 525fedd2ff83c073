"""``torchx.apps.utils.copy_main``: :mod:`tx.apps.copy_main`."""
from tx.apps.copy_main import *  # noqa: F401,F403
from tx.apps.copy_main import __all__  # noqa: F401
