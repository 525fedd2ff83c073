"""``torchx.specs.file_linter``: :mod:`tx.components.system.file_linter` at TorchX 0.7's path."""
import argparse

from tx.components.system.file_linter import *  # noqa: F401,F403


class TorchXArgumentHelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter,
                                  argparse.MetavarTypeHelpFormatter):
    """TorchX 0.7.0's help formatter of component arguments: the description as written,
    each argument's type as its metavar, and its help followed by ``(required)`` or
    ``(default: <value>)`` (``--help`` itself unchanged)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is argparse.SUPPRESS:
            return text
        return text + (" (required)" if action.required else f" (default: {action.default})")
