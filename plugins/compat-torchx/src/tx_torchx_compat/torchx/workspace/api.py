"""``torchx.workspace.api``: :class:`WorkspaceMixin` (see :class:`tx_torchx_compat.scheduler_api.WorkspaceMixin`)."""
from tx_torchx_compat.scheduler_api import WorkspaceMixin  # noqa: F401
from tx.specs.api import AppDef, Role  # noqa: F401
from tx.specs.runopts import CfgVal, runopts  # noqa: F401
