"""The component system: how a component (a Python function returning an
:class:`~tx.specs.AppDef`) is found, checked and called with command-line arguments.

* :mod:`~tx.components.system.finder`: find components by name (built-ins, plugins'
  namespaces, ``path/to/file.py:fn``, ``module:fn``);
* :mod:`~tx.components.system.builders`: turn a component function's signature into an
  argument parser and call it (``materialize_appdef``);
* :mod:`~tx.components.system.file_linter`: the rules a component function follows,
  checked without running it;
* :mod:`~tx.components.system.decode`: argument values from text, by type annotation;
* :mod:`~tx.components.system.errors`: the errors all of them raise (one line each).

TorchX has these under ``torchx.specs`` (``torchx.specs.finder`` ...); tx-torchx-compat
keeps those paths. This package is not a component namespace: the finder skips it when it
walks :mod:`tx.components`.
"""

__all__ = []
