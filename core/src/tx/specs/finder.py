"""``tx.specs.finder``: TorchX 0.7.0's module path (``torchx.specs.finder``) of the component finder,
which tx keeps in :mod:`tx.components.system.finder`.

The component system stands above the model (docs/architecture.md), so this module
imports nothing when loaded: each name resolves in :mod:`tx.components.system.finder` on
first use, and is the same object there.
"""
from typing import Any, List

__all__ = ['Component', 'ComponentError', 'ComponentNotFoundException', 'ComponentValidationException', 'get_builtin_source', 'get_component', 'get_components']  # noqa: F822 (they resolve in __getattr__)


def __getattr__(name: str) -> Any:
    # deferred: tx.specs (floor 1) must not load the component system (floor 5) on import
    from tx.components.system import finder as target

    return getattr(target, name)


def __dir__() -> List[str]:
    return sorted(__all__)
