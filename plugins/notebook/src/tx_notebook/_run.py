"""``%tx run``: run a component with the notebook's workspace on a scheduler and follow
its logs in the cell."""
from __future__ import annotations

import argparse
import queue
import shlex
import sys
import threading
import time
from typing import Any, List, Mapping, Optional, TextIO

from tx import UserError
from tx.runner import Runner, get_runner, run_summary
from tx.specs import AppStatus
from tx_notebook.workspace import WORKSPACE

__all__ = ["run", "run_line"]

_DONE = object()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%tx run", add_help=False, exit_on_error=False)
    p.add_argument("-s", "--scheduler", default="local_cwd")
    p.add_argument("-cfg", "--cfg", dest="cfg", default=None)
    p.add_argument("--workspace", default=WORKSPACE)
    p.add_argument("--name", default=None)
    p.add_argument("component_and_args", nargs=argparse.REMAINDER)
    return p


def run_line(line: str) -> Optional[AppStatus]:
    """What the line magic ``%tx run [-s SCHEDULER] [-cfg K=V,...] [--workspace URL]
    [--name NAME] COMPONENT [ARGS...]`` does: :func:`run` (scheduler default
    ``local_cwd``, workspace default the notebook's; ``--workspace ''`` runs without one).
    A bad line or a refused run prints one line (``tx run: error: ...``) and returns None."""
    words = shlex.split(line)
    if not words or words[0] != "run":
        print("%tx: usage: %tx run [-s SCHEDULER] [-cfg K=V,...] [--workspace URL] COMPONENT [ARGS...]",
              file=sys.stderr)
        return None
    try:
        ns = _parser().parse_args(words[1:])
        if not ns.component_and_args:
            raise UserError("give a component (utils.python --script train.py)")
        with get_runner() as runner:
            cfg = runner.scheduler_run_opts(ns.scheduler).cfg_from_str(ns.cfg) if ns.cfg else {}
            return run(ns.component_and_args[0], ns.component_and_args[1:], ns.scheduler, cfg,
                       workspace=ns.workspace or None, name=ns.name, runner=runner)
    except (UserError, ValueError, argparse.ArgumentError) as e:
        print(f"tx run: error: {e}", file=sys.stderr)
        return None


def run(component: str, args: List[str], scheduler: str = "local_cwd",
        cfg: Optional[Mapping[str, Any]] = None, workspace: Optional[str] = WORKSPACE,
        name: Optional[str] = None, runner: Optional[Runner] = None,
        out: Optional[TextIO] = None) -> Optional[AppStatus]:
    """Run ``component`` (``utils.python``, ``dist.ddp``, ``file.py:fn``) with ``args`` (CLI
    style) on ``scheduler`` with ``workspace`` (default the notebook's ``memory://``
    workspace, copied for the job by :func:`tx.workspace.localize_workspace`), print the
    handle, relay every replica's log lines as ``role/replica line`` to ``out`` (default
    stdout, the cell's output) until the app ends, then ``tx run``'s state line; returns the
    final status (None: the scheduler forgot the app). An interrupt (the notebook's stop
    button) cancels the app.

    Raises:
        tx.errors.UserError (and ValueError): the component, its arguments, the run
            options or the workspace are refused (nothing is launched).
    """
    out = out or sys.stdout
    own = runner is None
    runner = runner or get_runner()
    try:
        app = runner.component_app(component, list(args))
        info = runner.dryrun(app, scheduler, cfg or {}, workspace=workspace, name=name)
        start = time.monotonic()
        handle = runner.schedule(info)
        print(f"tx run: {handle}", file=out, flush=True)
        try:
            _relay(runner, handle, info._app, out)
            status = runner.wait(handle, wait_interval=0.5)
        except KeyboardInterrupt:
            runner.cancel(handle)
            status = runner.wait(handle, wait_interval=0.2, timeout=60)
        if status is not None:
            out.write(run_summary(handle, status, time.monotonic() - start, logs_shown=True))
            out.flush()
        return status
    finally:
        if own:
            runner.close()


def _relay(runner: Runner, handle: str, app: Any, out: TextIO) -> None:
    """Follow every replica's log in a thread; write their lines here, in this thread (the
    cell's output belongs to the thread that runs the cell), until all have ended."""
    lines: "queue.Queue[Any]" = queue.Queue()

    def follow(role: str, k: int) -> None:
        try:
            for line in runner.log_lines(handle, role, k, should_tail=True):
                lines.put(f"{role}/{k} {line}")
        except Exception as e:  # noqa: BLE001 - a replica whose log cannot be read is said, not fatal
            lines.put(f"{role}/{k} (log not readable: {e})\n")
        finally:
            lines.put(_DONE)

    threads = [threading.Thread(target=follow, args=(r.name, k), daemon=True)
               for r in app.roles for k in range(r.num_replicas)]
    for t in threads:
        t.start()
    left = len(threads)
    while left:
        item = lines.get()
        if item is _DONE:
            left -= 1
        else:
            out.write(item if item.endswith("\n") else item + "\n")
            out.flush()
