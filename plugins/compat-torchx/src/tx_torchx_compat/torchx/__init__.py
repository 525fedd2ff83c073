"""``torchx``, as tx-torchx-compat provides it where TorchX is not installed.

``__version__`` is the TorchX API level tx follows (0.7.0), so version checks in TorchX code
keep working; ``__tx_version__`` is tx-core's version. ``IMAGE`` is the default image of
the built-in components, as in TorchX.
"""
from tx.components import DEFAULT_IMAGE as IMAGE
from tx.version import __version__ as __tx_version__  # noqa: F401 - public: the tx-core version

#: marks this package as tx's shim (the import finder checks it)
__tx_compat__ = True
__version__ = "0.7.0"

__all__ = ["IMAGE", "__version__"]
