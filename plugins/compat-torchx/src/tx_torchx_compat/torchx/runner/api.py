"""``torchx.runner.api``: :mod:`tx.runner.api` with TorchX 0.7's names."""
from tx.runner.api import *  # noqa: F401,F403
from tx.runner.api import Runner, get_runner  # noqa: F401
from tx.schedulers.api import ListAppResponse, Scheduler, SchedulerFactory, WorkspaceMixin, get_scheduler_factories  # noqa: F401
from tx.schedulers.env import JOB_ID, PARENT_RUN_ID, TORCHX_NAMES, TRACKERS

ENV_TORCHX_JOB_ID = TORCHX_NAMES[JOB_ID]
ENV_TORCHX_PARENT_RUN_ID = TORCHX_NAMES[PARENT_RUN_ID]
ENV_TORCHX_TRACKERS = TORCHX_NAMES[TRACKERS]
