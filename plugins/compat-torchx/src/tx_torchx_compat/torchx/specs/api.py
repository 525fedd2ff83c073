"""``torchx.specs.api``: where TorchX 0.7 code imports the data model, run options, app
statuses and handles from (tx keeps them in several modules of :mod:`tx.specs`)."""
from tx.specs.api import *  # noqa: F401,F403
from tx.specs.api import AppStatusError  # noqa: F401
from tx.specs.handles import AppHandle, ParsedAppHandle, make_app_handle  # noqa: F401
from tx.specs.mounts import BindMount, DeviceMount, MountType, VolumeMount, parse_mounts  # noqa: F401
from tx.specs.runopts import CfgVal, get_type_name, runopt, runopts, to_dict  # noqa: F401
from tx.specs.status import AppStatus, ReplicaStatus, RoleStatus  # noqa: F401
from tx_torchx_compat._handles import parse_app_handle  # noqa: F401

#: the states an app ends in, and those of a started app (TorchX 0.7's module constants)
_TERMINAL_STATES = [AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED]  # noqa: F405
_STARTED_STATES = _TERMINAL_STATES + [AppState.RUNNING]  # noqa: F405
