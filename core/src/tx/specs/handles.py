"""App handles: ``{scheduler}://{session_name}/{app_id}``, TorchX's format."""
from __future__ import annotations

import re
from typing import NamedTuple

from tx.specs.api import MalformedAppHandleException

__all__ = ["AppHandle", "make_app_handle", "parse_app_handle", "ParsedAppHandle"]

AppHandle = str

# greedy session: the app id is what follows the last '/', so ids may hold ':' (k8s
# "namespace:name") but not '/'
_HANDLE = re.compile(r"^(?P<scheduler>[A-Za-z0-9_.\-]+)://(?P<session>.*)/(?P<app_id>[^/]+)$")


class ParsedAppHandle(NamedTuple):
    scheduler_backend: str
    session_name: str
    app_id: str


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> AppHandle:
    """Return ``{scheduler_backend}://{session_name}/{app_id}``."""
    return f"{scheduler_backend}://{session_name}/{app_id}"


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Split an app handle into scheduler, session name and app id.

    Raises:
        MalformedAppHandleException: the text is not ``{scheduler}://{session}/{app_id}``,
            or the session is empty (``local_cwd:///app``), as in TorchX 0.7.
    """
    m = _HANDLE.match(app_handle or "")
    if not m:
        raise MalformedAppHandleException(app_handle)
    if not m.group("session"):
        raise MalformedAppHandleException(app_handle, "the session name is empty")
    return ParsedAppHandle(m.group("scheduler"), m.group("session"), m.group("app_id"))
