"""``tx describe APP_HANDLE``: an app's AppDef, as YAML or JSON."""
from __future__ import annotations

import argparse
import sys
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("app_handle", metavar="APP_HANDLE", help="scheduler://session/app_id")
    p.add_argument("--json", action="store_true", help="print JSON instead of YAML")


def _unknown(handle: str) -> Any:
    from tx.cli.errors import CLIError

    return CLIError(f"app {handle} does not exist (or its scheduler no longer keeps it)")


def run(args: argparse.Namespace) -> int:
    from tx.cli._common import make_runner

    with make_runner() as runner:
        return _describe(runner, args)


def _describe(runner: Any, args: argparse.Namespace) -> int:
    app = runner.describe(args.app_handle)
    if app is None:
        raise _unknown(args.app_handle)
    from tx.specs.files import appdef_to_json, appdef_to_yaml

    sys.stdout.write(appdef_to_json(app) + "\n" if args.json else appdef_to_yaml(app))
    return 0


class DescribeCommand:
    """``tx describe``: show an app's definition."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        return run(args)
