"""``torchx.cli.colors``: ANSI colours of TorchX's CLI output, empty strings unless stdout
is a terminal."""
import sys

__all__ = ["BLUE", "ENDC", "GRAY", "GREEN", "ORANGE"]

if sys.stdout is not None and not sys.stdout.closed and sys.stdout.isatty():
    GREEN = "\033[32m"
    BLUE = "\033[34m"
    ORANGE = "\033[38:2:238:76:44m"
    GRAY = "\033[2m"
    ENDC = "\033[0m"
else:
    GREEN = BLUE = ORANGE = GRAY = ENDC = ""
