"""``tx sweep``: run one app over a parameter grid or random draws, as one sweep.

    tx sweep [-s SCHED] [--grid K=V1,V2]... [--random K=DIST(A,B)]... [--trials N] [--seed S]
             [--file SWEEP.yaml] [--max_parallel N] [--env K=V]... [--dryrun] [--wait]
             COMPONENT [ARGS...]          (${K} in ARGS stands for parameter K)
    tx sweep resume SWEEP_HANDLE         submit again the trials that failed or were cancelled
    tx sweep best SWEEP_HANDLE --metric NAME [--max]   the trials by the metric they recorded

The other verbs take a sweep handle too (``tx status``, ``tx describe``, ``tx cancel``,
``tx list``, completion), and a trial's, ``SWEEP/TRIAL`` (``tx status``, ``tx describe``,
``tx cancel``, ``tx log SWEEP/TRIAL[/ROLE[/REPLICAS]]``): the functions below are what they
call. The runner and the sweep code are imported when a command runs (see
:mod:`tx.cli._common`).
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from tx.cli._common import default_scheduler, make_runner
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError

if TYPE_CHECKING:
    from tx.runner import Runner

__all__ = ["COMMAND", "collapse_sweeps", "sweep_cancel", "sweep_describe", "sweep_log_identifier",
           "sweep_status"]

_APPDEF_EXTS = (".yaml", ".yml", ".json")


def trial_header(handle: str, index: int) -> Tuple[Optional[str], Dict[str, Any]]:
    """Trial ``index`` of sweep ``handle``: (its last attempt's app handle, None before it
    is submitted; what ``tx status SWEEP/TRIAL`` says of the trial, as JSON).

    Raises:
        tx.runner.sweep.UnknownSweepError: no such sweep recorded here, or no such trial.
    """
    # the sweep records: only for a sweep's handle (the runner is loaded by then)
    from tx.runner.sweep import trial, trial_handle

    rec, t = trial(handle, index)
    app = trial_handle(rec, t)
    return app, {"sweep_handle": handle, "trial": index, "params": t.params, "attempts": len(t.attempts),
                 "app_handle": app}


def _trial_text(head: Dict[str, Any]) -> str:
    # the sweep model: only for a sweep's trial
    from tx.specs.sweep import format_value

    params = " ".join(f"{k}={format_value(v)}" for k, v in head["params"].items())
    return (f"Trial: {head['trial']} of {head['sweep_handle']}\n  Params: {params}\n"
            f"  Attempts: {head['attempts']}\n  App: {head['app_handle'] or '-'}\n")


def sweep_status(runner: Runner, ref: Any, as_json: bool) -> Optional[Tuple[str, str, Dict[str, Any]]]:
    """``tx status SWEEP`` (``ref`` a :class:`tx.runner.handles.SweepRef`): print the trial
    table (or JSON) and return None. ``tx status SWEEP/TRIAL`` (a ``TrialRef``): a trial not
    submitted yet is printed here (None returned); a submitted one is returned as (its app
    handle, the text to print above its app's status, the trial as JSON) for ``tx status``
    to show as an app's. Raises UnknownSweepError: no such sweep or trial recorded here."""
    handle, index = _sweep_index(ref)
    if index is None:
        status = runner.sweep_status(handle)
        if as_json:
            print(json.dumps(status.to_json(), indent=2))
        else:
            sys.stdout.write(status.format())
        return None
    app, head = trial_header(handle, index)
    if app is not None:
        return app, _trial_text(head), head
    state = runner.sweep_status(handle).trials[index].state.name  # UNSUBMITTED, or CANCELLED
    if as_json:
        print(json.dumps({"trial": {**head, "state": state}, "status": None}, indent=2))
    else:
        sys.stdout.write(_trial_text(head) + f"  State: {state} (not submitted)\n")
    return None


def _sweep_index(ref: Any) -> Tuple[str, Optional[int]]:
    """(the sweep's handle, the trial's index or None) of a SweepRef or a TrialRef."""
    index = getattr(ref, "index", None)
    return (ref.sweep.handle if index is not None else ref.handle), index


def _sweep_handle(text: str) -> str:
    """``text``, a sweep's handle (:func:`tx.runner.handles.parse`).

    Raises:
        CLIError: another kind of handle (an app's, a run's, a trial's).
        MalformedAppHandleException: not a handle.
    """
    # the handles floor: only for a command given a handle (the runner is loaded by then)
    from tx.runner.handles import SweepRef, parse

    ref = parse(text)
    if not isinstance(ref, SweepRef):
        raise CLIError(f"{text!r} is not a sweep's handle ({{scheduler}}://{{session}}/sweep-NAME-XXXXXXXX)", 2)
    return ref.handle


def _indexes(indexes: List[int]) -> str:
    return ",".join(map(str, indexes))


def _cancelled(done: Any) -> List[str]:
    """What a :class:`tx.runner.sweep.SweepCancel` did, in words (empty: nothing)."""
    what = []
    if done.stopped:
        what.append(f"{len(done.stopped)} running trial(s): {_indexes(done.stopped)}")
    if done.unsubmitted:
        what.append(f"{len(done.unsubmitted)} not yet submitted: {_indexes(done.unsubmitted)}")
    return what


def sweep_cancel(runner: Runner, handle: str, wait: bool = True, timeout: float = 300.0) -> int:
    """``tx cancel SWEEP``: cancel every trial and say on stderr which (the running ones
    asked to stop, the pending ones not submitted), after they have ended unless not
    ``wait``; exit 0.

    Raises:
        CLIError: ``timeout`` seconds passed and a trial has not ended.
    """
    started = time.monotonic()
    done = runner.cancel_sweep(handle)
    what = _cancelled(done)
    if not what:
        state = runner.sweep_status(handle).state.name
        print(f"tx cancel: {handle} had already ended: {state} (no trial to cancel)", file=sys.stderr)
        return 0
    if not wait or not done.stopped:
        asked = "asked to stop" if done.stopped else "cancelled"
        print(f"tx cancel: {asked} {' and '.join(what)} of {handle} (`tx status {handle}` shows the trials)",
              file=sys.stderr)
        return 0
    while True:
        status = runner.sweep_status(handle)
        if all(status.trials[i].state.name in _ENDED for i in done.stopped):
            break
        if time.monotonic() - started > timeout:
            raise CLIError(f"asked {' and '.join(what)} of {handle} to stop, but some still run after "
                           f"{timeout:g} s; `tx status {handle}` shows when they have ended")
        time.sleep(0.5)
    took = time.monotonic() - started
    print(f"tx cancel: {handle} is {status.state.name}: cancelled {' and '.join(what)} (after {took:.1f} s)",
          file=sys.stderr)
    return 0


def sweep_describe(runner: Runner, ref: Any) -> Tuple[Optional[str], Any]:
    """``tx describe SWEEP`` (a SweepRef): (None, the sweep's definition, a dict from its
    record); ``tx describe SWEEP/TRIAL`` (a TrialRef): (the trial's last attempt's app
    handle, None before it is submitted; its AppDef, None where the scheduler no longer
    knows it). Raises UnknownSweepError: no such sweep or trial recorded here."""
    # the sweep records: only for a sweep's handle
    from tx.runner.sweep import describe_sweep, trial_appdef

    handle, index = _sweep_index(ref)
    if index is None:
        return None, describe_sweep(handle)
    app, _head = trial_header(handle, index)
    return app, trial_appdef(runner.engine, handle, index)


#: trial states after which nothing runs any more
_ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN", "UNSUBMITTED")


def sweep_log_identifier(ref: Any, tail: str) -> str:
    """``SWEEP/TRIAL[/ROLE[/REPLICAS]]`` (``ref`` the SweepRef or TrialRef, ``tail`` what
    follows it) -> the trial's last attempt's log identifier (``APP_HANDLE[/ROLE[/REPLICAS]]``).

    Raises:
        CLIError: no trial number, or the trial was not submitted yet.
        UnknownSweepError: no such sweep or trial recorded here.
    """
    handle, trial = _sweep_index(ref)
    if trial is None:
        raise CLIError(f"log of a sweep: name a trial, {handle}/TRIAL[/ROLE[/REPLICAS]] (see `tx status {handle}`)", 2)
    app, _head = trial_header(handle, trial)
    if app is None:
        raise CLIError(f"trial {trial} of {handle} has not been submitted yet")
    return f"{app}/{tail}" if tail else app


def collapse_sweeps(runner: Runner, scheduler: str, apps: List[Any]) -> List[Any]:
    """``tx list``: the apps of ``scheduler`` with each sweep's trials as one row."""
    # the sweep records: only when listing
    from tx.runner.sweep import collapse_listed, list_records

    records = list_records(scheduler, runner.name())
    return collapse_listed(apps, records) if records else apps


def _spec(args: argparse.Namespace) -> Any:
    """The SweepSpec and the sweep file's settings from the command line."""
    # the sweep model is imported when the command runs
    from tx.specs.sweep import SweepSpec, load_sweep_file, parse_grid, parse_random

    file = load_sweep_file(args.file) if args.file else None
    grid: Dict[str, Any] = dict(file.spec.grid) if file else {}
    rand: Dict[str, Any] = dict(file.spec.random) if file else {}
    for text in args.grid:
        k, v = parse_grid(text)
        grid[k] = v
    for text in args.random:
        k, d = parse_random(text)
        rand[k] = d
    trials = args.trials if args.trials is not None else (file.spec.trials if file else None)
    seed = args.seed if args.seed is not None else (file.spec.seed if file else 0)
    return SweepSpec(grid=grid, random=rand, trials=trials, seed=seed), file


def _env(texts: List[str]) -> Dict[str, str]:
    out = {}
    for text in texts:
        k, sep, v = text.partition("=")
        if not sep or not k:
            raise CLIError(f"--env {text!r}: expected NAME=VALUE", 2)
        out[k] = v
    return out


def next_steps(handle: str) -> str:
    """What ``tx sweep`` prints on stderr after the handle when it does not wait: the
    commands to follow the sweep (as ``tx run --detach`` does for an app)."""
    return (f"tx sweep: launched {handle}; to follow it:\n"
            f"  tx status {handle}\n"
            f"  tx log -f {handle}/TRIAL     (TRIAL: a trial's number, 0 first)\n"
            f"  tx cancel {handle}\n")


class _Interrupted:
    """While ``tx sweep --wait`` (or ``resume --wait``) runs, SIGINT and SIGTERM are noted
    (the handler only notes: the sweep's record lock may be held when one comes); the
    waiting loop then calls :meth:`check`, which cancels every trial, waits for them to end, says so
    in one line and exits 128+signal, as ``tx run`` does. Installed before the trials are
    submitted, so that no signal falls between submitting them and guarding them."""

    _NAMES = {2: "Ctrl-C", 15: "SIGTERM"}

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.handle: Optional[str] = None
        self.received: List[int] = []
        self._old: Dict[int, Any] = {}

    def __enter__(self) -> "_Interrupted":
        for s in (signal.SIGINT, signal.SIGTERM):
            self._old[s] = signal.signal(s, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.received.append(signum)

    def check(self) -> None:
        """If a signal came: cancel the sweep's trials and exit 128+signal, in one line."""
        if not self.received:
            return
        signum = self.received[0]
        why = self._NAMES.get(signum, f"signal {signum}")
        if self.handle is None:
            print(f"tx sweep: cancelled before the trials were submitted ({why})", file=sys.stderr, flush=True)
            sys.exit(128 + signum)
        done = self.runner.cancel_sweep(self.handle)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = self.runner.sweep_status(self.handle)
            if all(status.trials[i].state.name in _ENDED for i in done.stopped):
                break
            time.sleep(0.2)
        what = " and ".join(_cancelled(done)) or "no trial was running"
        print(f"tx sweep: cancelled {self.handle} ({why}): {what}; `tx status {self.handle}` shows the trials, "
              f"`tx sweep resume {self.handle}` reruns them", file=sys.stderr, flush=True)
        sys.exit(128 + signum)

    def __exit__(self, *exc: Any) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


def _wait(runner: Runner, handle: str, guard: Optional[_Interrupted] = None) -> int:
    """Wait until every trial is terminal; print the table; 0 if all succeeded. With
    ``guard``, a signal cancels the trials (:meth:`_Interrupted.check`)."""
    while True:
        if guard is not None:
            guard.check()
        status = runner.sweep_status(handle)
        if all(t.state.name in ("SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN") for t in status.trials):
            sys.stdout.write(status.format())
            return 0 if status.state.name == "SUCCEEDED" else 1
        for _ in range(5):  # a signal is acted on within 0.2 s
            if guard is not None and guard.received:
                break
            time.sleep(0.2)


def _resume(runner: Runner, rest: List[str], wait: bool) -> int:
    wait = wait or "--wait" in rest
    rest = [r for r in rest if r != "--wait"]
    if len(rest) != 1 or rest[0].startswith("-"):
        raise CLIError("usage: tx sweep resume [--wait] SWEEP_HANDLE", 2)
    handle = _sweep_handle(rest[0])
    if not wait:
        resumed = runner.resume_sweep(handle)
        print(f"{handle}: resumed {len(resumed)} trial(s){': ' + ','.join(map(str, resumed)) if resumed else ''}")
        return 0
    with _Interrupted(runner) as guard:
        resumed = runner.resume_sweep(handle)
        guard.handle = handle
        print(f"{handle}: resumed {len(resumed)} trial(s){': ' + ','.join(map(str, resumed)) if resumed else ''}",
              flush=True)
        return _wait(runner, handle, guard) if resumed else 0


def _best(runner: Runner, rest: List[str]) -> int:
    """``tx sweep best SWEEP --metric NAME [--max|--min] [-n N] [--json]``."""
    # the sweep code: only when `tx sweep best` runs
    from tx.cli.command import ArgumentParser
    from tx.runner.sweep import best_trials
    from tx.specs.sweep import format_value

    p = ArgumentParser(prog="tx sweep best", description="the trials of a sweep by a metric they recorded")
    p.add_argument("sweep_handle", metavar="SWEEP_HANDLE")
    p.add_argument("--metric", required=True, help="the metadata key the trials recorded (a number)")
    order = p.add_mutually_exclusive_group()
    order.add_argument("--max", dest="maximize", action="store_true", help="higher is better")
    order.add_argument("--min", dest="maximize", action="store_false", help="lower is better (the default)")
    p.add_argument("-n", type=_positive, default=1, help="show the best N trials (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON lines")
    a = p.parse_args(rest)
    for m in best_trials(runner.engine, _sweep_handle(a.sweep_handle), a.metric, a.maximize)[:a.n]:
        if a.json:
            print(json.dumps({"trial": m.index, "params": m.params, a.metric: m.value, "app_handle": m.app_handle}))
        else:
            params = " ".join(f"{k}={format_value(v)}" for k, v in m.params.items())
            print(f"{m.index}  {params}  {a.metric}={format_value(m.value)}  {m.app_handle}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    rest: List[str] = list(args.component_and_args)
    if rest and rest[0] == "--":
        rest = rest[1:]
    with make_runner(with_component_defaults=True) as runner:
        if rest and rest[0] == "resume":
            return _resume(runner, rest[1:], args.wait)
        if rest and rest[0] == "best":
            return _best(runner, rest[1:])
        spec, file = _spec(args)
        if rest:
            component, comp_args = rest[0], rest[1:]
        elif file is not None and file.component:
            component, comp_args = file.component, list(file.args or [])
        else:
            raise CLIError("missing component: `tx sweep [--grid K=V1,V2] COMPONENT [ARGS]` "
                           "(or `component:` in the sweep file)", 2)
        env = {**(dict(file.env) if file else {}), **_env(args.env)}
        max_parallel = args.max_parallel if args.max_parallel is not None else (file.max_parallel if file else None)
        name = args.name or (file.name if file else None)
        scheduler = args.scheduler or default_scheduler(runner)
        cfg = _parse_cfg(runner, scheduler, args.cfg)
        app_or_component: Any = component
        if component.endswith(_APPDEF_EXTS) and ":" not in component:
            if comp_args:
                raise CLIError(f"an AppDef file takes no arguments, got {' '.join(comp_args)}", 2)
            # the AppDef file reader (yaml) is imported only for an AppDef file
            from tx.specs.files import load_appdef

            app_or_component = load_appdef(component)
        info = runner.dryrun_sweep(app_or_component, spec, scheduler, comp_args, cfg, max_parallel, env, name)
        if args.dryrun:
            sys.stdout.write(str(info))
            return 0
        if not args.wait:
            handle = runner.schedule_sweep(info)
            print(handle, flush=True)
            sys.stderr.write(next_steps(handle))
            return 0
        with _Interrupted(runner) as guard:
            handle = guard.handle = runner.schedule_sweep(info)
            print(handle, flush=True)
            return _wait(runner, handle, guard)


def _parse_cfg(runner: Runner, scheduler: str, texts: List[str]) -> Dict[str, Any]:
    # the same parsing as `tx run -cfg`
    from tx.cli.cmd_run import _parse_cfg as parse

    return parse(runner, scheduler, texts)


def _app_name(text: str) -> str:
    # the same check as `tx run --name`
    from tx.cli.cmd_run import _app_name as check

    return check(text)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return int(text)


def _int(text: str) -> Optional[int]:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


#: ``tx sweep``: run a component over a parameter set as one sweep
COMMAND = Command(run=_sweep, arguments=(
    Argument("-s", "--scheduler", default=None, help="the scheduler (default: as for `tx run`)"),
    Argument("-cfg", "--scheduler_args", "--cfg", dest="cfg", action="append", default=[],
             help="run options, as for `tx run` (key=value,key=value)"),
    Argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
             help="a grid parameter and its values (repeat: the trials are the product)"),
    Argument("--random", action="append", default=[], metavar="NAME=DIST(A,B)",
             help="a random parameter: uniform(a,b), loguniform(a,b), randint(a,b) or choice(v1,v2,...)"),
    Argument("--trials", type=_positive, default=None, help="random draws (per grid point with --grid)"),
    Argument("--seed", type=_int, default=None, help="the random seed (default 0)"),
    Argument("--file", "-f", default=None, metavar="SWEEP_FILE",
             help="a YAML or JSON sweep file (docs/sweeps.md); the command line adds to it and wins"),
    Argument("--max_parallel", "--max-parallel", dest="max_parallel", type=_positive, default=None,
             help="the most trials running at once (default: no bound)"),
    Argument("--env", "-e", action="append", default=[], metavar="NAME=VALUE",
             help="env for every role of every trial; ${NAME} of a parameter is substituted"),
    Argument("--name", default=None, type=_app_name,
             help="the sweep's name, and its trials' app name (default: the component's); "
                  "as `tx run --name`"),
    Argument("--dryrun", action="store_true", help="print the request(s) and the trial table; submit nothing"),
    Argument("--wait", action="store_true", help="wait for every trial to end and print the trial table"),
    Argument("component_and_args", nargs=argparse.REMAINDER, metavar="COMPONENT [ARGS...] | resume SWEEP | best SWEEP",
             help="the component (or AppDef file) and its arguments, ${NAME} standing for a parameter; "
                  "or `resume SWEEP_HANDLE`; or `best SWEEP_HANDLE --metric NAME [--max]`"),
))
