"""``tx.specs.builders``: TorchX 0.7.0's module path (``torchx.specs.builders``) of the component argument builders,
which tx keeps in :mod:`tx.components.system.builders`.

The component system stands above the model (docs/architecture.md), so this module
imports nothing when loaded: each name resolves in :mod:`tx.components.system.builders` on
first use, and is the same object there.
"""
from typing import Any, List

__all__ = ['ComponentArgs', 'ComponentArgumentError', 'component_args_from_dict', 'component_args_from_str', 'create_args_parser', 'materialize_appdef', 'materialize_appdef_from_dict']  # noqa: F822 (they resolve in __getattr__)


def __getattr__(name: str) -> Any:
    # deferred: tx.specs (floor 1) must not load the component system (floor 5) on import
    from tx.components.system import builders as target

    return getattr(target, name)


def __dir__() -> List[str]:
    return sorted(__all__)
