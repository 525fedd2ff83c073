"""``torchx.runtime.tracking``: simple results an app returns to whoever launched it
(TorchX's ``ResultTracker`` and ``FsspecResultTracker``, used by hyperparameter search
such as Ax's TorchX metric). See :mod:`torchx.runtime.tracking.api`."""
from tx_torchx_compat.torchx.runtime.tracking.api import FsspecResultTracker, ResultTracker

__all__ = ["FsspecResultTracker", "ResultTracker"]
