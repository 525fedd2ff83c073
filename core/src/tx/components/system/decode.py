"""Component argument types: a component's resolved annotations, and the decoding of CLI
strings (or JSON values) into the values the component function expects.

Supported types (the ones :mod:`tx.components.system.file_linter` accepts): ``str``, ``int``,
``float``, ``bool``, ``List[T]`` / ``list[T]`` and ``Dict[K, V]`` / ``dict[K, V]`` of those,
and ``Optional[X]`` / ``X | None`` of any of them.
"""
from __future__ import annotations

import ast
import inspect
import typing
from typing import Any, Callable, Dict, List, Mapping, Tuple

from tx.specs.runopts import to_dict

__all__ = [
    "annotation_name", "container_of", "decode", "DecodeError", "is_bool",
    "resolve_annotations", "type_name", "unwrap_optional",
]

_NONE_TYPE = type(None)
_UNIONS: Tuple[Any, ...] = (typing.Union,)
try:  # PEP 604 unions (3.10+)
    import types as _types

    _UNIONS = (typing.Union, _types.UnionType)  # type: ignore[attr-defined]
except AttributeError:  # pragma: no cover - python 3.9
    pass

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})
_NAMES: Dict[str, Any] = {
    "str": str, "int": int, "float": float, "bool": bool, "None": _NONE_TYPE,
    "list": list, "List": list, "dict": dict, "Dict": dict, "Any": Any, "object": object,
}


class DecodeError(ValueError):
    """A value cannot be decoded into the annotated type (message without the arg name)."""


def resolve_annotations(fn: Callable[..., Any]) -> Dict[str, Any]:
    """Map each parameter of ``fn`` to its annotation as a type object.

    String annotations (``from __future__ import annotations`` or quoted ones) are resolved
    with :func:`typing.get_type_hints`; where that fails (``X | None`` on Python 3.9, a name
    that is not importable) the supported forms are rebuilt from the annotation's AST.
    A parameter without an annotation maps to :data:`typing.Any`.
    """
    params = inspect.signature(fn).parameters
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - fall back to our own resolution below
        hints = {}
    fn_globals = getattr(fn, "__globals__", {})
    out: Dict[str, Any] = {}
    for name, p in params.items():
        if name in hints:
            out[name] = hints[name]
        elif p.annotation is inspect.Parameter.empty:
            out[name] = Any
        elif isinstance(p.annotation, str):
            out[name] = _from_source(p.annotation, fn_globals)
        else:
            out[name] = p.annotation
    return out


def _from_source(text: str, fn_globals: Mapping[str, Any]) -> Any:
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return Any
    return _from_node(node, fn_globals)


