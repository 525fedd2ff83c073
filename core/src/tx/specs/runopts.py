"""Scheduler run options: :class:`runopts`, :class:`runopt` and the ``k=v,...`` syntax.

Semantics follow TorchX's ``torchx.specs.runopts``: an option has a type (str, int, float,
bool, ``List[str]``, ``Dict[str, str]``), a default and a help text; :meth:`runopts.resolve`
checks a config against them; :meth:`runopts.cfg_from_str` parses the ``-cfg`` string.
"""
from __future__ import annotations

import difflib
import math
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

import attrs

from tx.specs.api import InvalidRunConfigException

__all__ = ["CfgVal", "get_type_name", "is_type", "markdown_table", "runopt", "runopts", "to_dict"]

CfgVal = Union[str, int, float, bool, List[str], Dict[str, str], None]

_LIST = List[str]
_DICT = Dict[str, str]


def get_type_name(tp: Any) -> str:
    """Printable name of an option type: ``str``, ``int``, ``List[str]``, ``Dict[str, str]``."""
    if tp in (_LIST, list):
        return "List[str]"
    if tp in (_DICT, dict):
        return "Dict[str, str]"
    return getattr(tp, "__name__", str(tp))


def _is_list_type(tp: Any) -> bool:
    return tp in (_LIST, list) or getattr(tp, "__origin__", None) is list


def _is_dict_type(tp: Any) -> bool:
    return tp in (_DICT, dict) or getattr(tp, "__origin__", None) is dict


def is_type(obj: CfgVal, tp: Any) -> bool:
    """True if ``obj`` is a value of option type ``tp`` (a bool is not an int here)."""
    if _is_list_type(tp):
        return isinstance(obj, list) and all(isinstance(x, str) for x in obj)
    if _is_dict_type(tp):
        return isinstance(obj, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in obj.items()
        )
    if tp is int:
        return isinstance(obj, int) and not isinstance(obj, bool)
    if tp is float:
        return isinstance(obj, (int, float)) and not isinstance(obj, bool)
    return isinstance(obj, tp)


@attrs.frozen
class runopt:
    """One run option: its default, type, whether it is required, and its help text."""

    default: CfgVal
    opt_type: Any
    is_required: bool
    help: str

    @property
    def is_type_list_of_str(self) -> bool:
        return _is_list_type(self.opt_type)

    @property
    def is_type_dict_of_str(self) -> bool:
        return _is_dict_type(self.opt_type)

    def cast_to_type(self, value: str) -> CfgVal:
        """Parse a string into this option's type.

        ``bool``: ``true``/``false`` (any case; also 1/0, yes/no); ``List[str]``: split on
        ``,`` or ``;`` (empty items dropped); ``Dict[str, str]``: ``k:v`` pairs split on ``,``
        or ``;``; ``''`` or ``""``: the empty string.

        Raises:
            ValueError: the string is not a value of the type.
        """
        if value in ("''", '""'):
            value = ""
        tp = self.opt_type
        if tp is bool:
            low = value.strip().lower()
            if low in ("true", "1", "yes", "on"):
                return True
            if low in ("false", "0", "no", "off", ""):
                return False
            raise ValueError(f"expected true or false, got {value!r}")
        if self.is_type_list_of_str:
            return [v for v in _split(value) if v]
        if self.is_type_dict_of_str:
            out: Dict[str, str] = {}
            for item in _split(value):
                if not item:
                    continue
                k, sep, v = item.partition(":")
                if not sep:
                    raise ValueError(f"expected key:value pairs, got {item!r}")
                out[k.strip()] = v
            return out
        if tp is int:
            return int(value)
        if tp is float:
            return float(value)
        return tp(value)


def _split(value: str) -> List[str]:
    return [p.strip() for p in value.replace(";", ",").split(",")]


