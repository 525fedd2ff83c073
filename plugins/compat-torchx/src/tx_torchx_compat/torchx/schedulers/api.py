"""``torchx.schedulers.api``: what a scheduler written against TorchX 0.7 imports."""
from tx.schedulers.api import *  # noqa: F401,F403
from tx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler  # noqa: F401
from tx.schedulers.streams import Stream, filter_regex, split_lines, split_lines_iterator  # noqa: F401
from tx.specs.api import NONE, NULL_RESOURCE, AppDef, AppDryRunInfo, AppState, Role  # noqa: F401
from tx.specs.runopts import CfgVal, runopts  # noqa: F401
from tx.specs.status import RoleStatus  # noqa: F401
from tx_torchx_compat.scheduler_api import WorkspaceMixin  # noqa: F401

#: TorchX's default look-back for ``log_iter(since=...)`` helpers, in days
DAYS_IN_2_WEEKS = 14
