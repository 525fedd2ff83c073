"""``torchx.version``: TorchX's API level and the default image (see :mod:`torchx`)."""
from tx.components import DEFAULT_IMAGE as TORCHX_IMAGE
from tx.version import __version__ as __tx_version__  # noqa: F401
from tx_torchx_compat.torchx.util.entrypoints import load  # noqa: F401

__version__ = "0.7.0"

__all__ = ["TORCHX_IMAGE", "__version__"]
