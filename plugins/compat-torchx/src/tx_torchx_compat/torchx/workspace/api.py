"""``torchx.workspace.api``: :class:`WorkspaceMixin` (see :class:`tx.schedulers.api.WorkspaceMixin`)."""
from tx.schedulers.api import WorkspaceMixin  # noqa: F401
from tx.specs.api import AppDef, Role  # noqa: F401
from tx.specs.runopts import CfgVal, runopts  # noqa: F401
