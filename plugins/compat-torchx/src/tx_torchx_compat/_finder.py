"""The import finder that makes ``torchx.*`` resolve to tx.

Installed at interpreter start by ``tx_torchx_compat.pth`` (site-packages), first on
``sys.meta_path``. It costs one string comparison per import of any other module, and
imports nothing until ``torchx`` is imported.

* ``import torchx``: every other finder on ``sys.meta_path`` is asked first; if one finds a
  ``torchx`` (a real TorchX, installed or editable), this finder steps aside and records
  where it is (:data:`real_torchx`). Otherwise ``torchx`` is tx-torchx-compat's shim package
  :mod:`tx_torchx_compat.torchx`.
* ``import torchx.X.Y``: only while ``sys.modules["torchx"]`` is the shim, the module
  ``tx_torchx_compat.torchx.X.Y`` is imported and put in ``sys.modules`` under both names
  (one module object: ``torchx.specs.AppDef is tx.specs.AppDef``). A module the shim does
  not have raises ModuleNotFoundError, as for any missing module.

No file of TorchX is shadowed or overwritten: nothing is installed under the name
``torchx``.
"""
import sys

SHIM = "tx_torchx_compat.torchx"

#: where a real TorchX was found (its ``__init__.py`` or package directories) when it won
#: over the shim in this process; None while it was not looked for or not found
real_torchx = None


class _AliasLoader:
    """Loads ``torchx.X`` by importing the shim module ``tx_torchx_compat.torchx.X`` and
    putting that same module object in ``sys.modules["torchx.X"]``."""

    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return None  # a placeholder; exec_module swaps in the shim module

    def exec_module(self, module):
        import importlib

        sys.modules[module.__name__] = importlib.import_module(self.target)

    def _target_loader(self):
        import importlib.util

        spec = importlib.util.find_spec(self.target)
        return spec.loader if spec is not None else None

    def get_code(self, fullname):
        """The code of the shim module (``runpy``: ``python -m torchx.cli.main`` runs it as
        ``__main__``)."""
        loader = self._target_loader()
        return loader.get_code(self.target) if loader is not None else None

    def get_source(self, fullname):
        """The source of the shim module (``inspect``, tracebacks)."""
        loader = self._target_loader()
        return loader.get_source(self.target) if loader is not None else None

    def is_package(self, fullname):
        """Whether the shim module is a package."""
        loader = self._target_loader()
        return bool(loader is not None and loader.is_package(self.target))


def _found_elsewhere(fullname):
    """The spec another finder of ``sys.meta_path`` gives ``fullname``, or None."""
    for finder in list(sys.meta_path):
        if isinstance(finder, TorchxFinder):
            continue
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec(fullname, None)
        except Exception:  # noqa: BLE001 - a broken finder is not a TorchX
            continue
        if spec is not None:
            return spec
    return None


class TorchxFinder:
    """A ``sys.meta_path`` finder for ``torchx`` and its submodules (see the module docs)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torchx" and not fullname.startswith("torchx."):
            return None
        global real_torchx
        if fullname == "torchx":
            spec = _found_elsewhere("torchx")
            if spec is not None:
                real_torchx = spec.origin or ", ".join(spec.submodule_search_locations or [])
                return None
        elif not getattr(sys.modules.get("torchx"), "__tx_compat__", False):
            return None
        import importlib.util

        target_name = SHIM + fullname[len("torchx"):]
        try:
            target_spec = importlib.util.find_spec(target_name)
        except ImportError:
            target_spec = None
        if target_spec is None:
            return None
        # origin: the shim's file (runpy sets sys.argv[0] to it for `python -m torchx.X`)
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(target_name), origin=target_spec.origin,
            is_package=target_spec.submodule_search_locations is not None,
        )


def install():
    """Put the finder first on ``sys.meta_path`` (once per interpreter)."""
    if not any(isinstance(f, TorchxFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchxFinder())


install()
