"""The AppDef data model: apps, roles, resources, mounts, macros and retry policies.

Names and semantics follow TorchX's ``torchx.specs`` so that TorchX users and scripts carry
over (https://pytorch.org/torchx/latest/specs.html). Classes are attrs classes: fields are
validated when set, so a bad value fails where it is written, not in a scheduler.
"""
from __future__ import annotations

from tx.errors import UserError

import copy
import enum
import re
import string
from typing import Any, Callable, Dict, Generic, List, Optional, TypeVar, Union

import attrs

from tx.specs.mounts import BindMount, DeviceMount, VolumeMount

__all__ = [
    "ALL", "AppDef", "AppDefFormatError", "AppDryRunInfo", "AppState", "AppStatusError",
    "check_app_name", "InvalidRunConfigException", "is_started", "is_terminal", "macros",
    "MalformedAppHandleException", "MAX_REPLICAS", "MISSING", "NONE", "NULL_RESOURCE",
    "ReplicaState", "Resource", "RetryPolicy", "Role", "UnknownAppException",
    "UnknownSchedulerException",
]

MISSING: str = "<MISSING>"
NONE: str = "<NONE>"
ALL: str = "all"

T = TypeVar("T")


def _replace(self: Any, **changes: Any) -> Any:
    """A copy with ``changes`` applied (``attrs.evolve``); what ``dataclasses.replace``
    did for TorchX's dataclasses. Validators and converters run on the changed fields.

    Raises:
        TypeError: a name that is not a field.
    """
    return attrs.evolve(self, **changes)


def _asdict(self: Any) -> Dict[str, Any]:
    """The fields as a dict, nested attrs classes included (``attrs.asdict``); what
    ``dataclasses.asdict`` did for TorchX's dataclasses."""
    return attrs.asdict(self, recurse=True)


#: the most replicas one role may ask for: far above any cluster's node count, far below
#: what would exhaust memory while a scheduler expands per-replica requests (each replica
#: gets its own environment and argv; 100,000,000 used 24 GB before the kernel killed tx)
MAX_REPLICAS = 65536


