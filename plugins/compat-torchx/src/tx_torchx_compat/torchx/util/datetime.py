"""``torchx.util.datetime``: TorchX 0.7.0's ``get_past_epoch_time``."""
import time

__all__ = ["get_past_epoch_time"]


def get_past_epoch_time(days_past: int) -> int:
    """The time ``days_past`` days (of 86,400 seconds) before now, in whole seconds since
    the epoch (rounded down)."""
    return int(time.time() - days_past * 86400)
