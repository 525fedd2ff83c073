"""``torchx.specs``: tx's :mod:`tx.specs` at TorchX 0.7's path (same objects)."""
from typing import Any

from tx.specs import *  # noqa: F401,F403
from tx.specs import __all__ as _tx_all
from tx.components.system.builders import materialize_appdef  # noqa: F401
from tx.specs.named_resources import GENERIC as GENERIC_NAMED_RESOURCES  # noqa: F401
from tx.specs.named_resources import GiB  # noqa: F401
from tx_torchx_compat._handles import parse_app_handle  # noqa: F401 - TorchX 0.7's rules
from tx_torchx_compat.torchx.specs.api import get_type_name  # noqa: F401 - TorchX's naming, not tx's
from tx_torchx_compat.torchx.util.entrypoints import load_group  # noqa: F401

__all__ = [*_tx_all, "GENERIC_NAMED_RESOURCES", "GiB", "load_group", "materialize_appdef"]


def __getattr__(name: str) -> Any:
    if name == "AWS_NAMED_RESOURCES":  # from tx-scheduler-aws-batch, imported on first use
        from tx_torchx_compat.torchx.specs import named_resources_aws

        return named_resources_aws.NAMED_RESOURCES
    raise AttributeError(f"module 'torchx.specs' has no attribute {name!r}")
