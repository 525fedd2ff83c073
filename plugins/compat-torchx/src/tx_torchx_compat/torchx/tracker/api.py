"""``torchx.tracker.api``: :mod:`tx.tracker.api`, with TorchX's ``ENV_TORCHX_*`` names."""
from tx.schedulers.env import JOB_ID, PARENT_RUN_ID, TORCHX_NAMES, TRACKERS
from tx.tracker.api import *  # noqa: F401,F403

ENV_TORCHX_JOB_ID = TORCHX_NAMES[JOB_ID]
ENV_TORCHX_PARENT_RUN_ID = TORCHX_NAMES[PARENT_RUN_ID]
ENV_TORCHX_TRACKERS = TORCHX_NAMES[TRACKERS]
