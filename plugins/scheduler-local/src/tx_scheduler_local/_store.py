"""The on-disk registry of local apps. Standard library only: the supervisor imports it.

Layout (``<state>`` is ``$TX_STATE_DIR``, default ``${XDG_STATE_HOME:-~/.local/state}/tx``)::

    <state>/local/apps/<app_id>/
        request.json     what to run (written once by the launching process, atomically)
        state.json       app and replica states (rewritten atomically by the supervisor)
        supervisor.log   the supervisor's own messages (its stdout and stderr)
        environ.json     the environment the app was launched with (mode 0600): a supervisor
                         that restarts the app after the infrastructure lost it gives it again
        lock             flock taken by a process that finalizes an app whose supervisor died

Files are replaced with ``os.replace`` so that a reader in any process sees either the old
or the new complete file; the app directory is created with ``os.mkdir``, which fails if
another process created it first.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Callable, Dict, Optional

from tx.config import state_dir

REQUEST = "request.json"
STATE = "state.json"
SUPERVISOR_LOG = "supervisor.log"
ENVIRON = "environ.json"
LOCK = "lock"

TERMINAL = frozenset(("SUCCEEDED", "FAILED", "CANCELLED"))

# app ids are path components: letters, digits, '_', '.', '-'; no leading dot
_APP_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,254}$")


def default_state_dir() -> str:
    """tx's state directory (:func:`tx.config.environ.state_dir`: ``$TX_STATE_DIR``, else
    ``${XDG_STATE_HOME:-~/.local/state}/tx``)."""
    return state_dir()


def apps_dir(state_dir: str) -> str:
    """The directory holding one directory per local app."""
    return os.path.join(state_dir, "local", "apps")


def valid_app_id(app_id: str) -> bool:
    """True if ``app_id`` can name an app directory (no ``/``, no ``..``)."""
    return isinstance(app_id, str) and bool(_APP_ID.match(app_id))


def write_json_atomic(path: str, obj: Any, default: Optional[Callable[[Any], Any]] = None,
                      mode: int = 0o644) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file and ``os.replace``
    (``default`` converts values JSON cannot hold, as in ``json.dumps``; ``mode``: the new
    file's permissions, less the umask)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    data = json.dumps(obj, separators=(",", ":"), default=default).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, path)


class BadStateFile(ValueError):
    """A file of the registry that tx cannot use: unreadable, empty, not JSON, or not the
    JSON object tx wrote. The message names the file and what is wrong with it (a
    ValueError, so the CLI prints it as one line)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


def read_json(path: str) -> Optional[Dict[str, Any]]:
    """The JSON object in ``path``, or None if the file does not exist.

    Raises:
        BadStateFile: the file cannot be read (permissions, not a regular file), is empty,
            is not UTF-8 JSON (a truncated write), or holds something other than an object.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except PermissionError:
        raise BadStateFile(path, f"cannot be read by uid {os.getuid()} (permission denied)") from None
    except IsADirectoryError:
        raise BadStateFile(path, "is a directory, not a file") from None
    except NotADirectoryError:
        raise BadStateFile(os.path.dirname(path), "is a file, not an app directory") from None
    except OSError as e:
        raise BadStateFile(path, f"cannot be read: {e.strerror or e}") from None
    if not data.strip():
        raise BadStateFile(path, "is empty (written by a process that was killed?)")
    try:
        obj = json.loads(data)
    except ValueError as e:
        raise BadStateFile(path, f"is not valid JSON ({e}; truncated?)") from None
    if not isinstance(obj, dict):
        raise BadStateFile(path, f"holds a JSON {type(obj).__name__}, not an object")
    return obj


def ensure_log_root(path: str, is_default: bool) -> None:
    """Create the log root if needed. The default one must be a directory of ours that
    no one else can write (it is in a shared temp directory).

    Raises:
        RuntimeError: the default root exists but is not a private directory of ours.
    """
    os.makedirs(path, mode=0o700 if is_default else 0o777, exist_ok=True)
    if is_default and hasattr(os, "getuid"):
        st = os.lstat(path)
        import stat

        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise RuntimeError(
                f"default log directory {path} is not a private directory of this user; "
                "pass the run option log_dir"
            )
