"""``torchx.schedulers.ids``: :mod:`tx.schedulers.ids`."""
import os

from tx.schedulers.ids import *  # noqa: F401,F403


def random_uint64() -> int:
    """A random unsigned 64-bit integer (from ``os.urandom``)."""
    return int.from_bytes(os.urandom(8), "little")
