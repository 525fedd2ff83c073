"""``tx run``: run a component (``dist.ddp``, ``path/file.py:fn``) or an AppDef file.

Prints the app handle on stdout. On local schedulers it waits and relays every replica's
log lines, prefixed ``role/replica``: their stdout to tx's stdout, their stderr to tx's
stderr (``tx run ... | grep accuracy`` sees what the job prints); tx's own messages go to
stderr. On a terminal a live line shows the app's state, the time since launch and why it
waits, while it is pending or quiet. ``--detach`` returns once the app is launched and
prints the commands to follow it. Elsewhere ``--wait`` waits and ``--log`` relays logs
while waiting. Exits 1 when a waited-for app does not succeed; after an app of several
roles a table gives each role's replicas, state, duration and exit codes. SIGTERM or
SIGINT (Ctrl-C) while waiting cancels the app (nothing is left running), says so in one
line and exits 128+signal; the replicas' output from then on stays in their logs.
``--on_interrupt detach`` leaves the app running instead (exit 0). ``--name NAME``, before
the component, is the app's name (``tx list``'s NAME, the scheduler's job name), whatever the
component or AppDef file calls it. ``--fallback
SCHED[,SCHED...]`` (``[tx] fallback``) makes it a run with failover: the handle printed is
the run's, and ``--pending_timeout`` (``[tx] pending_timeout``) bounds how long it may stay
pending on each scheduler (docs/recovery.md).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from tx.cli._common import config_default, default_scheduler, is_local, make_runner
from tx.cli._format import format_duration, table
from tx.cli._relay import Relay
from tx.cli.cmd_gc import auto_gc
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError

if TYPE_CHECKING:
    from tx.runner import Runner
    from tx.specs.api import AppDef, AppDryRunInfo, AppStatus

__all__ = ["COMMAND", "RELAY_STDOUT", "UNKNOWN_CFG_KEYS", "format_duration", "next_steps", "roles_table", "run",
           "summary"]

_APPDEF_EXTS = (".yaml", ".yml", ".json")


def _split_component(args: argparse.Namespace) -> Tuple[str, List[str]]:
    rest: List[str] = list(args.component_and_args)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if not rest or rest[0].startswith("-"):
        default = config_default("run", "component")
        if default:
            return default, rest
        raise CLIError("missing component name: `tx run COMPONENT [ARGS]` (see `tx builtins`)", 2)
    return rest[0], rest[1:]


#: what ``-cfg`` does with a key that is not a run option of the scheduler, by default: ``"error"``
#: (tx). :func:`run`'s ``unknown_cfg_keys`` argument says otherwise (``"warn"``: the ``torchx``
#: command of tx-torchx-compat, as TorchX 0.7 drops such keys). Read, never set: a constant.
UNKNOWN_CFG_KEYS = "error"

#: where ``tx run`` relays its replicas' stdout, by default: ``"stdout"`` (tx: ``| grep`` sees the
#: job's output). :func:`run`'s ``relay_stdout`` argument says otherwise (``"stderr"``: the
#: ``torchx`` command of tx-torchx-compat, as TorchX 0.7 relays every log line to stderr and
#: keeps stdout for the handle). Read, never set: a constant.
RELAY_STDOUT = "stdout"


def _warn_unknown_keys(opts: Any, scheduler: str, text: str) -> None:
    from tx.specs.runopts import to_dict  # see _parse_cfg

    try:
        keys = list(to_dict(text))
    except ValueError:
        return  # cfg_from_str reports the malformed text
    for key in keys:
        if key not in opts:
            print(f"torchx run: warning: -cfg {key} is not a run option of {scheduler}{opts.suggest(key)}; "
                  f"ignored, as TorchX does (see `torchx runopts {scheduler}`)", file=sys.stderr)


def _parse_cfg(runner: Runner, scheduler: str, texts: List[str], unknown_keys: str = UNKNOWN_CFG_KEYS) -> Dict[str, Any]:
    """The options of the ``-cfg`` texts; ``.txconfig`` and ``TX_*`` are merged in by the
    Runner, with :func:`tx.runner.options.merge` (the same for the Python API)."""
    # the runner's options floor is imported when the command runs, not when its parser is built
    from tx.runner.options import parse_texts

    opts = runner.scheduler_run_opts(scheduler)
    if unknown_keys == "warn":
        for text in texts:
            _warn_unknown_keys(opts, scheduler, text)
    return parse_texts(scheduler, opts, texts, strict=unknown_keys != "warn")


def _load_app(runner: Runner, component: str, comp_args: List[str]) -> AppDef:
    if component.endswith(_APPDEF_EXTS) and ":" not in component:
        if comp_args:
            raise CLIError(f"an AppDef file takes no arguments, got {' '.join(comp_args)}", 2)
        # the AppDef file reader (yaml) is imported only for an AppDef file
        from tx.specs.files import load_appdef

        return load_appdef(component)
    own = comp_args[:comp_args.index("--")] if "--" in comp_args else comp_args
    if "--help" in own:
        _component_help(runner, component, comp_args)
    return runner.component_app(component, comp_args)


def _component_help(runner: Runner, component: str, comp_args: List[str]) -> None:
    """Print ``tx run COMPONENT --help`` as plain text (docstrings are reStructuredText)."""
    from tx.cli._text import plain  # its regexes cost ~0.6 ms to compile: only for --help

    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            runner.component_app(component, comp_args)
    finally:
        sys.stdout.write(plain(buf.getvalue()))
        sys.stdout.flush()


def run(args: argparse.Namespace, *, unknown_cfg_keys: str = UNKNOWN_CFG_KEYS,
        relay_stdout: str = RELAY_STDOUT, unsupported_mounts: str = "error") -> int:
    """Run ``tx run`` on its parsed arguments ``args``; returns the exit code. The keyword
    arguments are how a command built on it (the ``torchx`` command of tx-torchx-compat)
    changes its behaviour, for this call only:

    Args:
        unknown_cfg_keys: a ``-cfg`` key that is not a run option of the scheduler is an
            ``"error"`` (tx), or ``"warn"``: a warning names it and the key is dropped.
        relay_stdout: the replicas' stdout is relayed to tx's ``"stdout"`` (tx) or ``"stderr"``.
        unsupported_mounts: roles' mounts the scheduler would run without
            (``Scheduler.ignored_mounts``) are an ``"error"`` (the scheduler's, tx), or
            ``"warn"``: one line on stderr names them and they are dropped (TorchX ignores them).

    Raises:
        ValueError: another value of ``unknown_cfg_keys``, ``relay_stdout`` or ``unsupported_mounts``.
        tx.errors.UserError: what ``tx run`` reports as one line.
    """
    if unknown_cfg_keys not in ("error", "warn"):
        raise ValueError(f"unknown_cfg_keys must be 'error' or 'warn', got {unknown_cfg_keys!r}")
    if relay_stdout not in ("stdout", "stderr"):
        raise ValueError(f"relay_stdout must be 'stdout' or 'stderr', got {relay_stdout!r}")
    if unsupported_mounts not in ("error", "warn"):
        raise ValueError(f"unsupported_mounts must be 'error' or 'warn', got {unsupported_mounts!r}")
    component, comp_args = _split_component(args)
    with make_runner(with_component_defaults=True) as runner:
        if unsupported_mounts == "warn":
            runner.engine.drop_unsupported_mounts = "torchx run"
        scheduler = args.scheduler or default_scheduler(runner)
        cfg = _parse_cfg(runner, scheduler, args.cfg, unknown_cfg_keys)
        app = _load_app(runner, component, comp_args)
        workspace = args.workspace if args.workspace is not None else config_default("run", "workspace")
        chain, pending = _fallback(runner, scheduler, args)
        if len(chain) < 2:
            info = runner.dryrun(app, scheduler, cfg, workspace=workspace or None,
                                 parent_run_id=args.parent_run_id, name=args.name, resume=args.resume)
        else:  # every hop dry-runs once, the first too: what --dryrun prints is what is submitted
            run = runner.dryrun_with_fallback(app, [(scheduler, cfg), *chain[1:]], pending, workspace or None,
                                              args.parent_run_id, name=args.name, resume=args.resume)
            info = run.first
        if args.dryrun:
            _print_dryrun(info)
            return 0
        wait = args.wait or args.log or (is_local(runner, scheduler) and not args.detach)

        def submit() -> str:
            return runner.schedule(info) if len(chain) < 2 else runner.schedule_with_fallback(run)
        if args.detach or not wait:
            handle = submit()
            _say(sys.stdout, handle + "\n")
            _say(sys.stderr, next_steps(handle))
            auto_gc(runner, scheduler)
            return 0
        relay = args.log or is_local(runner, scheduler)
        with _CancelOnSignal(runner, detach=args.on_interrupt == "detach") as guard:
            started = time.monotonic()
            handle = guard.handle = submit()
            _say(sys.stdout, handle + "\n")
            guard.check()
            status = _wait(runner, handle, info, relay, guard, relay_stdout)
            guard.check()
        if status is None:
            raise CLIError(f"app {handle} disappeared from {scheduler} while waiting")
        seconds = time.monotonic() - started
        if len(info._app.roles) > 1:
            _say(sys.stderr, roles_table(status, _replica_times(runner, handle) if len(chain) < 2 else {}))
        if len(chain) > 1:
            _say(sys.stderr, f"tx run: {runner.run_status(handle).chain}\n")
        _say(sys.stderr, summary(handle, status, seconds, logs_shown=relay))
        auto_gc(runner, scheduler)
        return 0 if status.state.name == "SUCCEEDED" else 1


def _app_name(text: str) -> str:
    """``--name``'s type: an app name (:func:`tx.specs.check_app_name`), else argparse's
    one-line usage error."""
    from tx.specs.api import check_app_name  # the model is imported when the command runs

    try:
        return check_app_name(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _fallback(runner: Runner, scheduler: str, args: argparse.Namespace) -> Tuple[List[str], Optional[float]]:
    """The chain of schedulers (``scheduler`` first, then ``--fallback`` or ``[tx]
    fallback``) and the pending timeout (``--pending_timeout`` or ``[tx] pending_timeout``)."""
    # settings and durations are read when the command runs
    from tx.config.gc import parse_duration
    from tx.config.recovery import fallback, pending_timeout

    if args.fallback is not None:
        rest = [s.strip() for s in args.fallback.split(",") if s.strip()]
    else:
        rest = fallback()
    rest = [s for s in rest if s != scheduler]
    if args.pending_timeout is not None:
        if not rest:
            raise CLIError("--pending_timeout needs schedulers to fail over to: --fallback SCHED[,SCHED...]", 2)
        try:
            pending: Optional[float] = parse_duration(args.pending_timeout)
        except ValueError as e:
            raise CLIError(f"--pending_timeout: {e}", 2) from None
    else:
        try:
            pending = pending_timeout()
        except ValueError as e:
            raise CLIError(str(e), 2) from None
    if pending is not None and pending <= 0:
        raise CLIError("--pending_timeout must be more than 0 s", 2)
    for name in rest:
        runner.scheduler(name)  # an unknown or uninstalled scheduler fails before anything runs
    return [scheduler, *rest], pending


def next_steps(handle: str, what: str = "launched {handle}") -> str:
    """What ``tx run --detach`` prints on stderr after the handle: the commands to follow the
    app, after ``tx run: <what>`` (``{handle}`` in ``what`` is the handle)."""
    return (f"tx run: {what.format(handle=handle)}; to follow it:\n"
            f"  tx status {handle}\n"
            f"  tx log -f {handle}\n"
            f"  tx cancel {handle}\n")


def _replica_times(runner: Runner, handle: str) -> Dict[str, Tuple[Optional[float], Optional[float]]]:
    """``"role/k" -> (first start, last end)`` in epoch seconds, where the scheduler records
    its replicas' attempts (the local schedulers' ``attempts`` metadata); else empty."""
    from tx.specs.handles import parse_app_handle  # the model is imported when the command runs

    scheduler, _session, app_id = parse_app_handle(handle)
    try:
        desc = runner.scheduler(scheduler).describe(app_id)
    except Exception:  # noqa: BLE001 - the table is a courtesy: without times it shows "-"
        return {}
    attempts = (desc.metadata.get("attempts") if desc is not None else None) or {}
    times: Dict[str, Tuple[Optional[float], Optional[float]]] = {}
    for key, tries in attempts.items():
        starts = [t.get("start") for t in tries if isinstance(t.get("start"), (int, float))]
        ends = [t.get("end") for t in tries if isinstance(t.get("end"), (int, float))]
        times[key] = (min(starts) if starts else None, max(ends) if ends else None)
    return times


def roles_table(status: AppStatus, times: Dict[str, Tuple[Optional[float], Optional[float]]]) -> str:
    """The table ``tx run`` prints (to stderr) after an app of several roles ends: for each
    role, its replicas, its state (every replica's, or how many are in each), how long it
    ran (first start to last end, where the scheduler records them) and its exit codes."""
    rows = []
    for rs in status.roles:
        reps = sorted(rs.replicas, key=lambda r: r.id)
        states: Dict[str, int] = {}
        for r in reps:
            states[r.state.name] = states.get(r.state.name, 0) + 1
        state = next(iter(states)) if len(states) == 1 else ", ".join(f"{n} {s}" for s, n in states.items())
        spans = [times.get(f"{rs.role}/{r.id}", (None, None)) for r in reps]
        starts = [a for a, _b in spans if a is not None]
        ends = [b for _a, b in spans if b is not None]
        duration = format_duration(max(ends) - min(starts)) if starts and ends else "-"
        codes = sorted({r.exit_code for r in reps if r.exit_code is not None})
        rows.append((rs.role, len(reps), state, duration, ",".join(map(str, codes)) or "-"))
    return table(["ROLE", "REPLICAS", "STATE", "DURATION", "EXIT"], rows)


def _say(stream: Any, text: str) -> None:
    """Write ``text`` to ``stream`` and flush; a reader that went away (``tx run | head``)
    is not an error: the app is waited for and its result is the exit status."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        # later writes and the final flush go nowhere instead of failing
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        except (OSError, ValueError):
            pass


def summary(handle: str, status: AppStatus, seconds: float, logs_shown: bool) -> str:
    """What ``tx run`` prints (to stderr) when a waited-for app ends: :func:`tx.views.run_summary`."""
    from tx.views import run_summary  # the views and the model when the command runs, not when its parser is built

    return run_summary(handle, status, seconds, logs_shown)


def _print_dryrun(info: AppDryRunInfo) -> None:
    # serialization (yaml) is imported only for --dryrun
    from tx.specs.files import appdef_to_yaml

    sys.stdout.write("=== APPLICATION ===\n")
    sys.stdout.write(appdef_to_yaml(info._app))
    sys.stdout.write("\n=== SCHEDULER REQUEST ===\n")
    sys.stdout.write(str(info))
    sys.stdout.write("\n")
    sys.stdout.flush()


_SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class _CancelOnSignal:
    """While waiting on an app, SIGTERM and SIGINT cancel it (``check``, within a second of
    the signal, cancels and exits with 128+signal), or with ``detach`` leave it running
    (``check`` exits 0). Installed before
    the app is scheduled, so that no signal falls between launching the app and guarding it.
    From the signal on, the relay is muted: the replicas' dying output (torchrun's
    SignalException traceback) stays in their logs."""

    def __init__(self, runner: Runner, detach: bool = False) -> None:
        self.runner = runner
        self.detach = detach
        self.handle: Optional[str] = None
        self.received: List[int] = []
        self.relay: Optional[Relay] = None
        self.live: Any = None
        self._old: Dict[int, Any] = {}

    def __enter__(self) -> "_CancelOnSignal":
        for s in (signal.SIGTERM, signal.SIGINT):
            self._old[s] = signal.signal(s, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # only notes the signal: the cancel is :meth:`check`'s, in the main flow, which the
        # wait loop reaches within a second. Cancelling here ran the log archive's copy (and
        # its first import) inside the handler, re-entering whatever the main thread was in:
        # a Ctrl-C during the archive's import disabled the archive ("partially initialized
        # module"), the full CI run of stop 16
        if self.relay is not None:
            self.relay.muted.set()
        if not self.received:
            self.received.append(signum)

    def check(self) -> None:
        """If a signal came: cancel the app (if that has not happened) and exit 128+signal,
        or, detaching, say how to follow the app and exit 0; either in one plain line."""
        if not self.received:
            return
        if self.live is not None:
            self.live.stop()
        why = _SIGNAL_NAMES.get(self.received[0], f"signal {self.received[0]}")
        if self.detach and self.handle is not None:
            _say(sys.stderr, next_steps(self.handle, f"detached ({why}); {{handle}} keeps running"))
            sys.exit(0)
        if self.handle is not None:
            self.runner.cancel(self.handle)  # no-op once cancelled or finished
            self.runner.wait(self.handle, wait_interval=0.2, timeout=60)
            _say(sys.stderr, f"tx run: cancelled {self.handle} ({why}); its logs: `tx log {self.handle}`\n")
        else:
            _say(sys.stderr, f"tx run: cancelled before the app was launched ({why})\n")
        sys.exit(128 + self.received[0])

    def __exit__(self, *exc: Any) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


def _split_blocks(runner: Runner, handle: str, role: str, k: int, stream: str) -> Any:
    """The blocks of one stream (``stdout``/``stderr``) of a replica, followed; where the
    scheduler keeps only the combined log, that (for ``stdout``) and nothing (for ``stderr``)."""
    try:
        blocks = iter(runner.log_blocks(handle, role, k, should_tail=True, streams=stream))
        first = next(blocks, None)
    except ValueError:  # the scheduler keeps no such stream
        if stream == "stderr":
            return
        blocks = iter(runner.log_blocks(handle, role, k, should_tail=True))
        first = next(blocks, None)
    if first is not None:
        yield first
        yield from blocks


def _wait(runner: Runner, handle: str, info: AppDryRunInfo, relay_logs: bool,
          guard: _CancelOnSignal, relay_stdout: str = RELAY_STDOUT) -> Optional[AppStatus]:
    """Wait for the app, relaying its replicas' stdout to stdout and stderr to stderr, with
    a live status line on a terminal; return its last status (None: it disappeared)."""
    from tx.cli._live import LiveLine, wanted  # only while waiting

    relay = guard.relay = Relay(sys.stderr.buffer)
    if relay_logs:
        i = 0
        for role in info._app.roles:
            for k in range(role.num_replicas):
                to = sys.stdout.buffer if relay_stdout == "stdout" else sys.stderr.buffer
                for stream, out in (("stdout", to), ("stderr", sys.stderr.buffer)):
                    relay.add(f"{role.name}/{k}",
                              lambda r=role.name, k=k, s=stream: _split_blocks(runner, handle, r, k, s),
                              out=out, index=i)
                i += 1
    live = None
    if wanted(sys.stderr):
        hint = "Ctrl-C detaches" if guard.detach else "Ctrl-C cancels"
        live = guard.live = LiveLine(sys.stderr.buffer, relay.lock, hint)
        relay.before_write = live.clear
        live.start()
    try:
        while True:
            status = runner.wait(handle, wait_interval=0.5, timeout=1.0)
            if status is None or status.is_terminal() or guard.received:
                break
            if live is not None:
                live.update(status)
        if status is not None and status.is_terminal() and not guard.received:
            relay.join()
    finally:
        if live is not None:
            live.stop()
    return status


#: ``tx run``: run a component or an AppDef file on a scheduler
COMMAND = Command(run=run, arguments=(
    Argument("-s", "--scheduler", default=None,
             help="scheduler to run on (default: [cli:run] scheduler in .txconfig, else local_cwd)"),
    Argument("-cfg", "--scheduler_args", "--cfg", dest="cfg", action="append", default=[],
             help="run options as k1=v1,k2=v2 (lists k=a,b; dicts k=a:1;b:2); see `tx runopts`"),
    Argument("--dryrun", action="store_true", help="print the app and the scheduler request instead of submitting"),
    Argument("--wait", action="store_true", help="wait for the app to finish"),
    Argument("--log", action="store_true", help="relay the app's logs while waiting (implies --wait)"),
    Argument("--detach", action="store_true",
             help="return once the app is launched (local schedulers wait by default)"),
    Argument("--on_interrupt", "--on-interrupt", dest="on_interrupt", choices=["cancel", "detach"],
             default="cancel",
             help="what Ctrl-C (or SIGTERM) while waiting does: cancel the app (default, as TorchX), "
                  "or detach and leave it running"),
    Argument("--name", default=None, type=_app_name,
             help="the app's name, shown by `tx list` and the scheduler (job name, object names); "
                  "replaces the component's (dist.ddp's own --name after the component still sets "
                  "the tracking run name); letters, digits, '-', '_', '.', at most 40"),
    Argument("--fallback", default=None, metavar="SCHED[,SCHED...]",
             help="schedulers to fail over to, in order, when the app stays pending past --pending_timeout "
                  "or fails with an infrastructure failure (default: [tx] fallback; docs/recovery.md)"),
    Argument("--pending_timeout", "--pending-timeout", dest="pending_timeout", default=None, metavar="DURATION",
             help="how long the app may stay pending before the next --fallback scheduler is tried "
                  "(90s, 10m; default: [tx] pending_timeout, else never)"),
    Argument("--resume", default=None, metavar="HANDLE",
             help="continue the checkpoints of an earlier app or run: reuse the TX_CHECKPOINT_DIR its "
                  "handle recorded (default: every run gets a fresh checkpoint location; docs/recovery.md)"),
    Argument("--workspace", default=None,
             help="local directory patched into the first role's image (default: [cli:run] workspace)"),
    Argument("--parent_run_id", "--parent-run-id", dest="parent_run_id", default=None,
             help="tracker run id of the parent run (sets TX_PARENT_RUN_ID)"),
    Argument("component_and_args", nargs=argparse.REMAINDER, metavar="COMPONENT [ARGS...]",
             help="component name (see `tx builtins`), path/file.py:fn, or an AppDef .yaml/.json file, "
                  "then the component's arguments (see `tx run COMPONENT --help`)"),
))
