"""``torchx.workspace``: TorchX 0.7's workspace mix-in (:class:`tx_torchx_compat.scheduler_api.WorkspaceMixin`)
and ``walk_workspace``."""
from tx_torchx_compat.scheduler_api import WorkspaceMixin
from tx_torchx_compat.torchx.workspace.api import walk_workspace

__all__ = ["WorkspaceMixin", "walk_workspace"]
