"""``tx lint FILE[:FUNCTION]``: check component functions."""
from __future__ import annotations

import argparse
import os
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="FILE[:FUNCTION]", help="a Python file of component functions")


def run(args: argparse.Namespace) -> int:
    return _lint(args)


def _lint(args: argparse.Namespace) -> int:
    from tx.cli.errors import CLIError
    from tx.specs import file_linter

    path, _, fn = args.path.partition(":")
    if not os.path.isfile(path):
        raise CLIError(f"{path}: no such file", 2)
    if fn:
        results = {fn: file_linter.validate(path, fn)}
    else:
        results = file_linter.validate_module(path)
    bad = 0
    for name, messages in results.items():
        for m in messages:
            print(f"{path}:{m.line}:{m.char}: {m.severity}: {name}: {m.description}")
            bad += m.severity == "error"
    if not bad:
        print(f"{path}: {len(results)} component(s), no errors", file=sys.stderr)
    return 1 if bad else 0


class LintCommand:
    """``tx lint``: check component functions in a Python file."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        return run(args)
