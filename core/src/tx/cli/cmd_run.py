"""``tx run``: run a component (``dist.ddp``, ``path/file.py:fn``) or an AppDef file.

Prints the app handle on stdout. On local schedulers it waits and relays every replica's
log lines to stderr, prefixed ``role/replica`` (TorchX's local development loop);
``--detach`` returns once the app is launched. Elsewhere ``--wait`` waits and ``--log``
relays logs while waiting. Exits 1 when a waited-for app does not succeed. SIGTERM or
SIGINT while waiting cancels the app (nothing is left running) and exits 128+signal.
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
from tx.cli._relay import Relay
from tx.cli.cmd_gc import auto_gc
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError

if TYPE_CHECKING:
    from tx.runner import Runner
    from tx.specs.api import AppDef, AppDryRunInfo, AppStatus

__all__ = ["COMMAND", "UNKNOWN_CFG_KEYS", "format_duration", "summary"]

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


#: what ``-cfg`` does with a key that is not a run option of the scheduler: ``"error"`` (tx),
#: or ``"warn"``: a warning naming it, and the key is dropped (the ``torchx`` command of
#: tx-torchx-compat sets this, as TorchX 0.7 drops such keys)
UNKNOWN_CFG_KEYS = "error"


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


def _parse_cfg(runner: Runner, scheduler: str, texts: List[str]) -> Dict[str, Any]:
    # the settings and the model are imported when the command runs, not when its parser is built
    from tx.config.run_options import apply
    from tx.specs.api import InvalidRunConfigException

    opts = runner.scheduler_run_opts(scheduler)
    cfg: Dict[str, Any] = {}
    for text in texts:
        if UNKNOWN_CFG_KEYS == "warn":
            _warn_unknown_keys(opts, scheduler, text)
        parsed = opts.cfg_from_str(text, strict=UNKNOWN_CFG_KEYS != "warn")
        twice = sorted(set(parsed) & set(cfg))
        if twice:
            raise InvalidRunConfigException(
                f"bad run config: {twice[0]!r} is given twice in -cfg", twice[0], text)
        cfg.update(parsed)
    apply(scheduler, cfg, opts=opts)
    return cfg


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


def _run(args: argparse.Namespace) -> int:
    component, comp_args = _split_component(args)
    with make_runner(with_component_defaults=True) as runner:
        scheduler = args.scheduler or default_scheduler(runner)
        cfg = _parse_cfg(runner, scheduler, args.cfg)
        app = _load_app(runner, component, comp_args)
        workspace = args.workspace if args.workspace is not None else config_default("run", "workspace")
        info = runner.dryrun(app, scheduler, cfg, workspace=workspace or None,
                             parent_run_id=args.parent_run_id)
        if args.dryrun:
            _print_dryrun(info)
            return 0
        wait = args.wait or args.log or (is_local(runner, scheduler) and not args.detach)
        if args.detach or not wait:
            print(runner.schedule(info), flush=True)
            auto_gc(runner, scheduler)
            return 0
        relay = args.log or is_local(runner, scheduler)
        with _CancelOnSignal(runner) as guard:
            started = time.monotonic()
            handle = guard.handle = runner.schedule(info)
            _say(sys.stdout, handle + "\n")
            guard.check()
            status = _wait(runner, handle, info, relay)
            guard.check()
        if status is None:
            raise CLIError(f"app {handle} disappeared from {scheduler} while waiting")
        _say(sys.stdout, "")
        _say(sys.stderr, summary(handle, status, time.monotonic() - started, logs_shown=relay))
        auto_gc(runner, scheduler)
        return 0 if status.state.name == "SUCCEEDED" else 1


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


def format_duration(seconds: float) -> str:
    """``0.4 s``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    s = int(round(seconds))
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def summary(handle: str, status: AppStatus, seconds: float, logs_shown: bool) -> str:
    """What ``tx run`` prints (to stderr) when a waited-for app ends: one line with the final
    state, how long it ran, the handle and where its logs are; for an app that did not
    succeed, the reason in that line, and before it, once, the failed replica's last
    stderr lines unless they were relayed already (``logs_shown``)."""
    # the model is imported when the command runs, not when its parser is built
    from tx.specs.api import NONE

    state = status.state.name
    url = status.ui_url or ""
    logs = url[len("file://"):] if url.startswith("file://") else f"`tx log {handle}`"
    out = ""
    reason = ""
    if state != "SUCCEEDED":
        err = status.structured_error_msg if status.structured_error_msg not in (NONE, None) else ""
        msg = status.msg if status.msg not in (NONE, None) else ""
        err_lines = [ln for ln in str(err).splitlines() if ln.strip()]
        msg_lines = [ln for ln in str(msg).splitlines() if ln.strip()]
        first = (err_lines or msg_lines or [""])[0]
        if first:
            reason = f" ({first if len(first) <= 160 else first[:157] + '...'})"
        if not logs_shown:  # the failed replica's last stderr lines, once
            tail = err_lines[1:] or msg_lines[1:]
            out += "".join(f"  {ln}\n" for ln in tail)
    out += f"tx run: {state} after {format_duration(seconds)}: {handle}{reason}; logs: {logs}\n"
    return out