def _positive(name: str) -> Callable[[Any, Any, Any], None]:
    def check(_inst: Any, _attr: Any, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if value > MAX_REPLICAS:
            raise ValueError(f"{name} must be at most {MAX_REPLICAS}, got {value}")

    return check


def _non_negative(_inst: Any, attribute: "attrs.Attribute[Any]", value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be an integer >= 0, got {value!r}")


def _int_field(_inst: Any, attribute: "attrs.Attribute[Any]", value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an int, got {value!r}")


@attrs.define
class Resource:
    """What one replica asks for.

    Attributes:
        cpu: logical CPU cores (each scheduler maps them: Kubernetes millicores, Slurm
            ``--cpus-per-task``, AWS Batch vCPUs). ``-1`` means unset (NULL_RESOURCE).
        gpu: number of GPUs.
        memMB: memory in MB (2**20 bytes).
        capabilities: scheduler-interpreted extras, e.g. ``{"node.kubernetes.io/instance-type": "p4d.24xlarge"}``.
        devices: named devices and their count, e.g. ``{"vpc.amazonaws.com/efa": 4}``.
        tags: free-form metadata that no scheduler interprets.
    """

    cpu: int = attrs.field(validator=_int_field)
    gpu: int = attrs.field(validator=_int_field)
    memMB: int = attrs.field(validator=_int_field)
    capabilities: Dict[str, Any] = attrs.field(factory=dict)
    devices: Dict[str, int] = attrs.field(factory=dict)
    tags: Dict[str, object] = attrs.field(factory=dict)

    replace = _replace
    asdict = _asdict

    @staticmethod
    def copy(original: "Resource", **capabilities: Any) -> "Resource":
        """Return a deep copy of ``original`` with ``capabilities`` merged into its own."""
        res = copy.deepcopy(original)
        res.capabilities.update(capabilities)
        return res


_SCALARS = (str, int, float, bool, type(None))


def _copy_resource(res: "Resource") -> "Resource":
    """A copy of ``res`` that shares nothing mutable with it: its dicts copied where their
    values are scalars (the usual case, and cheap: a sweep copies one per trial), else a
    deep copy."""
    if all(isinstance(v, _SCALARS) for d in (res.capabilities, res.devices, res.tags) for v in d.values()):
        return attrs.evolve(res, capabilities=dict(res.capabilities), devices=dict(res.devices), tags=dict(res.tags))
    return copy.deepcopy(res)


#: a role without resource requirements; schedulers that need them reject it
NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)


class RetryPolicy(str, enum.Enum):
    """What is restarted when a replica fails and the role still has retries.

    * ``REPLICA``: only the failed replica, with the same replica id.
    * ``APPLICATION``: every replica of the app (all schedulers support it).
    * ``ROLE``: every replica of the failed replica's role.
    * ``HOT_SPARE``: as REPLICA, while at least ``min_replicas`` run (experimental).
    """

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"
    HOT_SPARE = "HOT_SPARE"

    def __str__(self) -> str:
        return self.value


def _retry_policy(value: Any) -> RetryPolicy:
    if isinstance(value, RetryPolicy):
        return value
    try:
        return RetryPolicy(str(value).upper())
    except ValueError:
        raise ValueError(
            f"retry_policy must be one of {', '.join(p.value for p in RetryPolicy)}, got {value!r}"
        ) from None


def _non_empty_name(_inst: Any, attribute: "attrs.Attribute[Any]", value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string, got {value!r}")


def _str_list(value: Any) -> List[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"expected a list of strings, got {value!r}")
    return list(value)


def _str_dict(value: Any) -> Dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"expected a mapping of strings, got {value!r}")
    return dict(value)


@attrs.define
class Role:
    """A set of identical replicas of one program: the unit a scheduler places.

    Attributes:
        name: the role name; unique within its AppDef, used in handles ``app/role/replica``.
        image: what the scheduler runs the entrypoint from: a container image (docker,
            kubernetes, aws_batch), a directory (local_dir, slurm, ray) or ignored (local_cwd).
        entrypoint: the program to run (looked up on PATH or relative to the image root).
        args: argv after the entrypoint, never interpreted by a shell; macros substituted.
        env: environment variables added to the replica's; macros substituted in values.
        num_replicas: replicas to run (>= 1).
        min_replicas: for elastic roles, the fewest replicas the job can run with.
        max_retries: restarts allowed after a failure (>= 0).
        retry_policy: what a restart covers (:class:`RetryPolicy`).
        resource: what each replica asks for (:class:`Resource`).
        port_map: port name -> port number the replica listens on.
        metadata: scheduler-specific extras, keys by convention ``<scheduler>/<key>``.
        mounts: bind, volume and device mounts (:func:`tx.specs.parse_mounts`).
        base_image: deprecated, kept for TorchX compatibility.
    """

    name: str = attrs.field(validator=_non_empty_name)
    image: str = attrs.field(default="")
    min_replicas: Optional[int] = attrs.field(default=None)
    base_image: Optional[str] = attrs.field(default=None)
    entrypoint: str = attrs.field(default=MISSING)
    args: List[str] = attrs.field(factory=list, converter=_str_list)
    env: Dict[str, str] = attrs.field(factory=dict, converter=_str_dict)
    num_replicas: int = attrs.field(default=1, validator=_positive("num_replicas"))
    max_retries: int = attrs.field(default=0, validator=_non_negative)
    retry_policy: RetryPolicy = attrs.field(
        default=RetryPolicy.APPLICATION, converter=_retry_policy
    )
    # a fresh copy: a shared NULL_RESOURCE would be changed by `role.resource.cpu = 4`
    resource: Resource = attrs.field(factory=lambda: copy.deepcopy(NULL_RESOURCE))
    port_map: Dict[str, int] = attrs.field(factory=dict)
    metadata: Dict[str, Any] = attrs.field(factory=dict)
    mounts: List[Union[BindMount, VolumeMount, DeviceMount]] = attrs.field(factory=list)

    @min_replicas.validator
    def _check_min(self, _attr: Any, value: Optional[int]) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"min_replicas must be an integer >= 0, got {value!r}")

    replace = _replace
    asdict = _asdict

    def pre_proc(self, scheduler: str, dryrun_info: "AppDryRunInfo[Any]") -> "AppDryRunInfo[Any]":
        """Hook for role subclasses to modify a scheduler request; returns it unchanged."""
        return dryrun_info


def _roles(value: Any) -> List[Role]:
    return list(value)


@attrs.define
class AppDef:
    """A distributed application: a name and its roles.

    Attributes:
        name: the app name; schedulers derive the app id from it (``name-<random>``).
        roles: the roles, each with a unique name.
        metadata: string key/values some schedulers attach (AWS Batch tags, ...).

    Raises:
        ValueError: two roles share a name.
    """

    name: str = attrs.field(validator=_non_empty_name)
    roles: List[Role] = attrs.field(factory=list, converter=_roles)
    metadata: Dict[str, str] = attrs.field(factory=dict)

    @roles.validator
    def _check_roles(self, _attr: Any, roles: List[Role]) -> None:
        seen = set()
        for i, role in enumerate(roles):
            if not isinstance(role, Role):
                raise TypeError(f"roles[{i}] must be a Role, got {type(role).__name__}")
            if role.name in seen:
                raise ValueError(f"roles[{i}]: duplicate role name {role.name!r}")
            seen.add(role.name)

    replace = _replace
    asdict = _asdict


#: the most characters of an app name given with ``tx run --name`` (Docker and GCP Batch
#: keep 40 of the name in their ids, before the random part)
_APP_NAME_MAX = 40
_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_app_name(name: str) -> str:
    """``name`` if it is an app name every scheduler keeps whole in its job name or id:
    1 to 40 letters, digits, ``-``, ``_`` and ``.``, starting with a letter or digit
    (``tx run --name``, ``Runner.run(..., name=)``). Schedulers still write it in their
    own rules where theirs are stricter: Kubernetes and GCP Batch ids are lowercase with
    ``-`` for ``_`` and ``.`` (their labels or annotations keep it as given), AWS Batch
    job names have ``-`` for ``.``.

    Raises:
        ValueError: ``name`` does not follow these rules (one line that says which).
    """
    if not isinstance(name, str) or not name:
        raise ValueError("app name is empty: give 1 to 40 letters, digits, '-', '_' or '.'")
    if len(name) > _APP_NAME_MAX:
        raise ValueError(f"app name {name!r} is {len(name)} characters long; at most {_APP_NAME_MAX} "
                         f"fit in every scheduler's job name")
    if not _APP_NAME.match(name):
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "_.-"))})
        why = (f"has {', '.join(repr(c) for c in bad)}" if bad
               else "must start with a letter or digit")
        raise ValueError(f"app name {name!r} {why}: use letters, digits, '-', '_' and '.', "
                         f"starting with a letter or digit")
    return name


