"""``torchx.util.entrypoints``: load entry points by group, as TorchX 0.7.0 documents it
(``load`` and ``load_group``); the entry points are read with :mod:`importlib.metadata`
(``metadata`` here, as in TorchX)."""
from importlib import metadata
from typing import Any, Callable, Dict, Optional

__all__ = ["load", "load_group", "metadata"]


def _group(group: str) -> Any:
    eps = metadata.entry_points()
    return eps.select(group=group) if hasattr(eps, "select") else eps.get(group, [])


def load(group: str, name: str, default: Any = None) -> Any:
    """The object entry point ``name`` of ``group`` names, loaded; ``default`` when there
    is no such entry point and a default is given.

    Raises:
        KeyError: no such entry point and no ``default`` (the message names both).
    """
    for ep in _group(group):
        if ep.name == name:
            return ep.load()
    if default is None:
        raise KeyError(f"no entry point {name!r} in group {group!r}")
    return default


def _deferred(ep: Any) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        obj = ep.load()
        if ep.attr is None:  # a module: the arguments are ignored
            return obj
        return obj(*args, **kwargs)

    return run


def load_group(group: str, default: Optional[Dict[str, Any]] = None) -> Optional[Dict[str, Any]]:
    """``{name: deferred}`` for the entry points of ``group``, or ``default`` when the
    group has none. ``deferred(*args, **kwargs)`` loads the entry point then, and calls the
    loaded function with the arguments (``load_group("g")["f"]("x")`` is ``f("x")``); an
    entry point naming a module returns the module and ignores the arguments."""
    out: Dict[str, Any] = {ep.name: _deferred(ep) for ep in _group(group)}
    return out if out else default
