"""``torchx.workspace``: TorchX 0.7's workspace mix-in (:class:`tx_torchx_compat.scheduler_api.WorkspaceMixin`)."""
from tx_torchx_compat.scheduler_api import WorkspaceMixin

__all__ = ["WorkspaceMixin"]