class macros:
    """Placeholders in ``Role.args``, ``Role.env`` values and ``Role.metadata`` strings,
    replaced per replica by the scheduler (``string.Template`` syntax, ``$$`` escapes).

    * ``img_root``: root directory of the image (local: the current directory).
    * ``app_id``: the id the scheduler gave the app.
    * ``replica_id``: the replica's index within its role (kept across restarts).
    * ``rank0_env``: the NAME of the environment variable holding the rank-0 host; expand
      it with a shell, e.g. ``${${rank0_env}:=localhost}`` in a ``bash -c`` argument.
    """

    img_root = "${img_root}"
    base_img_root = "${base_img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"

    @attrs.define
    class Values:
        """Values for the macros; :meth:`apply` substitutes them into a role."""

        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str
        base_img_root: str = "DEPRECATED"

        replace = _replace
        asdict = _asdict

        def _mapping(self) -> Dict[str, str]:
            return {
                "img_root": self.img_root,
                "app_id": self.app_id,
                "replica_id": self.replica_id,
                "rank0_env": self.rank0_env,
                "base_img_root": self.base_img_root,
            }

        def substitute(self, arg: str) -> str:
            """Substitute the macros in ``arg``; unknown ``$names`` are left as written."""
            return string.Template(arg).safe_substitute(self._mapping()) if "$" in arg else arg

        def apply(self, role: Role) -> Role:
            """Return a copy of ``role`` with macros substituted in args, env and metadata."""
            mapping = self._mapping()

            def sub(s: str) -> str:
                return string.Template(s).safe_substitute(mapping) if "$" in s else s

            def sub_meta(v: Any) -> Any:
                if isinstance(v, str):
                    return sub(v)
                if isinstance(v, dict):
                    return {k: sub_meta(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [sub_meta(x) for x in v]
                return v

            return attrs.evolve(
                role,
                args=[sub(a) for a in role.args],
                env={k: sub(v) for k, v in role.env.items()},
                metadata=sub_meta(role.metadata) if role.metadata else {},
                resource=_copy_resource(role.resource),
                port_map=dict(role.port_map),
                mounts=list(role.mounts),
            )


class AppState(enum.IntEnum):
    """State of an app or of one replica (TorchX's values)."""

    UNSUBMITTED = 0
    SUBMITTED = 1
    PENDING = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6
    UNKNOWN = 7

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{self.name} ({self.value})"


ReplicaState = AppState
_TERMINAL = frozenset({AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED})
_STARTED = _TERMINAL | {AppState.RUNNING}


def is_terminal(state: AppState) -> bool:
    """True for SUCCEEDED, FAILED and CANCELLED."""
    return state in _TERMINAL


def is_started(state: AppState) -> bool:
    """True once an app is RUNNING or terminal."""
    return state in _STARTED


@attrs.define
class AppDryRunInfo(Generic[T]):
    """What a scheduler would submit: ``request`` (the backend request object) and a
    formatter for it. ``str(info)`` is the human-readable request that ``tx run --dryrun``
    prints under ``=== SCHEDULER REQUEST ===``.
    """

    request: T
    fmt: Callable[[T], str] = attrs.field(default=repr)
    _app: Optional[AppDef] = attrs.field(default=None, alias="_app")
    _cfg: Dict[str, Any] = attrs.field(factory=dict, alias="_cfg")
    _scheduler: Optional[str] = attrs.field(default=None, alias="_scheduler")

    def __repr__(self) -> str:
        return self.fmt(self.request)

    __str__ = __repr__


class AppDefFormatError(UserError, ValueError):
    """An AppDef document (dict, JSON or YAML) is invalid; the message names the field path."""


class InvalidRunConfigException(UserError):
    """A run config (``cfg``) is invalid for a scheduler: a missing required option, a wrong
    type or an unknown key. ``cfg_key`` names the offending option."""

    def __init__(self, invalid_reason: str, cfg_key: str = "", cfg: Any = None) -> None:
        super().__init__(invalid_reason)
        self.cfg_key = cfg_key
        self.cfg = cfg


class MalformedAppHandleException(UserError):
    """An app handle is not of the form ``{scheduler}://{session_name}/{app_id}``."""

    def __init__(self, app_handle: str, reason: str = "") -> None:
        super().__init__(
            f"malformed app handle {app_handle!r}: {reason + '; ' if reason else ''}"
            "expected {scheduler}://{session_name}/{app_id}"
        )
        self.app_handle = app_handle


class UnknownSchedulerException(UserError):
    """No installed plugin registers the scheduler name."""


class UnknownAppException(UserError):
    """The app does not exist (or no longer exists) on its scheduler."""

    def __init__(self, app_handle: str) -> None:
        super().__init__(
            f"unknown app {app_handle}: it does not exist or was removed from its scheduler"
        )
        self.app_handle = app_handle


class AppStatusError(UserError):
    """Raised by :meth:`AppStatus.raise_for_status` for an app that did not succeed."""

    def __init__(self, app_status: Any, *args: Any) -> None:
        super().__init__(*args or (app_status.format(),))
        self.app_status = app_status

    @property
    def status(self) -> Any:
        """The :class:`AppStatus` (TorchX's attribute name; same as ``app_status``)."""
        return self.app_status
