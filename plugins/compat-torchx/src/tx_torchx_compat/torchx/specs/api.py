"""``torchx.specs.api``: where TorchX 0.7 code imports the data model, run options, app
statuses and handles from (tx keeps them in several modules of :mod:`tx.specs`)."""
from typing import Any

from tx.specs.api import *  # noqa: F401,F403
from tx.specs.api import AppStatusError  # noqa: F401
from tx.specs.handles import AppHandle, ParsedAppHandle, make_app_handle  # noqa: F401
from tx.specs.mounts import BindMount, DeviceMount, MountType, VolumeMount, parse_mounts  # noqa: F401
from tx.specs.runopts import CfgVal, runopt, runopts, to_dict  # noqa: F401
from tx.specs.status import AppStatus, ReplicaStatus, RoleStatus  # noqa: F401
from tx_torchx_compat._handles import parse_app_handle  # noqa: F401

#: the states an app ends in, and those of a started app (TorchX 0.7's module constants)
_TERMINAL_STATES = [AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED]  # noqa: F405
_STARTED_STATES = _TERMINAL_STATES + [AppState.RUNNING]  # noqa: F405


def get_type_name(tp: Any) -> str:
    """TorchX 0.7.0's printable name of a type: a class's ``__name__`` (``int``, ``list``),
    else ``str(tp)`` (``typing.List[int]``, ``typing.Union[str, int]``). tx's own
    :func:`tx.specs.runopts.get_type_name` names option types for help text (``List[str]``)."""
    if getattr(tp, "__module__", None) != "typing" and hasattr(tp, "__name__"):
        return str(tp.__name__)
    return str(tp)
