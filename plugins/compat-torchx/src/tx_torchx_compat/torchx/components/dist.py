"""``torchx.components.dist``: :mod:`tx.components.dist`."""
from tx.components.dist import *  # noqa: F401,F403
from tx.components.dist import parse_nnodes  # noqa: F401,E402
from tx.specs.api import macros  # noqa: F401,E402
from tx.components.dist import TORCH_DEBUG_FLAGS as _TORCH_DEBUG_FLAGS  # noqa: F401,E402 - TorchX's name
