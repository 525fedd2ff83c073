"""``torchx.cli.cmd_log``: the helpers of TorchX 0.7.0's ``torchx log`` that other projects
import (``validate``, ``_prefix_line``, ``find_role_replicas``, ``ID_FORMAT``); the command
itself is tx's ``log``."""
import re
import sys
from typing import List, Optional, Tuple

from tx.specs.api import AppDef
from tx_torchx_compat.torchx.cli.colors import ENDC, GREEN  # noqa: F401 - TorchX's cmd_log has them

__all__ = ["CmdLog", "ID_FORMAT", "find_role_replicas", "validate"]

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


from tx_torchx_compat.torchx.cli.cmd_base import TxSubCommand  # noqa: E402 - after the helpers, as listed


class CmdLog(TxSubCommand):
    """``torchx log`` (tx's ``log``)."""

    tx_command = "log"
