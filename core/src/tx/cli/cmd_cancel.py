"""``tx cancel APP_HANDLE``: cancel an app, wait until it has ended (``--no-wait``: only
ask), and say so on stderr. A sweep handle cancels every trial (and says which);
``SWEEP/TRIAL`` one trial (its last attempt, or, not submitted yet, takes it off the
pending ones)."""
from __future__ import annotations

import argparse
import sys
import time

from tx.cli._common import make_runner
from tx.cli.cmd_sweep import sweep_cancel
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError, unknown_app

__all__ = ["COMMAND"]


def _cancel(args: argparse.Namespace) -> int:
    handle = args.app_handle
    with make_runner() as runner:
        # the handles floor (the runner is loaded by now): the kind follows from the syntax
        from tx.runner.handles import SweepRef, TrialRef, parse

        ref = parse(handle)
        if isinstance(ref, SweepRef):  # no such sweep recorded here: UnknownSweepError
            return sweep_cancel(runner, ref.handle, wait=not args.no_wait, timeout=args.timeout)
        if isinstance(ref, TrialRef):
            # the sweep record: only for a sweep's trial
            from tx.runner.sweep import cancel_trial

            sweep, trial = ref.sweep.handle, ref.index
            app = cancel_trial(sweep, trial)
            if app is None:
                print(f"tx cancel: trial {trial} of {sweep} was not submitted yet: it will not be "
                      f"(`tx sweep resume {sweep}` submits it)", file=sys.stderr)
                return 0
            handle = app  # the trial's last attempt, cancelled as any app
        status = runner.status(handle)  # of a run with no record here: UnknownRunError
        if status is None:
            raise unknown_app(handle, runner)
        if status.is_terminal():
            print(f"tx cancel: {handle} had already ended: {status.state.name}", file=sys.stderr)
            return 0
        started = time.monotonic()
        runner.cancel(handle)
        if args.no_wait:
            print(f"tx cancel: asked {handle} to stop (`tx status {handle}` shows when it has)", file=sys.stderr)
            return 0
        status = runner.wait(handle, wait_interval=0.5, timeout=args.timeout)
        if status is None:
            print(f"tx cancel: cancelled {handle} (its scheduler no longer knows it)", file=sys.stderr)
            return 0
        if not status.is_terminal():
            raise CLIError(f"asked {handle} to stop, but it is still {status.state.name} after "
                           f"{args.timeout:g} s; `tx status {handle}` shows when it has ended")
        took = time.monotonic() - started
        print(f"tx cancel: {handle} is {status.state.name} (after {took:.1f} s)", file=sys.stderr)
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


#: ``tx cancel``: cancel an app
COMMAND = Command(run=_cancel, arguments=(
    Argument("app_handle", metavar="APP_HANDLE", help="scheduler://session/app_id, a run's handle, a sweep handle (cancels every trial), "
                  "or SWEEP_HANDLE/TRIAL"),
    Argument("--no-wait", "--no_wait", dest="no_wait", action="store_true",
             help="return once the scheduler was asked to cancel, without waiting until the app has ended"),
    Argument("--timeout", type=_seconds, default=300.0,
             help="wait at most this many seconds for the app to end (default: 300)"),
))
