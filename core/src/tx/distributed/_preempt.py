"""Preemption in the job: the backend's warning (a signal, SIGTERM unless the job picks
another with ``TX_PREEMPT_SIGNAL``) turned into one decision taken by every rank at the
same step, and an exit that every backend counts as preempted (docs/recovery.md)::

    from tx.distributed import exit_preempted, preempted, save_checkpoint

    for step in range(start, steps):
        train_one_step()
        if preempted():                       # every rank, at the same point of the loop
            save_checkpoint(state(), step=step + 1)
            exit_preempted()                  # killed by the warning's signal

The signal handler only records the warning (a flag, and a line in ``TX_PREEMPT_NOTE``
where tx set one): it never runs a collective, so a rank that is inside another collective
when the warning comes is not disturbed; :func:`preempted` shares the flag at the next call.
Standard library at import; torch only when a process group is initialized.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any, Optional

__all__ = ["exit_preempted", "preempt_grace", "preempt_signal", "preempted"]

#: the signal the backend warns with (a name such as ``SIGTERM``/``USR1``, or a number)
PREEMPT_SIGNAL_ENV = "TX_PREEMPT_SIGNAL"
#: the seconds the job can count on between the warning and the kill
PREEMPT_GRACE_ENV = "TX_PREEMPT_GRACE"
#: a file the job appends a line to when it is warned (set by tx's local schedulers)
PREEMPT_NOTE_ENV = "TX_PREEMPT_NOTE"

_lock = threading.Lock()
_armed: Optional[int] = None  # the signal the handler is installed for
_warned_at: Optional[float] = None  # wall-clock seconds of the first warning on this rank
_decided = False  # preempted() returned True: every rank agreed, no more collectives


def preempt_signal() -> signal.Signals:
    """The signal the backend warns with: ``$TX_PREEMPT_SIGNAL`` (``SIGTERM``, ``TERM``,
    ``USR1``, ``10`` ...), SIGTERM when unset.

    Raises:
        ValueError: the variable names no signal.
    """
    raw = os.environ.get(PREEMPT_SIGNAL_ENV, "").strip()
    if not raw:
        return signal.SIGTERM
    try:
        return signal.Signals(int(raw)) if raw.isdigit() else signal.Signals[
            raw.upper() if raw.upper().startswith("SIG") else "SIG" + raw.upper()]
    except (KeyError, ValueError):
        raise ValueError(f"environment variable {PREEMPT_SIGNAL_ENV} must name a signal "
                         f"(SIGTERM, USR1, 10 ...), got {raw!r}") from None


def preempt_grace() -> Optional[float]:
    """``$TX_PREEMPT_GRACE``: the seconds between the warning and the kill that the backend
    promised (set by tx where the backend has one); None when unset.

    Raises:
        ValueError: the variable is not a non-negative number.
    """
    raw = os.environ.get(PREEMPT_GRACE_ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(f"environment variable {PREEMPT_GRACE_ENV} must be seconds >= 0, got {raw!r}")
    return value


def _on_warning(signum: int, _frame: Any) -> None:
    """Record the warning: a flag, and a line in ``$TX_PREEMPT_NOTE`` (best effort)."""
    global _warned_at
    if _warned_at is None:
        _warned_at = time.time()
    note = os.environ.get(PREEMPT_NOTE_ENV, "").strip()
    if note:
        try:
            fd = os.open(note, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, b"%.3f %d %d\n" % (_warned_at, signum, os.getpid()))
            finally:
                os.close(fd)
        except OSError:
            pass


def _arm() -> None:
    """Install the handler for :func:`preempt_signal` once (the main thread only: Python
    runs signal handlers there; elsewhere the signal keeps its action)."""
    global _armed
    if _armed is not None:
        return
    with _lock:
        if _armed is not None:
            return
        sig = preempt_signal()
        if threading.current_thread() is threading.main_thread():
            signal.signal(sig, _on_warning)
        _armed = int(sig)


def preempted() -> bool:
    """True on every rank at the same call once any rank has been warned.

    The first call installs a handler for the warning signal (:func:`preempt_signal`) that
    only records it; before that first call the signal keeps its default action (call it
    once before the training loop to be warned from the start).

    Contract: with a ``torch.distributed`` process group initialized this is a collective,
    one ``all_reduce(MAX)`` of a one-element flag on the default group: every rank must call
    it at the same point of its loop (as any collective), the same number of times. Then
    no rank waits on another longer than a step, and a rank blocked in another collective
    when the warning comes only sees it at its next call. Once it returned True it returns
    True without a collective (every rank agreed). Without a process group (one process) it
    is the local flag and costs nothing.

    Returns:
        whether to save and leave now.

    Raises:
        ValueError: ``TX_PREEMPT_SIGNAL`` names no signal.
        RuntimeError: from torch, when the collective fails (a peer died).
    """
    global _decided
    _arm()
    if _decided:
        return True
    flag = _warned_at is not None
    if "torch" in sys.modules:
        import torch.distributed as dist  # deferred: torch is already imported by the job

        if dist.is_available() and dist.is_initialized():
            import torch  # deferred: as above

            device = torch.device("cpu")
            if dist.get_backend() == "nccl":
                device = torch.device("cuda", torch.cuda.current_device())
            t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            flag = bool(t.item())
    _decided = flag
    return flag


def exit_preempted() -> None:
    """End this process the way an unhandled warning would: killed by the warning's signal
    (:func:`preempt_signal`, SIGTERM by default), so that the backend counts the attempt as
    preempted (an infrastructure failure, retried without spending ``max_retries``), not as
    the program's failure. Never returns.

    With a process group, every rank calls it (a barrier first, so that no rank dies while
    another still writes the checkpoint's completion marker; a barrier that fails because a
    peer is gone is ignored). stdout and stderr are flushed first.
    """
    sig = preempt_signal() if _armed is None else signal.Signals(_armed)
    if "torch" in sys.modules:
        import torch.distributed as dist  # deferred: torch is already imported by the job

        if dist.is_available() and dist.is_initialized():
            try:
                dist.barrier()
            except Exception:  # noqa: BLE001 - a peer already gone: leave anyway
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    except ValueError:  # not the main thread
        pass
    os.kill(os.getpid(), sig)
    time.sleep(1.0)  # delivery is asynchronous for a signal sent to oneself from a thread
    os._exit(128 + int(sig))  # a signal whose default action is not to end the process
