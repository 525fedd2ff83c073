"""``torchx.apps.serve.serve``: :mod:`tx.apps.serve`."""
from tx.apps.serve import *  # noqa: F401,F403
from tx.apps.serve import __all__  # noqa: F401
