"""``torchx.specs.finder``: :mod:`tx.components.system.finder` at TorchX 0.7's path."""
from tx.specs.api import AppDef  # noqa: F401
from tx.components.system.file_linter import get_fn_docstring, validate  # noqa: F401
from tx.components.system.finder import *  # noqa: F401,F403
