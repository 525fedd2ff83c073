"""``torchx.specs.file_linter``: :mod:`tx.components.system.file_linter` at TorchX 0.7's path."""
from tx.components.system.file_linter import *  # noqa: F401,F403
