"""``torchx.specs.file_linter``: :mod:`tx.specs.file_linter` at TorchX 0.7's path."""
from tx.specs.file_linter import *  # noqa: F401,F403
