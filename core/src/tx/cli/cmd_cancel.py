"""``tx cancel APP_HANDLE``."""
from __future__ import annotations

import argparse
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("app_handle", metavar="APP_HANDLE", help="scheduler://session/app_id")


def _unknown(handle: str) -> Any:
    from tx.cli.errors import CLIError

    return CLIError(f"app {handle} does not exist (or its scheduler no longer keeps it)")


def run(args: argparse.Namespace) -> int:
    from tx.cli._common import make_runner

    with make_runner() as runner:
        return _cancel(runner, args)


def _cancel(runner: Any, args: argparse.Namespace) -> int:
    if runner.status(args.app_handle) is None:
        raise _unknown(args.app_handle)
    runner.cancel(args.app_handle)
    return 0


class CancelCommand:
    """``tx cancel``: cancel an app."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        return run(args)
