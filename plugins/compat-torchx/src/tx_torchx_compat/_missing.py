"""Shim modules whose tx counterpart lives in a plugin distribution."""
import importlib
from types import ModuleType
from typing import Any, Dict, NoReturn


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


def reexport(namespace: Dict[str, Any], module: str, distribution: str) -> ModuleType:
    """Copy the public names of ``module`` (a plugin's module) into ``namespace`` (a shim
    module's globals), as ``from module import *`` would; returns the module.

    Raises:
        ModuleNotFoundError: the plugin is not installed (the message names the
            distribution); an import error inside the plugin is raised as it is.
    """
    torchx_module = namespace["__name__"].replace("tx_torchx_compat.", "", 1)
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not (module == e.name or module.startswith(e.name + ".")):
            raise
        missing = True
    else:
        missing = False
    if missing:
        require(module.partition(".")[0], distribution, torchx_module)
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    namespace.update({n: getattr(mod, n) for n in names})
    return mod
