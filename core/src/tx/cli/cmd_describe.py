"""``tx describe APP_HANDLE``: an app's AppDef, as YAML or JSON; of a sweep handle, the
sweep (its app, options and trials, from its record); of ``SWEEP/TRIAL``, the trial's
AppDef (its last attempt's, or the one it will be submitted with)."""
from __future__ import annotations

import argparse
import json
import sys

from tx.cli._common import make_runner
from tx.cli.cmd_sweep import sweep_describe
from tx.cli.command import Argument, Command
from tx.cli.errors import unknown_app

__all__ = ["COMMAND"]


def _describe(args: argparse.Namespace) -> int:
    with make_runner() as runner:
        handle = args.app_handle
        # the handles floor (the runner is loaded by now): the kind follows from the syntax
        from tx.runner.handles import SweepRef, TrialRef, parse

        ref = parse(handle)
        if isinstance(ref, (SweepRef, TrialRef)):  # no such sweep or trial: UnknownSweepError
            trial_app, app = sweep_describe(runner, ref)
            if trial_app is None and isinstance(app, dict):  # the sweep itself: its record
                if args.json:
                    print(json.dumps(app, indent=2))
                else:
                    import yaml  # serialization is imported when the command runs

                    sys.stdout.write(yaml.safe_dump(app, sort_keys=False, default_flow_style=None))
                return 0
            handle = trial_app or handle
        else:
            app = runner.describe(handle)  # of a run with no record here: UnknownRunError
        if app is None:
            raise unknown_app(handle, runner)
        # serialization (yaml) is imported when the command runs, not when its parser is built
        from tx.specs.files import appdef_to_json, appdef_to_yaml

        sys.stdout.write(appdef_to_json(app) + "\n" if args.json else appdef_to_yaml(app))
    return 0


#: ``tx describe``: show an app's definition
COMMAND = Command(run=_describe, arguments=(
    Argument("app_handle", metavar="APP_HANDLE",
             help="scheduler://session/app_id, a run's handle, a sweep handle, or SWEEP_HANDLE/TRIAL"),
    Argument("--json", action="store_true", help="print JSON instead of YAML"),
))