def _print_dryrun(info: AppDryRunInfo) -> None:
    # serialization (yaml) is imported only for --dryrun
    from tx.specs.files import appdef_to_yaml

    sys.stdout.write("=== APPLICATION ===\n")
    sys.stdout.write(appdef_to_yaml(info._app))
    sys.stdout.write("\n=== SCHEDULER REQUEST ===\n")
    sys.stdout.write(str(info))
    sys.stdout.write("\n")
    sys.stdout.flush()


class _CancelOnSignal:
    """While waiting on an app, SIGTERM and SIGINT cancel it (then ``check`` exits with
    128+signal). Installed before the app is scheduled, so that no signal falls between
    launching the app and guarding it."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.handle: Optional[str] = None
        self.received: List[int] = []
        self._old: Dict[int, Any] = {}

    def __enter__(self) -> "_CancelOnSignal":
        for s in (signal.SIGTERM, signal.SIGINT):
            self._old[s] = signal.signal(s, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if not self.received:
            self.received.append(signum)
            if self.handle is not None:
                self.runner.cancel(self.handle)

    def check(self) -> None:
        """Exit with 128+signal if a signal came; cancel the app first if that has not happened."""
        if not self.received:
            return
        if self.handle is not None:
            self.runner.cancel(self.handle)  # no-op once cancelled or finished
            self.runner.wait(self.handle, wait_interval=0.2, timeout=60)
        print(f"tx run: cancelled {self.handle or 'the launch'} on signal {self.received[0]}",
              file=sys.stderr)
        sys.exit(128 + self.received[0])

    def __exit__(self, *exc: Any) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


def _wait(runner: Runner, handle: str, info: AppDryRunInfo, relay_logs: bool) -> Optional[AppStatus]:
    """Wait for the app, relaying its replicas' logs to stderr."""
    relay = None
    if relay_logs:
        relay = Relay(sys.stderr.buffer)
        for role in info._app.roles:
            for k in range(role.num_replicas):
                relay.add(
                    f"{role.name}/{k}",
                    lambda r=role.name, k=k: runner.log_blocks(handle, r, k, should_tail=True),
                )
    status = runner.wait(handle, wait_interval=0.5)
    if relay is not None:
        relay.join()
    return status


#: ``tx run``: run a component or an AppDef file on a scheduler
COMMAND = Command(run=_run, arguments=(
    Argument("-s", "--scheduler", default=None,
             help="scheduler to run on (default: [cli:run] scheduler in .txconfig, else local_cwd)"),
    Argument("-cfg", "--scheduler_args", "--cfg", dest="cfg", action="append", default=[],
             help="run options as k1=v1,k2=v2 (lists k=a,b; dicts k=a:1;b:2); see `tx runopts`"),
    Argument("--dryrun", action="store_true", help="print the app and the scheduler request instead of submitting"),
    Argument("--wait", action="store_true", help="wait for the app to finish"),
    Argument("--log", action="store_true", help="relay the app's logs while waiting (implies --wait)"),
    Argument("--detach", action="store_true",
             help="return once the app is launched (local schedulers wait by default)"),
    Argument("--workspace", default=None,
             help="local directory patched into the first role's image (default: [cli:run] workspace)"),
    Argument("--parent_run_id", "--parent-run-id", dest="parent_run_id", default=None,
             help="tracker run id of the parent run (sets TX_PARENT_RUN_ID)"),
    Argument("component_and_args", nargs=argparse.REMAINDER, metavar="COMPONENT [ARGS...]",
             help="component name (see `tx builtins`), path/file.py:fn, or an AppDef .yaml/.json file, "
                  "then the component's arguments (see `tx run COMPONENT --help`)"),
))
