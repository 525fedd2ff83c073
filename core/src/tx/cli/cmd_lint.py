"""``tx lint FILE[:FUNCTION]``: check component functions."""
from __future__ import annotations

import argparse
import os
import sys

from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError

__all__ = ["COMMAND"]


def _lint(args: argparse.Namespace) -> int:
    # the linter is imported when the command runs, not when its parser is built
    from tx.components.system.file_linter import validate, validate_module

    path, _, fn = args.path.partition(":")
    if not os.path.isfile(path):
        raise CLIError(f"{path}: no such file", 2)
    if fn:
        results = {fn: validate(path, fn)}
    else:
        results = validate_module(path)
    bad = 0
    for name, messages in results.items():
        for m in messages:
            print(f"{path}:{m.line}:{m.char}: {m.severity}: {name}: {m.description}")
            bad += m.severity == "error"
    if not bad:
        print(f"{path}: {len(results)} component(s), no errors", file=sys.stderr)
    return 1 if bad else 0


#: ``tx lint``: check component functions in a Python file
COMMAND = Command(run=_lint, arguments=(
    Argument("path", metavar="FILE[:FUNCTION]", help="a Python file of component functions"),
))
