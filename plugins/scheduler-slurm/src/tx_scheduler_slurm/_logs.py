"""Reading a replica's log file, once or following it until the app ends."""
from __future__ import annotations

import time
from typing import BinaryIO, Callable, Iterator, Optional

BLOCK_SIZE = 65536  # bytes per read


def iter_blocks(
    path: str,
    is_done: Optional[Callable[[], bool]] = None,
    poll_interval: float = 0.2,
    check_interval: float = 1.0,
) -> Iterator[bytes]:
    """Yield the bytes of the file at ``path`` in blocks that each end on a ``\\n`` (the
    last block may end mid-line when the file does).

    Args:
        path: the file; a missing file yields nothing unless following.
        is_done: follow the file (``tail -f``) until this returns True, then read what is
            left and stop; it is called at most every ``check_interval`` seconds, only
            when the reader is at the end of the file. None: read what is there and stop.
        poll_interval: seconds between reads at the end of a followed file.
        check_interval: seconds between calls of ``is_done``.
    """
    f: Optional[BinaryIO] = None
    pending = b""
    next_check = 0.0
    try:
        while True:
            if f is None:
                try:
                    f = open(path, "rb")
                except FileNotFoundError:
                    if is_done is None or is_done():
                        return
                    time.sleep(check_interval)
                    continue
            data = f.read(BLOCK_SIZE)
            if data:
                pending += data
                cut = pending.rfind(b"\n")
                if cut >= 0:
                    yield pending[: cut + 1]
                    pending = pending[cut + 1:]
                continue
            # at the end of the file
            if is_done is None:
                break
            now = time.monotonic()
            if now >= next_check:
                next_check = now + check_interval
                if is_done():
                    rest = f.read()  # written before the app ended
                    while rest:
                        pending += rest
                        rest = f.read()
                    break
            time.sleep(poll_interval)
        if pending:
            yield pending
    finally:
        if f is not None:
            f.close()
