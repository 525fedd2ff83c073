"""``torchx.util.modules``: TorchX 0.7.0's ``load_module``."""
import importlib
from typing import Any, Optional

__all__ = ["load_module"]


def load_module(path: str) -> Optional[Any]:
    """The module ``path`` names (``"pkg.mod"``), or its attribute (``"pkg.mod:attr"``);
    None when the module cannot be imported (an attribute it lacks raises AttributeError)."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - TorchX: "None if it cannot be loaded"
        return None
    return getattr(module, attr) if attr else module

