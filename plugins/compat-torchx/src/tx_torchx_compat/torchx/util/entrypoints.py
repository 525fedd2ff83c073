"""``torchx.util.entrypoints``: load entry points by group, as TorchX plugins do."""
from typing import Any, Dict, Optional


def _group(group: str) -> Any:
    from importlib.metadata import entry_points

    eps = entry_points()
    return eps.select(group=group) if hasattr(eps, "select") else eps.get(group, [])


def load(group: str, name: str, default: Any = None) -> Any:
    """The object entry point ``name`` of ``group`` names, loaded; ``default`` when there
    is no such entry point.

    Raises:
        KeyError: no such entry point and no ``default``.
    """
    for ep in _group(group):
        if ep.name == name:
            return ep.load()
    if default is None:
        raise KeyError(f"no entry point {name!r} in group {group!r}")
    return default


def load_group(group: str, default: Optional[Dict[str, Any]] = None, skip_defaults: bool = False) -> Optional[Dict[str, Any]]:
    """``{name: loader}`` for the entry points of ``group`` (each value a zero-argument
    function that loads the object, as TorchX returns them), or ``default`` when the group
    is empty. With ``skip_defaults``, entries named like keys of ``default`` are left out.
    """
    out: Dict[str, Any] = {}
    for ep in _group(group):
        if skip_defaults and default is not None and ep.name in default:
            continue
        out[ep.name] = ep.load
    return out or default