def to_dict(arg: str, unique: bool = False) -> Dict[str, str]:
    """Split ``k1=v1,k2=v2`` into a dict of strings, TorchX's way.

    A value may itself hold ``,`` or ``;`` (lists: ``FOO=a,b,BAR=c`` gives
    ``{"FOO": "a,b", "BAR": "c"}``): the delimiter between two pairs is the last ``,``
    or ``;`` before the next ``key=``. ``''`` and ``""`` are empty strings.

    Raises:
        ValueError: a pair without ``=``; with ``unique``, a key given twice (else the last wins).
    """
    arg = arg.strip()
    if not arg:
        return {}
    parts = arg.split("=")
    if len(parts) < 2:
        raise ValueError(f"expected key=value, got {arg!r}")
    out: Dict[str, str] = {}
    key = parts[0].strip()
    for i, part in enumerate(parts[1:], start=1):
        if i == len(parts) - 1:
            val, nxt = part, ""
        else:
            cut = max(part.rfind(","), part.rfind(";"))
            if cut < 0:
                raise ValueError(f"expected key=value pairs separated by ',', got {arg!r}")
            val, nxt = part[:cut], part[cut + 1 :]
        if not key:
            raise ValueError(f"empty key in {arg!r}")
        if unique and key in out:
            raise ValueError(f"{key!r} is given twice")
        val = val.strip()
        if val in ("''", '""'):
            val = ""
        out[key] = val
        key = nxt.strip()
    return out


