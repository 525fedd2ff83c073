"""``torchx.util.types``: TorchX 0.7's small typing helpers, on tx's implementations."""
from typing import Any, List, Optional, TypeVar

from tx.components.system.decode import decode, is_bool  # noqa: F401
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
