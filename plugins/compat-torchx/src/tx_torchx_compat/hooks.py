"""tx plugin hooks of tx-torchx-compat (entry point ``torchx_compat`` in group ``tx``).

Registers what other distributions declare in TorchX's entry-point groups, so TorchX
plugins run under tx unchanged:

==========================  ==================================================================
TorchX group                registered as (tx registry kind)
==========================  ==================================================================
``torchx.schedulers``       schedulers; the factory is wrapped by
                            :mod:`tx_torchx_compat.adapter` (tx's replica environment contract)
``torchx.named_resources``  named resources
``torchx.components``       component namespaces (an alias starting with ``_`` keeps its name
                            without the underscore: tx's top level belongs to tx's built-ins)
``torchx.tracker``          trackers
==========================  ==================================================================

Each registration's description says which distribution declared it; ``tx plugins`` shows
it. Where a real TorchX is installed, it owns ``import torchx`` and these groups: nothing is
registered and tx says so once (:func:`_note_real_torchx`).
"""
from typing import Callable, Iterator, Optional, Tuple

from tx import hookimpl

#: TorchX's entry-point group -> tx registry kind
GROUPS = {
    "torchx.schedulers": "schedulers",
    "torchx.named_resources": "named_resources",
    "torchx.components": "components",
    "torchx.tracker": "trackers",
}


def real_torchx() -> Optional[str]:
    """Where a real TorchX is importable from (its ``__init__.py``), or None."""
    from tx_torchx_compat._finder import _found_elsewhere

    spec = _found_elsewhere("torchx")
    if spec is None:
        return None
    return spec.origin or ", ".join(spec.submodule_search_locations or [])


def torchx_entry_points(group: str) -> Iterator[Tuple[str, str, str, str]]:
    """``(name, value, distribution, version)`` of each entry point in ``group``
    (:func:`tx.plugins.entry_points`: the distributions' metadata read once for every group,
    not importlib.metadata's ~30 ms per group after its ~70 ms import)."""
    from tx.plugins import entry_points

    yield from entry_points(group)


def _note_real_torchx(where: str) -> None:
    """Say once per TorchX installation (a marker in tx's cache directory) that a real
    TorchX wins over tx-torchx-compat."""
    import hashlib
    import os
    import sys

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    marker = os.path.join(base, "tx", "torchx-compat-" + hashlib.sha1(where.encode()).hexdigest()[:12])
    if os.path.exists(marker):
        return
    print(
        f"tx: a real TorchX is installed ({where}): `import torchx` gets it, and tx-torchx-compat "
        "leaves TorchX's entry-point groups to it (uninstall torchx to run TorchX projects on tx)",
        file=sys.stderr,
    )
    try:
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        open(marker, "w").close()
    except OSError:
        pass


def _register_group(group: str, register: Callable[..., None]) -> None:
    where = real_torchx()
    if where is not None:
        if group == "torchx.schedulers":  # once per registry build, not per group
            _note_real_torchx(where)
        return
    for name, value, dist, version in torchx_entry_points(group):
        target = value.split("[", 1)[0].strip()  # drop extras: "pkg.mod:fn [extra]"
        description = f"{dist} {version}, TorchX entry point {group}"
        if group == "torchx.schedulers":
            register(name, f"tx_torchx_compat.adapter:{name}", description=description,
                     install=f"pip install {dist}")
        elif group == "torchx.components":
            register(name.lstrip("_") or dist, target, description=description)
        else:
            register(name, target, description=description, install=f"pip install {dist}")


@hookimpl
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Schedulers of the ``torchx.schedulers`` group (factories wrapped by the adapter)."""
    _register_group("torchx.schedulers", register)


@hookimpl
def tx_register_named_resources(register: Callable[..., None]) -> None:
    """Named resources of the ``torchx.named_resources`` group."""
    _register_group("torchx.named_resources", register)


@hookimpl
def tx_register_components(register: Callable[..., None]) -> None:
    """Component namespaces of the ``torchx.components`` group."""
    _register_group("torchx.components", register)


@hookimpl
def tx_register_trackers(register: Callable[..., None]) -> None:
    """Trackers of the ``torchx.tracker`` group."""
    _register_group("torchx.tracker", register)
