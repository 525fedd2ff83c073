"""The one cattrs converter of tx: AppDef <-> plain dicts (JSON/YAML-ready).

Private: imported only when an AppDef is read or written (through :mod:`tx.specs.files`,
the public layer), so that ``import tx.specs`` stays free of cattrs. The converter is built on first use and is strict:

* unknown keys are rejected (``roles[0]: unknown key 'entrypiont'``);
* scalars are not coerced: ``"2"`` is not an int, ``true`` is not an int, ``1`` is not a
  str (YAML users quote such values);
* enums go by value (``RetryPolicy`` by its name, case-insensitive on input; ``AppState``
  by its int value or name);
* mounts are a tagged union keyed by ``type``: ``bind``, ``volume`` or ``device``;
* missing optional fields take the attrs defaults; :func:`unstructure_appdef` writes
  every field.

Every error becomes one :class:`tx.specs.AppDefFormatError` whose message lists each bad
field as ``path: what was wrong`` (``roles[1].num_replicas: expected int, got 'two'``),
built from cattrs' own error tree with :func:`cattrs.transform_error`.
"""
from __future__ import annotations

import difflib
import enum
import re
import threading
import typing
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Tuple, Type

import attrs

from tx.specs.api import AppDef, AppDefFormatError, AppState, Resource, RetryPolicy, Role
from tx.specs.mounts import BindMount, DeviceMount, MountType, VolumeMount

if typing.TYPE_CHECKING:
    import cattrs

#: the union ``Role.mounts`` holds, and the ``type`` tag of each member
MountUnion = typing.Union[BindMount, VolumeMount, DeviceMount]
_MOUNT_TAGS: Dict[type, str] = {
    BindMount: MountType.BIND.value,
    VolumeMount: MountType.VOLUME.value,
    DeviceMount: MountType.DEVICE.value,
}
_MAX_ERRORS = 5

_lock = threading.Lock()
_conv: Optional["cattrs.Converter"] = None


class _Invalid(ValueError):
    """A value our hooks refuse; ``subpath`` extends the path cattrs knows (``type``)."""

    def __init__(self, msg: str, subpath: str = "") -> None:
        super().__init__(msg)
        self.msg = msg
        self.subpath = subpath


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def get_converter() -> "cattrs.Converter":
    """The tx converter (a :class:`cattrs.Converter`), built on the first call."""
    global _conv
    if _conv is None:
        with _lock:
            if _conv is None:
                _conv = _build()
    return _conv


# -- scalar hooks --------------------------------------------------------------------------
def _structure_int(value: Any, _tp: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"expected int, got {_show(value)}")
    return value


