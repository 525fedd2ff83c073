"""``torchx.util.types``: TorchX 0.7's small typing helpers, on tx's implementations."""
import inspect
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union

from tx.components.system.decode import container_of, decode, is_bool  # noqa: F401
from tx.specs.runopts import to_dict  # noqa: F401

T = TypeVar("T")


def none_throws(optional: Optional[T], message: str = "Unexpected `None`") -> T:
    """``optional`` itself when it is not None.

    Raises:
        AssertionError: ``optional`` is None (with ``message``), as TorchX's helper does.
    """
    if optional is None:
        raise AssertionError(message)
    return optional


def to_list(arg: str) -> List[str]:
    """Split ``a,b,c`` into ``["a", "b", "c"]`` (an empty string gives ``[]``)."""
    return [p.strip() for p in arg.split(",")] if arg.strip() else []


def decode_optional(value: Any, tp: Any) -> Any:
    """:func:`decode` where None stays None."""
    return None if value is None else decode(value, tp)


def decode_from_string(encoded_value: str, annotation: Any) -> Union[Dict[Any, Any], List[Any], None]:
    """TorchX 0.7.0's ``decode_from_string``: ``a,b`` for a ``List[T]`` annotation,
    ``k=v,k2=v2`` for a ``Dict[K, V]``, elements decoded by tx's :func:`decode`; an empty
    string gives None.

    Raises:
        ValueError: ``annotation`` is not a list or dict type (as TorchX), or an element does
            not fit its type (tx's ``DecodeError``, a ValueError).
    """
    if not encoded_value:
        return None
    kind, _ = container_of(annotation)
    if kind is None:
        raise ValueError(f"cannot decode a string into {annotation!r}: only List[T] and Dict[K, V] are supported")
    return decode(encoded_value, annotation)


def is_primitive(param_type: Any) -> bool:
    """True when ``param_type`` is ``int``, ``str`` or ``float`` (TorchX 0.7.0's primitives;
    ``bool`` is not one)."""
    return param_type in (int, str, float)


def get_argparse_param_type(parameter: inspect.Parameter) -> Callable[[str], object]:
    """The argparse ``type=`` for a component parameter: its annotation when that is a
    primitive (:func:`is_primitive`), else ``str`` (the value is decoded afterwards)."""
    return parameter.annotation if is_primitive(parameter.annotation) else str
