"""``torchx.workspace``: TorchX 0.7's workspace mix-in (:class:`tx.schedulers.api.WorkspaceMixin`)."""
from tx.schedulers.api import WorkspaceMixin

__all__ = ["WorkspaceMixin"]
