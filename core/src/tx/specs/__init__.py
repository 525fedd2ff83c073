"""tx.specs: the AppDef model and everything a component or scheduler needs to describe
an app. Names follow TorchX's ``torchx.specs``.

Importing this package is cheap: it loads attrs only (no cattrs, YAML, plugins or SDKs).
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
from tx.specs.runopts import CfgVal, get_type_name, runopt, runopts
from tx.specs.status import AppStatus, Attempt, FailureKind, ReplicaStatus, RoleStatus, RootCause

__all__ = [
    "ALL", "MISSING", "NONE", "NULL_RESOURCE", "AppDef", "AppDefFormatError", "AppDryRunInfo",
    "AppHandle", "AppState", "AppStatus", "AppStatusError", "Attempt", "BindMount", "CfgVal", "DeviceMount",
    "FailureKind", "InvalidRunConfigException", "MalformedAppHandleException", "MountType", "ParsedAppHandle",
    "ReplicaState", "ReplicaStatus", "Resource", "RetryPolicy", "Role", "RoleStatus", "RootCause",
    "UnknownAppException", "UnknownSchedulerException", "VolumeMount", "check_app_name", "get_named_resources",
    "get_type_name", "is_started", "is_terminal", "macros", "make_app_handle", "named_resources",
    "parse_app_handle", "parse_mounts", "resource", "runopt", "runopts",
]
