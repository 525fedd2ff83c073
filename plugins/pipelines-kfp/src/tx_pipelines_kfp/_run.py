"""The run_app step's program: run an AppDef on a tx scheduler, relay its logs, wait, and
fail with the app's structured error. No kfp here: KFP's executor imports this module alone
(:func:`tx_pipelines_kfp.step.tx_run_app`)."""
import contextlib
import json
import signal
import sys
import threading
from typing import Any, Dict, Iterator, List, Optional

from tx.runner import Runner, get_runner
from tx.specs import NONE, AppState, AppStatus, appdef_from_dict

__all__ = ["run_and_wait", "AppStepError"]

#: seconds the relays get to drain a replica's last lines after the app ended
_DRAIN_S = 60.0


class AppStepError(RuntimeError):
    """The app a step ran did not succeed: ``str()`` is one line (handle, state, the app's
    structured error); ``status`` is its last :class:`tx.specs.AppStatus` (None: the
    scheduler forgot the app)."""

    def __init__(self, message: str, handle: str, status: Optional[AppStatus]) -> None:
        super().__init__(message)
        self.handle = handle
        self.status = status


def _error_line(status: AppStatus) -> str:
    """The app's structured error in one line (the first failed replica's, else the status'
    message)."""
    err = status.structured_error_msg
    if err == NONE:
        for role in status.roles:
            for r in role.replicas:
                if r.state == AppState.FAILED and r.structured_error_msg != NONE:
                    err = r.structured_error_msg
                    break
            if err != NONE:
                break
    text = err if err != NONE else status.msg
    return " ".join(str(text).split()) or "no error reported by the scheduler"


def _relay(runner: Runner, handle: str, role: str, k: int, lock: threading.Lock, out: Any,
           errors: List[BaseException]) -> None:
    prefix = f"{role}/{k} "
    try:
        for line in runner.log_lines(handle, role, k, should_tail=True):
            with lock:
                out.write(prefix + line.rstrip("\n") + "\n")
                out.flush()
    except BaseException as e:  # noqa: BLE001 - reported after the wait
        errors.append(e)


@contextlib.contextmanager
def _signals_noted() -> Iterator[List[int]]:
    """While inside, SIGTERM and SIGINT (KFP stopping the step) are only noted in the list
    yielded: the wait loop cancels the app in the main flow (cancelling inside a handler
    would run the log archive's copy there, as tx run learnt)."""
    noted: List[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def note(signum: int, frame: Any) -> None:
        noted.append(signum)

    old = {s: signal.signal(s, note) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield noted
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _wait(runner: Runner, handle: str, wait_interval: float, signals: List[int], out: Any,
          lock: threading.Lock) -> Optional[AppStatus]:
    """Wait for the app to end; a noted signal cancels it and ends the step (exit 128 + signal)."""
    while True:
        if signals:
            with lock:
                print(f"tx: signal {signals[0]}: cancelling {handle}", file=out, flush=True)
            runner.cancel(handle)
            raise SystemExit(128 + signals[0])
        status = runner.wait(handle, wait_interval=wait_interval, timeout=1.0)
        if status is None or status.is_terminal():
            return status


def run_and_wait(app: str, scheduler: str, cfg: str = "{}", session: str = "",
                 wait_interval: float = 1.0, out: Any = None) -> str:
    """Run ``app`` (AppDef JSON) on ``scheduler`` with run options ``cfg`` (a JSON object),
    relay its replicas' log lines to ``out`` (default stdout), wait for it to end.

    Returns:
        The app handle when the app SUCCEEDED.

    Raises:
        AppStepError: the app ended in another state (FAILED, CANCELLED) or vanished; its
            message is one line with the app's structured error.
        ValueError: ``app`` or ``cfg`` is not valid JSON / not an AppDef; what
            :meth:`tx.runner.Runner.run` raises (unknown scheduler, bad run options).
    """
    out = out if out is not None else sys.stdout
    appdef = appdef_from_dict(json.loads(app))
    options: Dict[str, Any] = json.loads(cfg) if cfg else {}
    if not isinstance(options, dict):
        raise ValueError(f"cfg must be a JSON object of run options, got {cfg!r}")
    with get_runner(session or None) as runner, _signals_noted() as signals:
        handle = runner.run(appdef, scheduler, options)  # a signal during the submission is noted too
        print(f"tx: launched {handle}", file=out, flush=True)
        lock, errors = threading.Lock(), []  # type: threading.Lock, List[BaseException]
        threads = [threading.Thread(target=_relay, args=(runner, handle, role.name, k, lock, out, errors),
                                    name=f"tx-relay-{role.name}-{k}", daemon=True)
                   for role in appdef.roles for k in range(role.num_replicas)]
        for t in threads:
            t.start()
        status = _wait(runner, handle, wait_interval, signals, out, lock)
        for t in threads:
            t.join(_DRAIN_S)
    if status is None:
        raise AppStepError(f"{handle}: the scheduler no longer knows the app", handle, None)
    with lock:
        print(status.format(), file=out, flush=True)
        for e in errors:
            print(f"tx: could not relay a log: {e}", file=out, flush=True)
    if status.state != AppState.SUCCEEDED:
        raise AppStepError(f"{handle} {status.state}: {_error_line(status)}", handle, status)
    return handle
