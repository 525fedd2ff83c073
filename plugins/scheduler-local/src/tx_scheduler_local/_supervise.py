"""The supervisor process of one local app. Standard library only: what
:mod:`._launch` starts (forked, or ``python -m tx_scheduler_local._supervise APP_DIR
ACK_FD``) around a :class:`tx_scheduler_local._supervisor.Supervisor`: it sets up,
acknowledges the launch, supervises to the end and, after an unexpected error, kills
everything and records the app FAILED.
"""
from __future__ import annotations

import errno
import os
import sys
import time
import traceback
from typing import Any, Dict, List

from tx_scheduler_local import _store, _where
from tx_scheduler_local._replica import os_error_text
from tx_scheduler_local._supervisor import Supervisor

__all__ = ["crashed", "main", "supervise"]


def crashed(sup: Supervisor, exc: BaseException) -> None:
    """Last resort after an unexpected error of ``sup``: kill everything, record FAILED."""
    sup._log("supervisor error:\n" + "".join(traceback.format_exception(exc)))
    try:
        sup._kill_all_descendants()
    finally:
        sup.state = "FAILED"
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EDQUOT):
            sup.msg = f"tx supervisor failed: {os_error_text(exc)}" + (f" ({exc.filename})" if exc.filename else "")
        else:
            sup.msg = f"tx supervisor failed: {type(exc).__name__}: {exc}"
        for r in sup.replicas:  # free descriptors for the state file
            if r.logs is not None:
                try:
                    r.logs.close()
                except OSError:
                    pass
            if r.state not in ("SUCCEEDED", "FAILED", "CANCELLED"):
                r.state, r.pid = "FAILED", None
        sup.ended = time.time()
        if sup.scope:
            _where.kill_scope(sup.scope, spare=sup.pid)
            _where.leave_scope(sup.scope)
        sup.write_state()


def supervise(request: Dict[str, Any], app_dir: str, ack_fd: int) -> int:
    """Run the app: set up, acknowledge the launch on ``ack_fd`` (``ok <pid>``), supervise
    to the end. Returns the exit status of the supervisor process (0 unless it failed)."""
    sup = Supervisor(request, app_dir)
    try:
        sup.setup()
    except BaseException as e:  # noqa: BLE001 - reported to the launcher through the ack pipe
        os.write(ack_fd, f"error {type(e).__name__}: {e}\n".encode())
        os.close(ack_fd)
        raise
    try:
        os.write(ack_fd, f"ok {os.getpid()}\n".encode())
    except BrokenPipeError:
        # the launcher is gone (`tx run` killed with SIGKILL while it launched): the app is
        # recorded and its supervisor is up, so it runs on, as a detached app would
        sup._log("the launcher exited before the supervisor started; the app runs on")
    os.close(ack_fd)
    try:
        sup.run()
    except BaseException as e:  # noqa: BLE001 - record the failure, never leave orphans
        crashed(sup, e)
        return 1
    return 0


def main(argv: List[str]) -> int:
    """``APP_DIR ACK_FD``: daemonize (fork, so that the launcher reaps the intermediate
    process at once) and supervise the app of ``APP_DIR`` (its ``request.json``)."""
    app_dir, ack_fd = argv[0], int(argv[1])
    if os.fork():
        os._exit(0)
    request = _store.read_json(os.path.join(app_dir, _store.REQUEST))
    if request is None:
        os.write(ack_fd, b"error request.json is missing\n")
        return 1
    return supervise(request, app_dir, ack_fd)


def _entry(argv: List[str]) -> None:
    """Process entry point (``python -m tx_scheduler_local._supervise APP_DIR ACK_FD``)."""
    try:
        code = main(argv)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _entry(sys.argv[1:])
