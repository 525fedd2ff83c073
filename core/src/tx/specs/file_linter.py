"""``tx.specs.file_linter``: TorchX 0.7.0's module path (``torchx.specs.file_linter``) of the component linter,
which tx keeps in :mod:`tx.components.system.file_linter`.

The component system stands above the model (docs/architecture.md), so this module
imports nothing when loaded: each name resolves in :mod:`tx.components.system.file_linter` on
first use, and is the same object there.
"""
from typing import Any, List

__all__ = ['ERROR', 'get_fn_docstring', 'lint_function', 'LinterMessage', 'NOT_FOUND', 'SYNTAX_ERROR', 'validate', 'validate_module', 'WARNING']  # noqa: F822 (they resolve in __getattr__)


def __getattr__(name: str) -> Any:
    # deferred: tx.specs (floor 1) must not load the component system (floor 5) on import
    from tx.components.system import file_linter as target

    return getattr(target, name)


def __dir__() -> List[str]:
    return sorted(__all__)
