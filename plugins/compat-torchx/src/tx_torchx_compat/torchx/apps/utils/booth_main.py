"""``torchx.apps.utils.booth_main``: :mod:`tx.apps.booth_main`."""
from tx.apps.booth_main import *  # noqa: F401,F403
from tx.apps.booth_main import __all__  # noqa: F401
