"""``torchx.util.shlex``: ``join``, the shell-quoted command line of a list of arguments
(:func:`shlex.join`)."""
from shlex import join, quote

__all__ = ["join", "quote"]
