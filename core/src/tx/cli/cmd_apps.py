"""``tx status``, ``tx describe``, ``tx list`` and ``tx cancel``."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    if name == "list":
        p.add_argument("-s", "--scheduler", default=None,
                       help="scheduler whose apps to list (default: as for `tx run`)")
        p.add_argument("--json", action="store_true", help="print JSON lines")
        return
    p.add_argument("app_handle", metavar="APP_HANDLE", help="scheduler://session/app_id")
    if name == "status":
        p.add_argument("--roles", default="", help="only these roles (comma separated)")
        p.add_argument("--json", action="store_true", help="print the status as JSON")
    if name == "describe":
        p.add_argument("--json", action="store_true", help="print JSON instead of YAML")


def _unknown(handle: str) -> Any:
    from tx.cli.main import CLIError

    return CLIError(f"app {handle} does not exist (or its scheduler no longer keeps it)")


def run(args: argparse.Namespace) -> int:
    from tx.cli._common import make_runner

    with make_runner() as runner:
        return int(globals()[f"_{args.command}"](runner, args) or 0)


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


def _describe(runner: Any, args: argparse.Namespace) -> int:
    app = runner.describe(args.app_handle)
    if app is None:
        raise _unknown(args.app_handle)
    from tx.specs.files import appdef_to_json, appdef_to_yaml

    sys.stdout.write(appdef_to_json(app) + "\n" if args.json else appdef_to_yaml(app))
    return 0


def _list(runner: Any, args: argparse.Namespace) -> int:
    from tx.cli._common import default_scheduler

    scheduler = args.scheduler or default_scheduler(runner)
    apps = runner.list(scheduler)
    if args.json:
        for a in apps:
            print(json.dumps({"app_handle": a.app_handle, "state": str(a.state), "name": a.name}))
        return 0
    from tabulate import tabulate

    rows = [(a.app_handle, str(a.state), a.name) for a in apps]
    print(tabulate(rows, headers=["APP HANDLE", "APP STATUS", "APP NAME"]))
    return 0


def _cancel(runner: Any, args: argparse.Namespace) -> int:
    if runner.status(args.app_handle) is None:
        raise _unknown(args.app_handle)
    runner.cancel(args.app_handle)
    return 0
