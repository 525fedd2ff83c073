"""``torchx.cli.cmd_log``: the helpers of TorchX 0.7.0's ``torchx log`` that other projects
import (``validate``, ``_prefix_line``, ``find_role_replicas``, ``ID_FORMAT``); the command
itself is tx's ``log``."""
import logging
import queue
import re
import sys
import threading
import time
from typing import Any, List, Optional, TextIO, Tuple

from tx.runner.api import Runner, get_runner
from tx.specs.api import AppDef, is_started
from tx.specs.handles import make_app_handle
from tx_torchx_compat.torchx.cli.colors import ENDC, GREEN  # noqa: F401 - TorchX's cmd_log has them

__all__ = ["CmdLog", "ID_FORMAT", "find_role_replicas", "get_logs", "print_log_lines", "validate"]

logger: logging.Logger = logging.getLogger(__name__)

#: what ``torchx log`` takes
ID_FORMAT = "SCHEDULER://[SESSION_NAME]/APP_ID/[ROLE_NAME/[REPLICA_IDS,...]]"
_ID = re.compile(r"^\w+://[^/]*/[^/]+(/[^/]+(/(\d+,?)+)?)?$")


def validate(job_identifier: str) -> None:
    """Exit 1 with an error on stderr unless ``job_identifier`` has the form
    :data:`ID_FORMAT` (as TorchX's does).

    Raises:
        SystemExit: the identifier is malformed (code 1).
    """
    if not _ID.match(job_identifier):
        print(f"torchx log: error: {job_identifier} is not of the form {ID_FORMAT}", file=sys.stderr)
        sys.exit(1)


def _prefix_line(prefix: str, line: str) -> str:
    """``line`` with ``prefix`` at its start and after each carriage return or inner
    newline (a progress bar's ``\\r`` keeps its prefix); a line starting with ``\\r`` gets
    it after that ``\\r`` only."""
    if "\r" in line:
        line = line.replace("\r", "\r" + prefix)
    body, end = (line[:-1], line[-1:]) if line.endswith("\n") else (line, "")
    line = body.replace("\n", "\n" + prefix) + end
    return line if line.startswith("\r") else prefix + line


def find_role_replicas(app: AppDef, role_name: Optional[str]) -> List[Tuple[str, int]]:
    """``(role, replica index)`` of every replica of ``app`` (of ``role_name`` only, when
    given), in role order."""
    return [(role.name, k) for role in app.roles if role_name is None or role.name == role_name
            for k in range(role.num_replicas)]


def print_log_lines(file: TextIO, runner: Runner, app_handle: str, role_name: str, replica_id: int,
                    regex: Optional[str], should_tail: bool, exceptions: "queue.Queue[Exception]",
                    streams: Optional[Any]) -> None:
    """Write the lines of one replica to ``file``, each prefixed with ``role/replica`` in
    green (:func:`_prefix_line`); an exception is put on ``exceptions`` and re-raised."""
    try:
        for line in runner.log_lines(app_handle, role_name, replica_id, regex, should_tail=should_tail,
                                     streams=streams):
            print(_prefix_line(f"{GREEN}{role_name}/{replica_id}{ENDC} ", line), file=file, end="", flush=True)
    except Exception as e:
        exceptions.put(e)
        raise


def get_logs(file: TextIO, identifier: str, regex: Optional[str], should_tail: bool = False,
             runner: Optional[Runner] = None, streams: Optional[Any] = None) -> None:
    """Write the log lines of the replicas ``identifier`` names (:data:`ID_FORMAT`) to
    ``file``, one thread per replica, as TorchX 0.7.0's ``torchx log`` does: without replica
    ids it waits (polling every second) until the app has started and takes every replica
    of the role (of every role, without a role).

    Args:
        file: where the lines go.
        identifier: ``SCHEDULER://[SESSION]/APP_ID[/ROLE[/IDS]]`` (session default ``default``).
        regex: only lines matching it (None: all).
        should_tail: follow the logs until the app ends.
        runner: the runner to use (None: :func:`tx.runner.api.get_runner`).
        streams: which stream (``torchx.schedulers.api.Stream``; None: the scheduler's default).

    Raises:
        SystemExit: (code 1) the identifier is malformed, or names a role the app lacks.
        Exception: the first exception of a replica's reader (the others are logged).
    """
    validate(identifier)
    scheduler_backend, _, path_str = identifier.partition("://")
    path = path_str.split("/")
    session_name, app_id = path[0] or "default", path[1]
    role_name = path[2] if len(path) > 2 else None
    runner = runner or get_runner()
    app_handle = make_app_handle(scheduler_backend, session_name, app_id)
    if len(path) == 4:
        replica_ids = [(role_name, int(i)) for i in path[3].split(",") if i]
    else:
        waiting_said = False
        while True:
            status = runner.status(app_handle)
            if status and is_started(status.state):
                break
            if not waiting_said:
                logger.info("Waiting for app state response before fetching logs...")
                waiting_said = True
            time.sleep(1)
        app = runner.describe(app_handle)
        replica_ids = find_role_replicas(app, role_name) if app is not None else []
        if not replica_ids:
            roles = "\n".join(f"  {i}: {scheduler_backend}://{app_id}/{r.name}"
                              for i, r in enumerate(app.roles if app is not None else []))
            logger.error(f"No role [{role_name}] found for app: {app.name if app else app_id}."
                         f" Did you mean one of the following:\n{roles}")
            sys.exit(1)
    exceptions: "queue.Queue[Exception]" = queue.Queue()
    threads = [threading.Thread(target=print_log_lines, daemon=True,
                                args=(file, runner, app_handle, role, k, regex, should_tail, exceptions, streams))
               for role, k in replica_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = []
    while not exceptions.empty():
        errors.append(exceptions.get())
    for e in errors[1:]:
        logger.error(e)
    if errors:
        raise errors[0]


from tx_torchx_compat.torchx.cli.cmd_base import TxSubCommand  # noqa: E402 - after the helpers, as listed


class CmdLog(TxSubCommand):
    """``torchx log`` (tx's ``log``)."""

    tx_command = "log"
