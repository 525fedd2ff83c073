"""``torchx.schedulers.streams``: :mod:`tx.schedulers.streams`, plus TorchX 0.7.0's ``Tee``."""
import io
import os
import threading
import time
from typing import BinaryIO, List

from tx.schedulers.streams import *  # noqa: F401,F403
from tx.schedulers.streams import __all__ as _tx_all

__all__ = [*_tx_all, "Tee"]

#: seconds between two looks at files that had nothing new
_POLL_S = 0.05


class Tee:
    """Copies what is appended to several files into one writable binary stream, as TorchX
    0.7.0's ``torchx.schedulers.streams.Tee`` does (its local scheduler combines a replica's
    stdout and stderr files this way).

    A background thread follows each source from its start (bytes already written included)
    and writes new bytes to ``out`` as they appear, in no particular order between sources.
    :meth:`close` stops following, copies what is left in every source, and closes ``out``.

    Args:
        out: an open binary stream (``io.open(path, "wb", buffering=0)``).
        *sources: paths of files to follow; a path that does not exist yet is opened when
            it appears.
    """

    def __init__(self, out: BinaryIO, *sources: str) -> None:
        self.out = out
        self.sources = list(sources)
        self._stop = threading.Event()
        self._files: List = [None] * len(self.sources)
        self._thread = threading.Thread(target=self._follow, daemon=True, name="tx-tee")
        self._thread.start()

    def _copy_new(self) -> bool:
        """Copy what each source has beyond what was copied; True if anything was."""
        copied = False
        for i, path in enumerate(self.sources):
            f = self._files[i]
            if f is None:
                if not os.path.exists(path):
                    continue
                f = self._files[i] = io.open(path, "rb")
            data = f.read()
            if data:
                self.out.write(data)
                copied = True
        return copied

    def _follow(self) -> None:
        while not self._stop.is_set():
            if not self._copy_new():
                time.sleep(_POLL_S)

    def close(self) -> None:
        """Stop following, copy the rest of every source, close ``out`` and the sources."""
        self._stop.set()
        self._thread.join()
        self._copy_new()
        for f in self._files:
            if f is not None:
                f.close()
        self.out.close()
