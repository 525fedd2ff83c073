"""One-line errors for TorchX modules whose tx counterpart is a plugin that is not installed."""
from typing import NoReturn


def require(module: str, distribution: str, torchx_module: str) -> NoReturn:
    """Raise ModuleNotFoundError for ``torchx_module`` naming the distribution to install.

    Raises:
        ModuleNotFoundError: always.
    """
    raise ModuleNotFoundError(
        f"{torchx_module} is provided by {distribution} ({module}), which is not installed: "
        f"pip install {distribution}",
        name=module,
    )
