"""JSON records under tx's state directory, as sweeps (:mod:`tx.runner.sweep`) and runs
with failover (:mod:`tx.runner.failover`) keep them: written whole or not at all, locked
across processes with ``flock``, read back a directory at a time."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
from typing import Any, Callable, Iterator, List, Mapping, TypeVar

T = TypeVar("T")


def write_json(path: str, data: Any, private: bool = False) -> None:
    """Write ``data`` as JSON to ``path`` (its directory made as needed) through a temporary
    file moved into place, so a reader sees the old record or the new one, never part
    (``private``: readable by this user only, mode 0600)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o666)
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


@contextlib.contextmanager
def flocked(path: str, blocking: bool = True) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` (created as needed; released by the kernel if
    the holder dies). Yields True while held; with ``blocking`` False and another process
    holding it, yields False at once, holding nothing."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as lf:
        try:
            fcntl.flock(lf, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def read_all(directory: str, from_json: Callable[[Mapping[str, Any]], T]) -> List[T]:
    """Every ``*.json`` record of ``directory`` (none if it does not exist), by file name;
    one that cannot be read or parsed (being replaced, damaged) is left out."""
    out = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if name.endswith(".json"):
            try:
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    out.append(from_json(json.load(f)))
            except (OSError, ValueError, TypeError):
                continue
    return out
