"""tx.specs: the AppDef model and everything a component or scheduler needs to describe
an app. Names follow TorchX's ``torchx.specs``.

Importing this package is cheap: it loads attrs only (no cattrs, YAML, plugins or SDKs). The
names of AppDef files (:mod:`tx.specs.files`) and of sweep specs (:mod:`tx.specs.sweep`) are
loaded on first access.
"""
from tx.specs.api import (
    ALL,
    MISSING,
    NONE,
    NULL_RESOURCE,
    AppDef,
    AppDefFormatError,
    AppDryRunInfo,
    AppState,
    AppStatusError,
    InvalidRunConfigException,
    MalformedAppHandleException,
    ReplicaState,
    Resource,
    RetryPolicy,
    Role,
    UnknownAppException,
    UnknownSchedulerException,
    check_app_name,
    is_started,
    is_terminal,
    macros,
)
from tx.specs.handles import AppHandle, ParsedAppHandle, make_app_handle, parse_app_handle
from tx.specs.mounts import BindMount, DeviceMount, MountType, VolumeMount, parse_mounts
from tx.specs.named_resources import get_named_resources, named_resources, resource
from tx.specs.runopts import CfgVal, get_type_name, markdown_table, runopt, runopts
from tx.specs.status import AppStatus, Attempt, FailureKind, ReplicaStatus, RoleStatus, RootCause

#: the names of this face loaded from their modules on first access (``import tx.specs``
#: stays cheap: no JSON reader, no sweep grammar)
_LAZY = {
    "appdef_from_dict": "tx.specs.files",
    "appdef_to_dict": "tx.specs.files",
    "appdef_to_json": "tx.specs.files",
    "appdef_to_stored": "tx.specs.files",
    "appdef_to_yaml": "tx.specs.files",
    "read_stored_appdef_and_options": "tx.specs.files",
    "storable_run_options": "tx.specs.files",
    "SweepSpec": "tx.specs.sweep",
    "format_value": "tx.specs.sweep",
}

__all__ = [
    "ALL", "MISSING", "NONE", "NULL_RESOURCE", "AppDef", "AppDefFormatError", "AppDryRunInfo",
    "AppHandle", "AppState", "AppStatus", "AppStatusError", "Attempt", "BindMount", "CfgVal", "DeviceMount",
    "FailureKind", "InvalidRunConfigException", "MalformedAppHandleException", "MountType", "ParsedAppHandle",
    "ReplicaState", "ReplicaStatus", "Resource", "RetryPolicy", "Role", "RoleStatus", "RootCause",
    "UnknownAppException", "UnknownSchedulerException", "VolumeMount", "check_app_name", "get_named_resources",
    "get_type_name", "is_started", "is_terminal", "macros", "markdown_table", "make_app_handle", "named_resources",
    "parse_app_handle", "parse_mounts", "resource", "runopt", "runopts", *sorted(_LAZY),
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tx.specs' has no attribute {name!r}")
    import importlib  # deferred: the face loads a name on first access

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(list(globals()) + list(_LAZY))
