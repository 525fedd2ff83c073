"""``tx status APP_HANDLE``: an app's state, replicas, why it waits or failed."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("app_handle", metavar="APP_HANDLE", help="scheduler://session/app_id")
    p.add_argument("--roles", default="", help="only these roles (comma separated)")
    p.add_argument("--json", action="store_true", help="print the status as JSON")


def _unknown(handle: str) -> Any:
    from tx.cli.errors import CLIError

    return CLIError(f"app {handle} does not exist (or its scheduler no longer keeps it)")


def run(args: argparse.Namespace) -> int:
    from tx.cli._common import make_runner

    with make_runner() as runner:
        return _status(runner, args)


def _status(runner: Any, args: argparse.Namespace) -> int:
    status = runner.status(args.app_handle)
    if status is None:
        raise _unknown(args.app_handle)
    roles = [r for r in args.roles.split(",") if r] or None
    if args.json:
        print(json.dumps(status.to_json(roles), indent=2))
    else:
        sys.stdout.write(status.format(roles))
    return 0


class StatusCommand:
    """``tx status``: show an app's status."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        return run(args)
