"""``torchx.runner.api``: :mod:`tx.runner.api`, with the names TorchX 0.7 code imports from
it; its :class:`Runner` (and :func:`get_runner`'s) is tx's with TorchX's leniency about
mounts."""
from typing import Any, Mapping, Optional

from tx.runner.api import *  # noqa: F401,F403
from tx.runner import api as _tx_api
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


class Runner(_tx_api.Runner):
    """tx's :class:`tx.runner.api.Runner` (same arguments, same methods), as TorchX 0.7's:
    roles' mounts on a scheduler that supports none (``slurm``, ``gcp_batch``: tx refuses
    them) are dropped, as TorchX ignores them, with one line on stderr naming what was
    dropped (``torchx: warning: the slurm scheduler supports no mounts; ignored, as TorchX
    does: role 'trainer': volume nas-pvc -> /mnt/data``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._engine.drop_unsupported_mounts = "torchx"


def get_runner(name: Optional[str] = None, component_defaults: Optional[Mapping[str, Mapping[str, str]]] = None,
               **scheduler_params: Any) -> Runner:
    """TorchX 0.7's ``get_runner``: a :class:`Runner` for session ``name`` (default ``tx``);
    ``scheduler_params`` go to every scheduler factory."""
    return Runner(name or _tx_api.DEFAULT_SESSION, component_defaults=component_defaults,
                  scheduler_params=scheduler_params)
