"""``torchx.runner.api``: :mod:`tx.runner.api`, with the names TorchX 0.7 code imports from
it."""
from tx.runner.api import *  # noqa: F401,F403
from tx.runner.api import Runner, get_runner  # noqa: F401
from tx.config import get_config, get_configs  # noqa: F401
from tx.runner.events import log_event  # noqa: F401
from tx.schedulers.api import ListAppResponse, Scheduler, SchedulerFactory, get_scheduler_factories  # noqa: F401
from tx.schedulers.env import JOB_ID, PARENT_RUN_ID, TORCHX_NAMES, TRACKERS
from tx.schedulers.streams import Stream  # noqa: F401
from tx.specs.api import NONE, AppDef, AppDryRunInfo, UnknownAppException, macros  # noqa: F401
from tx.components.system.builders import materialize_appdef  # noqa: F401
from tx.components.system.finder import get_component  # noqa: F401
from tx.specs.handles import AppHandle, make_app_handle  # noqa: F401
from tx.specs.runopts import CfgVal, runopts  # noqa: F401
from tx.specs.status import AppStatus  # noqa: F401
from tx.tracker import get_configured_trackers  # noqa: F401
from tx_torchx_compat.torchx.tracker.api import tracker_config_env_var_name  # noqa: F401
from tx_torchx_compat._handles import parse_app_handle  # noqa: F401
from tx_torchx_compat.scheduler_api import WorkspaceMixin  # noqa: F401

ENV_TORCHX_JOB_ID = TORCHX_NAMES[JOB_ID]
ENV_TORCHX_PARENT_RUN_ID = TORCHX_NAMES[PARENT_RUN_ID]
ENV_TORCHX_TRACKERS = TORCHX_NAMES[TRACKERS]