class runopts:
    """The run options a scheduler accepts.

    >>> opts = runopts()
    >>> opts.add("queue", type_=str, help="job queue", required=True)
    >>> opts.resolve({"queue": "default"})
    {'queue': 'default'}
    """

    def __init__(self) -> None:
        self._opts: Dict[str, runopt] = {}
        self._explained: Dict[str, str] = {}

    @staticmethod
    def is_type(obj: CfgVal, tp: Any) -> bool:
        """TorchX's ``runopts.is_type``: True if ``obj`` is a value of option type ``tp``
        (see the module-level :func:`is_type`)."""
        return is_type(obj, tp)

    def __iter__(self) -> Iterator[Tuple[str, runopt]]:
        return iter(self._opts.items())

    def __len__(self) -> int:
        return len(self._opts)

    def __contains__(self, name: str) -> bool:
        return name in self._opts

    def add(
        self,
        cfg_key: str,
        type_: Any,
        help: str,
        default: CfgVal = None,
        required: bool = False,
    ) -> None:
        """Add an option.

        An empty list as the default of a ``Dict[str, str]`` option is taken as ``{}``:
        TorchX 0.7.0 accepts it (its type check lets any list of strings pass for a
        generic type) and schedulers written for it declare ``default=[]``.

        Raises:
            ValueError: ``required`` with a default.
            TypeError: a default that is not of ``type_``.
        """
        if default == [] and _is_dict_type(type_):
            default = {}
        if required and default is not None:
            raise ValueError(f"required option {cfg_key!r} cannot have a default")
        if default is not None and not is_type(default, type_):
            raise TypeError(
                f"default {default!r} of option {cfg_key!r} is not of type {get_type_name(type_)}"
            )
        self._opts[cfg_key] = runopt(default, type_, required, help)

    def get(self, name: str) -> Optional[runopt]:
        return self._opts.get(name)

    def update(self, other: "runopts") -> None:
        self._opts.update(other._opts)
        self._explained.update(other._explained)

    def explain(self, key: str, text: str) -> None:
        """Say what to do instead when ``key``, which is not an option, is given (a key
        users bring from TorchX or from the backend's own tools): the error or warning
        about it ends with `` (text)``."""
        self._explained[key] = text

    def suggest(self, key: str) -> str:
        """`` (text)`` for a key :meth:`explain` knows, `` (did you mean 'x'?)`` for a
        misspelt key, else an empty string."""
        if key in self._explained:
            return f" ({self._explained[key]})"
        close = difflib.get_close_matches(key, list(self._opts), n=1)
        return f" (did you mean {close[0]!r}?)" if close else ""

    def resolve(self, cfg: Optional[Mapping[str, CfgVal]]) -> Dict[str, CfgVal]:
        """Check ``cfg`` and return a copy with defaults filled in.

        Keys that are not options of this scheduler are kept as given (a ``.txconfig``
        may set options for several versions of a plugin); the CLI rejects them earlier.

        Raises:
            InvalidRunConfigException: a required option is missing or a value has the
                wrong type.
        """
        resolved: Dict[str, CfgVal] = dict(cfg or {})
        for key, opt in self._opts.items():
            val = resolved.get(key)
            if val is None:
                if opt.is_required:
                    raise InvalidRunConfigException(
                        f"required run option {key!r} ({get_type_name(opt.opt_type)}) is missing: {opt.help}",
                        key,
                        cfg,
                    )
                resolved[key] = opt.default
            elif not is_type(val, opt.opt_type):
                raise InvalidRunConfigException(
                    f"run option {key!r} must be {get_type_name(opt.opt_type)}, got "
                    f"{type(val).__name__} {val!r}",
                    key,
                    cfg,
                )
            elif opt.opt_type is float and not math.isfinite(float(val)):  # type: ignore[arg-type]
                # nan and inf are never a duration, size or rate a backend can honour
                raise InvalidRunConfigException(
                    f"run option {key!r} must be a finite number, got {val!r}", key, cfg
                )
        return resolved

    def cfg_from_str(self, cfg_str: str, strict: bool = True) -> Dict[str, CfgVal]:
        """Parse ``-cfg`` text (``k1=v1,k2=v2``, see :func:`to_dict`) into typed values.

        Args:
            cfg_str: the text; lists as ``k=a,b`` or ``k=a;b``, dicts as ``k=a:1;b:2``.
            strict: reject keys that are not options (TorchX 0.7 drops them silently).

        Raises:
            InvalidRunConfigException: malformed text, an unknown key (with ``strict``) or
                a value that does not parse as its option's type.
        """
        try:
            pairs = to_dict(cfg_str, unique=True)
        except ValueError as e:
            raise InvalidRunConfigException(f"bad run config {cfg_str!r}: {e}", "", cfg_str) from None
        cfg: Dict[str, CfgVal] = {}
        for key, val in pairs.items():
            opt = self._opts.get(key)
            if opt is None:
                if strict:
                    known = ", ".join(self._opts) or "none"
                    raise InvalidRunConfigException(
                        f"unknown run option {key!r}{self.suggest(key)}; options: {known}",
                        key,
                        cfg_str,
                    )
                continue
            try:
                cfg[key] = opt.cast_to_type(val)
            except ValueError as e:
                raise InvalidRunConfigException(
                    f"run option {key!r} must be {get_type_name(opt.opt_type)}: {e}", key, cfg_str
                ) from None
        return cfg

    def __repr__(self) -> str:
        required = [(k, o) for k, o in self._opts.items() if o.is_required]
        optional = [(k, o) for k, o in self._opts.items() if not o.is_required]
        usage = ",".join(
            [f"{k}={k.upper()}" for k, _ in required] + [f"[{k}={k.upper()}]" for k, _ in optional]
        )
        out = [f"    usage:\n        {usage}\n"]

        def section(title: str, items: List[Tuple[str, runopt]]) -> None:
            if not items:
                return
            out.append(f"    {title}:")
            for k, o in items:
                default = "" if o.is_required else f", {o.default!r}"
                out.append(f"        {k}={k.upper()} ({get_type_name(o.opt_type)}{default})")
                out.append(f"            {o.help}")
            out.append("")

        section("required arguments", required)
        section("optional arguments", optional)
        return "\n".join(out)


def markdown_table(opts: runopts) -> str:
    """``opts`` as the Markdown table of a scheduler's README: one row per option (``option``,
    ``type``, ``default`` as its ``repr``, ``description``: the help, `` (required)`` after
    a required option's), in the order they were added; ends with a newline."""
    rows = ["| option | type | default | description |", "| --- | --- | --- | --- |"]
    for key, opt in opts:
        req = " (required)" if opt.is_required else ""
        rows.append(f"| `{key}` | {get_type_name(opt.opt_type)} | {opt.default!r} | {opt.help}{req} |")
    return "\n".join(rows) + "\n"