def annotation_name(node: ast.expr) -> str:
    """``List`` for ``List``, ``typing.List`` and ``t.List``; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _from_node(node: ast.expr, g: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        if node.value is None:
            return _NONE_TYPE
        if isinstance(node.value, str):
            return _from_source(node.value, g)
        return Any
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return typing.Union[_from_node(node.left, g), _from_node(node.right, g)]
    if isinstance(node, ast.Subscript):
        base = annotation_name(node.value)
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        args = [_from_node(e, g) for e in elts]
        if base == "Optional" and len(args) == 1:
            return typing.Optional[args[0]]
        if base == "Union":
            return typing.Union[tuple(args)]
        if base in ("List", "list") and len(args) == 1:
            return List[args[0]]  # type: ignore[valid-type]
        if base in ("Dict", "dict") and len(args) == 2:
            return Dict[args[0], args[1]]  # type: ignore[valid-type]
        return Any
    name = annotation_name(node)
    if name in _NAMES:
        return _NAMES[name]
    return g.get(name, Any) if isinstance(node, ast.Name) else Any


def unwrap_optional(tp: Any) -> Tuple[Any, bool]:
    """``(X, True)`` for ``Optional[X]`` / ``X | None``, else ``(tp, False)``."""
    if typing.get_origin(tp) in _UNIONS:
        args = typing.get_args(tp)
        rest = [a for a in args if a is not _NONE_TYPE]
        optional = len(rest) < len(args)
        if len(rest) == 1:
            return rest[0], optional
        return tp, optional
    return tp, False


def container_of(tp: Any) -> Tuple[Any, Tuple[Any, ...]]:
    """``(list, (T,))`` for ``List[T]``, ``(dict, (K, V))`` for ``Dict[K, V]`` (bare
    ``list``/``dict`` default to ``str`` elements), ``(None, ())`` for anything else."""
    if tp in (list, List):
        return list, (str,)
    if tp in (dict, Dict):
        return dict, (str, str)
    origin = typing.get_origin(tp)
    if origin in (list, dict):
        args = typing.get_args(tp) or ((str,) if origin is list else (str, str))
        return origin, args
    return None, ()


def type_name(tp: Any) -> str:
    """A short printable name: ``str``, ``int``, ``List[str]``, ``Dict[str, int]``."""
    inner, _ = unwrap_optional(tp)
    kind, args = container_of(inner)
    if kind is list:
        return f"List[{type_name(args[0])}]"
    if kind is dict:
        return f"Dict[{type_name(args[0])}, {type_name(args[1])}]"
    if inner is Any or inner is inspect.Parameter.empty:
        return "str"
    return getattr(inner, "__name__", str(inner))


def is_bool(tp: Any) -> bool:
    """True for ``bool`` and ``Optional[bool]``."""
    return unwrap_optional(tp)[0] is bool


def decode(value: Any, tp: Any) -> Any:
    """Decode ``value`` into type ``tp``.

    Strings (from the CLI or a config file) are parsed: bool from ``true``/``false`` (also
    ``1/0``, ``yes/no``, ``on/off``, any case), ``List[T]`` by splitting on ``,``, ``Dict[K, V]``
    from ``K=V,K2=V2`` (:func:`tx.specs.runopts.to_dict`, so a value may hold commas); an empty
    string for a list or dict gives None when the type is Optional, else an empty container.
    Other values (JSON: numbers, lists, dicts) are checked and converted element-wise.
    ``None`` stays ``None``; an unsupported annotation passes the value through unchanged.

    Raises:
        DecodeError: the value does not fit the type (e.g. ``invalid int value: 'x'``).
    """
    if value is None:
        return None
    inner, optional = unwrap_optional(tp)
    if inner is bool:
        return _decode_bool(value)
    if inner is int:
        return _decode_number(value, int)
    if inner is float:
        return _decode_number(value, float)
    if inner is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise DecodeError(f"expected a string, got {value!r}")
    kind, args = container_of(inner)
    if kind is list:
        if isinstance(value, str):
            if not value.strip():
                return None if optional else []
            items: List[Any] = value.split(",")
        elif isinstance(value, (list, tuple)):
            items = list(value)
        else:
            raise DecodeError(f"expected a comma-separated list, got {value!r}")
        return [decode(item, args[0]) for item in items]
    if kind is dict:
        if isinstance(value, str):
            if not value.strip():
                return None if optional else {}

            try:
                pairs: Mapping[Any, Any] = to_dict(value)
            except ValueError as e:
                raise DecodeError(f"expected KEY=VALUE,KEY2=VALUE2, got {value!r} ({e})") from None
        elif isinstance(value, Mapping):
            pairs = value
        else:
            raise DecodeError(f"expected KEY=VALUE,KEY2=VALUE2, got {value!r}")
        return {decode(k, args[0]): decode(v, args[1]) for k, v in pairs.items()}
    return value


def _decode_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise DecodeError(f"invalid bool value: {value!r} (use true or false)")


def _decode_number(value: Any, kind: type) -> Any:
    if isinstance(value, bool):
        raise DecodeError(f"invalid {kind.__name__} value: {value!r}")
    if isinstance(value, kind) or (kind is float and isinstance(value, int)):
        return kind(value)
    if isinstance(value, str):
        try:
            return kind(value.strip())
        except ValueError:
            pass
    raise DecodeError(f"invalid {kind.__name__} value: {value!r}")
