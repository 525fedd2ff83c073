"""``torchx.specs``: tx's :mod:`tx.specs` at TorchX 0.7's path (same objects)."""
from tx.specs import *  # noqa: F401,F403
from tx.specs import __all__ as _tx_all
from tx.specs.builders import materialize_appdef  # noqa: F401
from tx.specs.named_resources import GENERIC as GENERIC_NAMED_RESOURCES  # noqa: F401
from tx.specs.named_resources import GiB  # noqa: F401
from tx_torchx_compat._handles import parse_app_handle  # noqa: F401 - TorchX 0.7's rules

__all__ = [*_tx_all, "GENERIC_NAMED_RESOURCES", "GiB", "materialize_appdef"]