def _structure_float(value: Any, _tp: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(f"expected float, got {_show(value)}")
    return float(value)


def _structure_str(value: Any, _tp: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"expected str, got {_show(value)}")
    return value


def _structure_bool(value: Any, _tp: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"expected true or false, got {_show(value)}")
    return value


def _structure_any(value: Any, _tp: Any) -> Any:
    return value


def _structure_retry_policy(value: Any, _tp: Any) -> RetryPolicy:
    if isinstance(value, RetryPolicy):
        return value
    if isinstance(value, str) and value.upper() in RetryPolicy.__members__:
        return RetryPolicy(value.upper())
    choices = ", ".join(p.value for p in RetryPolicy)
    raise _Invalid(f"expected one of {choices}, got {_show(value)}")


def _structure_app_state(value: Any, _tp: Any) -> AppState:
    if isinstance(value, int) and not isinstance(value, bool) and value in AppState._value2member_map_:
        return AppState(value)
    if isinstance(value, str) and value.upper() in AppState.__members__:
        return AppState[value.upper()]
    raise _Invalid(f"expected an app state (0-7 or a name such as RUNNING), got {_show(value)}")


def _unstructure_enum(value: enum.Enum) -> Any:
    return value.value


# -- container and class hooks -------------------------------------------------------------
def _origin(tp: Any) -> Any:
    return typing.get_origin(tp)


def _list_hook_factory(conv: "cattrs.Converter") -> Callable[[Any], Callable[[Any, Any], Any]]:
    from cattrs.cols import list_structure_factory  # deferred: cattrs only when a document is converted

    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        base = list_structure_factory(tp, conv)

        def structure(value: Any, _tp: Any) -> Any:
            if not isinstance(value, (list, tuple)):
                raise _Invalid(f"expected a list, got {_show(value)}")
            return base(value, tp)

        return structure

    return factory


def _dict_hook_factory(conv: "cattrs.Converter") -> Callable[[Any], Callable[[Any, Any], Any]]:
    from cattrs.gen import make_mapping_structure_fn  # deferred: cattrs only when a document is converted

    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        base = make_mapping_structure_fn(tp, conv)

        def structure(value: Any, _tp: Any) -> Any:
            if not isinstance(value, Mapping):
                raise _Invalid(f"expected a mapping, got {_show(value)}")
            return base(value, tp)

        return structure

    return factory


def _class_hook_factory(conv: "cattrs.Converter") -> Callable[[Any], Callable[[Any, Any], Any]]:
    from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError  # deferred: cattrs only when a document is converted
    from cattrs.gen import make_dict_structure_fn  # deferred: cattrs only when a document is converted

    def factory(cl: Any) -> Callable[[Any, Any], Any]:
        base = make_dict_structure_fn(cl, conv)

        def structure(value: Any, _tp: Any) -> Any:
            if not isinstance(value, Mapping):
                raise _Invalid(f"expected a mapping, got {_show(value)}")
            try:
                return base(value, cl)
            except ClassValidationError as e:
                for sub in e.exceptions:  # so that "did you mean" skips keys already given
                    if isinstance(sub, ForbiddenExtraKeysError):
                        sub.given = set(value)  # type: ignore[attr-defined]
                raise

        return structure

    return factory


def _configure_mounts(conv: "cattrs.Converter") -> None:
    from cattrs.strategies import configure_tagged_union  # deferred: cattrs only when a document is converted

    configure_tagged_union(MountUnion, conv, tag_generator=_MOUNT_TAGS.__getitem__, tag_name="type")
    tagged = conv.get_structure_hook(MountUnion)
    tags = ", ".join(_MOUNT_TAGS.values())

    def structure(value: Any, tp: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _Invalid(f"expected a mapping with type: {tags}; got {_show(value)}")
        if "type" not in value:
            raise _Invalid(f"missing (one of {tags})", subpath="type")
        if value["type"] not in _MOUNT_TAGS.values():
            raise _Invalid(f"expected one of {tags}, got {_show(value['type'])}", subpath="type")
        return tagged(dict(value), tp)

    conv.register_structure_hook(MountUnion, structure)


def _build() -> "cattrs.Converter":
    import cattrs  # deferred: cattrs only when a document is converted

    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(bool, _structure_bool)
    # by predicate: a hook for the class `object` would match every class
    conv.register_structure_hook_func(lambda t: t is object, _structure_any)
    conv.register_structure_hook(RetryPolicy, _structure_retry_policy)
    conv.register_structure_hook(AppState, _structure_app_state)
    conv.register_unstructure_hook(RetryPolicy, _unstructure_enum)
    conv.register_unstructure_hook(AppState, _unstructure_enum)
    conv.register_structure_hook_factory(lambda t: _origin(t) is list, _list_hook_factory(conv))
    conv.register_structure_hook_factory(lambda t: _origin(t) is dict, _dict_hook_factory(conv))
    conv.register_structure_hook_factory(attrs.has, _class_hook_factory(conv))
    _configure_mounts(conv)
    return conv


# -- errors ------------------------------------------------------------------------------
_FIELD_NAMES = frozenset(
    a.name for cl in (AppDef, Role, Resource, BindMount, VolumeMount, DeviceMount) for a in attrs.fields(cl)
)
_LEADING_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*) (.+)$", re.DOTALL)


def _describe(exc: BaseException, _tp: Any) -> Tuple[str, str]:
    """(sub-path, message) of one leaf error of cattrs' error tree."""
    from cattrs.errors import ForbiddenExtraKeysError  # deferred: cattrs only when a document is converted

    if isinstance(exc, _Invalid):
        return exc.subpath, exc.msg
    if isinstance(exc, ForbiddenExtraKeysError):
        extra = sorted(map(str, exc.extra_fields))
        given = getattr(exc, "given", set())
        known = [a.name for a in attrs.fields(exc.cl) if a.name not in given] if attrs.has(exc.cl) else []
        if len(extra) == 1:
            close = difflib.get_close_matches(extra[0], known, n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return "", f"unknown key {extra[0]!r}{hint}"
        return "", "unknown keys " + ", ".join(repr(k) for k in extra)
    if isinstance(exc, KeyError):
        return "", "missing"
    msg = str(exc).strip().replace("\n", " ")
    # validators at construction say "<field> must be ...": move the field into the path
    m = _LEADING_FIELD.match(msg)
    if m and m.group(1) in _FIELD_NAMES:
        return m.group(1), m.group(2)
    if isinstance(exc, (ValueError, TypeError)):
        return "", msg
    return "", f"{type(exc).__name__}: {msg}"


def _join(path: str, sub: str) -> str:
    path = path.lstrip(".")
    if not sub:
        return path
    return f"{path}.{sub}" if path else sub


def format_errors(exc: BaseException) -> List[Tuple[str, str]]:
    """Flatten a cattrs structuring error into ``(path, message)`` pairs, paths written
    ``roles[1].env['FOO']`` (empty for the document itself)."""
    from cattrs import transform_error  # deferred: cattrs only when a document is converted

    found: List[Tuple[str, str]] = []

    def fmt(leaf: BaseException, tp: Any) -> str:
        found.append(_describe(leaf, tp))
        return str(len(found) - 1)

    out = []
    for line in transform_error(exc, path="", format_exception=fmt):
        idx, _, path = line.partition(" @ ")
        sub, msg = found[int(idx)]
        out.append((_join(path, sub), msg))
    return out


def _error(exc: BaseException) -> AppDefFormatError:
    errors = format_errors(exc)
    parts = [f"{p}: {m}" if p else m for p, m in errors[:_MAX_ERRORS]]
    if len(errors) > _MAX_ERRORS:
        parts.append(f"and {len(errors) - _MAX_ERRORS} more")
    err = AppDefFormatError("; ".join(parts))
    err.errors = errors  # type: ignore[attr-defined]
    return err


# -- public --------------------------------------------------------------------------------
def structure_appdef(data: Any) -> AppDef:
    """Build an :class:`AppDef` from a dict as written by :func:`unstructure_appdef`
    (or read from YAML/JSON). Fields left out take their defaults.

    Raises:
        tx.specs.AppDefFormatError: one line listing each bad field as ``path: problem``,
            e.g. ``roles[1].num_replicas: expected int, got 'two'``,
            ``roles[0]: unknown key 'entrypiont' (did you mean 'entrypoint'?)``,
            ``name: missing``. ``err.errors`` holds the ``(path, problem)`` pairs.
    """
    if not isinstance(data, Mapping):
        got = "nothing (empty document)" if data is None else _show(data)
        raise AppDefFormatError(f"expected a mapping with name and roles, got {got}")
    conv = get_converter()
    try:
        return conv.structure(data, AppDef)
    except Exception as e:  # noqa: BLE001 - every structuring error is reported alike
        raise _error(e) from None


def unstructure_appdef(app: AppDef) -> Dict[str, Any]:
    """Return ``app`` as a dict of plain JSON/YAML types, every field written; mounts
    carry a ``type`` key (``bind``/``volume``/``device``), enums their value.

    Raises:
        TypeError: ``app`` is not an AppDef.
    """
    if not isinstance(app, AppDef):
        raise TypeError(f"expected an AppDef, got {type(app).__name__}")
    # written out by hand, not with the cattrs converter: the same dict (a test compares
    # them), without importing cattrs and building the converter (~20 ms) on `tx run`
    return _plain(app)


def trusted_appdef(data: Mapping[str, Any]) -> AppDef:
    """The AppDef of a dict that :func:`unstructure_appdef` wrote (every field present),
    built directly, without cattrs: for tx's own stored copies, read on every status.

    Raises:
        KeyError, TypeError, ValueError: ``data`` is not such a dict (callers then use
            :func:`structure_appdef`, which names the bad field).
    """
    by_tag = {tag: cl for cl, tag in _MOUNT_TAGS.items()}
    roles = []
    for r in data["roles"]:
        fields = dict(r)
        fields["resource"] = Resource(**fields["resource"])
        fields["retry_policy"] = RetryPolicy(fields["retry_policy"])
        fields["mounts"] = [by_tag[m["type"]](**{k: v for k, v in m.items() if k != "type"})
                            for m in fields["mounts"]]
        roles.append(Role(**fields))
    return AppDef(data["name"], roles=roles, metadata=dict(data["metadata"]))


#: types :func:`_plain` returns as they are (exactly these: a subclass, such as an enum, is not)
_SCALARS = frozenset({str, int, float, bool, type(None)})
#: attrs class -> its fields' names (or None: not an attrs class), for :func:`_plain`
_ATTRS_FIELDS: Dict[type, Optional[Tuple[str, ...]]] = {}


def _plain(value: Any) -> Any:
    """``value`` as plain types: attrs classes field by field (mounts tagged), enums by
    value, containers recursively; what the converter's unstructure gives."""
    cls = type(value)
    if cls in _SCALARS:  # most values (a sweep unstructures an AppDef per trial)
        return value
    if cls in _ATTRS_FIELDS:
        names = _ATTRS_FIELDS[cls]
    else:
        names = _ATTRS_FIELDS[cls] = tuple(a.name for a in attrs.fields(cls)) if attrs.has(cls) else None
    if names is not None:
        out = {n: _plain(getattr(value, n)) for n in names}
        tag = _MOUNT_TAGS.get(cls)
        if tag is not None:
            out["type"] = tag
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def structure(data: Any, cl: Type[Any]) -> Any:
    """Structure ``data`` into ``cl`` with the tx converter (Role, Resource, mounts ...).

    Raises:
        tx.specs.AppDefFormatError: as :func:`structure_appdef`.
    """
    try:
        return get_converter().structure(data, cl)
    except Exception as e:  # noqa: BLE001
        raise _error(e) from None
