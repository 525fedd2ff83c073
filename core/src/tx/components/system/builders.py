"""Component function -> command line -> AppDef (TorchX's ``torchx.specs.builders``).

A component function's signature and Google-style docstring become an argparse parser:

* each parameter ``p`` is an option ``--p`` (one-letter parameters also get ``-p``, so a
  component may take ``-h``: the parser has no ``-h`` of its own, only ``--help``);
* ``*args`` is a positional that takes the rest of the command line (a leading ``--`` is
  dropped, so ``... --script t.py -- --lr 0.1`` passes ``--lr 0.1`` to the program);
* a parameter without a default is required, unless ``defaults`` (e.g. the
  ``[component:NAME]`` section of ``.txconfig``) gives one; ``defaults`` also override the
  declared defaults;
* help lines end with ``(required)`` or ``(default: X)``;
* a ``bool`` option takes ``true``/``false`` or nothing (``--debug`` = ``--debug true``);
* an unambiguous prefix names an option (``--mount`` for ``--mounts``), as in TorchX; an
  ambiguous one is an error naming the candidates.

Values are decoded by type (see :func:`tx.components.system.decode.decode`): ``List[T]`` from
``a,b,c``, ``Dict[K, V]`` from ``K=V,K2=V2``, ``Optional[X]`` and ``X | None`` unwrapped.

Errors never exit the process: a bad command line, a bad value, or a ``ValueError`` /
``TypeError`` / ``KeyError`` raised by the component raise :class:`ComponentArgumentError`
with a one-line message that starts with the component name.
"""
from __future__ import annotations

import argparse
import difflib
import inspect
import os
import re
import shlex
import sys
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Sequence, Union

import attrs

from tx.components.system.decode import (
    DecodeError,
    container_of,
    decode,
    is_bool,
    resolve_annotations,
    type_name,
    unwrap_optional,
)
from tx.components.system.errors import (
    ComponentArgumentError,
    ComponentValidationException,
    one_line,
)
from tx.components.system.file_linter import get_fn_docstring
from tx.log import get_logger
from tx.specs.api import AppDef

__all__ = [
    "ComponentArgs",
    "ComponentArgumentError",
    "component_args_from_dict",
    "component_args_from_str",
    "create_args_parser",
    "materialize_appdef",
    "materialize_appdef_from_dict",
]

_VAR = inspect.Parameter.VAR_POSITIONAL
_KW = inspect.Parameter.VAR_KEYWORD
_KWONLY = inspect.Parameter.KEYWORD_ONLY
#: help of an undocumented parameter: argparse omits blank help, and with it the
#: "(required)" / "(default: X)" suffix; the formatter removes this placeholder
_NO_HELP = "\u200b"


@attrs.frozen
class ComponentArgs:
    """The decoded arguments of a component function, ready to call it.

    Attributes:
        positional_args: positional(-or-keyword) parameters in declaration order.
        var_args: the ``*args`` values.
        kwargs: the keyword-only parameters.
    """

    positional_args: Dict[str, Any]
    var_args: List[Any]
    kwargs: Dict[str, Any]

    def call(self, fn: Callable[..., Any]) -> Any:
        """Call ``fn(*positional_args.values(), *var_args, **kwargs)`` and return its result."""
        return fn(*self.positional_args.values(), *self.var_args, **self.kwargs)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(required)`` or ``(default: X)`` to each option's help."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: Optional[int] = None) -> None:
        if width is None:  # argparse's default width imports shutil (zlib, bz2, lzma: ~3 ms) on every run
            try:
                width = int(os.environ["COLUMNS"])
            except (KeyError, ValueError):
                width = 0
            if width <= 0:
                try:
                    width = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
                except (AttributeError, ValueError, OSError):
                    width = 0
            width = (width or 80) - 2
        super().__init__(prog, indent_increment, max_help_position, width)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = (action.help or "").replace(_NO_HELP, "").strip()
        if action.default is argparse.SUPPRESS or action.nargs == argparse.REMAINDER:
            return text
        if action.required:
            return f"{text} (required)".strip()
        if action.default is None or re.search(r"\bdefaults? (to|is)\b|\(default", text):
            return text  # nothing to say, or the help says it in words
        return f"{text} (default: {action.default})".strip()


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise instead of exiting, and whose help texts come
    from the component's docstring when help is first formatted (parsing the docstring
    costs an import of docstring_parser that runs without --help do not need)."""

    component = ""
    component_fn: Optional[Callable[..., Any]] = None

    def format_help(self) -> str:
        fn, self.component_fn = self.component_fn, None
        if fn is not None:
            self.description, helps = get_fn_docstring(fn)
            for action in self._actions:
                if action.help is None:
                    action.help = helps.get(action.dest) or _NO_HELP
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments"):
            message += self._did_you_mean(message[len("unrecognized arguments:"):].split())
        elif message.startswith("argument -h/--h: expected one argument"):
            message += (" (-h is this component's h argument, the named resource of a node as in TorchX, "
                        f"e.g. -h gpu.small; for help: tx run {self.component} --help)")
        elif message.startswith("ambiguous option"):
            message += " (write more of the option's name)"
        raise ComponentArgumentError(message, self.component)

    def _did_you_mean(self, unknown: List[str]) -> str:
        """`` (did you mean --msg?)`` for the first unknown option close to one of the
        component's, else where the program's own arguments go."""
        names = [o[2:] for a in self._actions for o in a.option_strings if o.startswith("--")]
        for word in unknown:
            if word.startswith("-"):
                close = difflib.get_close_matches(word.lstrip("-").split("=", 1)[0], names, n=1, cutoff=0.6)
                if close:
                    return f" (did you mean --{close[0]}?)"
        return " (put the program's own arguments after --)"


def _name_of(fn: Callable[..., Any], name: Optional[str]) -> str:
    return name or getattr(fn, "__name__", "component")


def _parameters(fn: Callable[..., Any], name: str) -> Mapping[str, inspect.Parameter]:
    params = inspect.signature(fn).parameters
    for p in params.values():
        if p.name == "help" and p.kind is not _VAR:
            raise ComponentValidationException(
                f"component {name}: a parameter cannot be named 'help' (it clashes with --help)"
            )
        if p.kind is _KW:
            raise ComponentValidationException(
                f"component {name}: **{p.name} is not supported; declare each parameter "
                "or take a Dict[str, str]"
            )
    return params


def _metavar(tp: Any) -> str:

    kind, args = container_of(unwrap_optional(tp)[0])
    if kind is list:
        return f"{type_name(args[0])},..."
    if kind is dict:
        return "KEY=VALUE,..."
    return type_name(tp)


def create_args_parser(
    fn: Callable[..., Any],
    defaults: Optional[Mapping[str, Any]] = None,
    name: Optional[str] = None,
) -> argparse.ArgumentParser:
    """Build the argparse parser of component ``fn`` (see the module docstring).

    Args:
        fn: the component function.
        defaults: parameter name -> default (usually strings from ``.txconfig``); they
            override the declared defaults and make a parameter optional.
        name: the component name shown in usage and error messages (default: fn's name).

    Returns:
        A parser whose ``parse_args`` raises :class:`ComponentArgumentError` on bad input
        and, for ``--help``, prints the help to stdout and raises ``SystemExit(0)``.
        Parsed values are raw strings (or the defaults); :func:`component_args_from_str`
        decodes them.

    Raises:
        ComponentValidationException: ``fn`` takes ``**kwargs``.
    """

    cname = _name_of(fn, name)
    params = _parameters(fn, cname)
    types = resolve_annotations(fn)
    defaults = dict(defaults or {})
    parser = _Parser(
        prog=f"tx run <run args...> {cname}",
        formatter_class=_HelpFormatter,
        add_help=False,
        allow_abbrev=True,  # `--mount` for `--mounts`, as TorchX's component parser accepts
    )
    parser.component = cname
    parser.component_fn = fn  # help texts are filled in by format_help
    parser.add_argument(
        "--help", action="help", default=argparse.SUPPRESS, help="show this help message and exit"
    )
    for pname, p in params.items():
        kwargs: Dict[str, Any] = {"help": None}
        if p.kind is _VAR:
            parser.add_argument(pname, nargs=argparse.REMAINDER, **kwargs)
            continue
        default = defaults.get(pname, p.default)
        if default is inspect.Parameter.empty:
            kwargs["required"] = True
        else:
            kwargs["default"] = default
        if is_bool(types[pname]):
            kwargs.update(nargs="?", const="true", metavar="true|false")
        else:
            kwargs["metavar"] = _metavar(types[pname])
        flags = [f"-{pname}", f"--{pname}"] if len(pname) == 1 else [f"--{pname}"]
        parser.add_argument(*flags, dest=pname, **kwargs)
    return parser


def _flag(pname: str) -> str:
    return f"-{pname}/--{pname}" if len(pname) == 1 else f"--{pname}"


def _decode_param(label: str, value: Any, tp: Any, cname: str) -> Any:

    try:
        return decode(value, tp)
    except DecodeError as e:
        raise ComponentArgumentError(f"argument {label}: {e}", cname) from None


def _assemble(
    fn: Callable[..., Any], values: Mapping[str, Any], cname: str,
    params: Optional[Mapping[str, inspect.Parameter]] = None, types: Optional[Mapping[str, Any]] = None,
) -> ComponentArgs:
    """Decode ``values`` (param -> raw value) into a :class:`ComponentArgs` (``params``,
    ``types``: fn's, where already read)."""

    params = _parameters(fn, cname) if params is None else params
    types = resolve_annotations(fn) if types is None else types
    positional: Dict[str, Any] = {}
    var_args: List[Any] = []
    kwargs: Dict[str, Any] = {}
    for pname, p in params.items():
        raw = values.get(pname)
        if p.kind is _VAR:
            items: Sequence[Any] = raw or []
            if isinstance(items, str):
                items = shlex.split(items)
            items = list(items)
            if items and items[0] == "--":
                items = items[1:]
            var_args = [_decode_param(pname, v, types[pname], cname) for v in items]
        elif p.kind is _KWONLY:
            kwargs[pname] = _decode_param(_flag(pname), raw, types[pname], cname)
        else:
            positional[pname] = _decode_param(_flag(pname), raw, types[pname], cname)
    return ComponentArgs(positional, var_args, kwargs)


def _var_default(params: Mapping[str, inspect.Parameter], defaults: Mapping[str, Any]) -> Dict[str, Any]:
    return {p.name: defaults[p.name] for p in params.values() if p.kind is _VAR and p.name in defaults}


def _warn_unknown_defaults(params: Mapping[str, inspect.Parameter], defaults: Mapping[str, Any], cname: str) -> None:
    unknown = sorted(set(defaults) - set(params))
    if unknown:
        get_logger(__name__).warning(
            "unknown_component_defaults", component=cname, ignored=unknown, known=sorted(params)
        )


def component_args_from_str(
    fn: Callable[..., Any],
    args: Sequence[str],
    defaults: Optional[Mapping[str, Any]] = None,
    *,
    name: Optional[str] = None,
) -> ComponentArgs:
    """Parse and decode a component's command line.

    Args:
        fn: the component function.
        args: the arguments after the component name, e.g. ``["-j", "2x4", "--script", "t.py"]``.
        defaults: parameter -> default overriding the declared ones (strings are decoded
            like command-line values; for ``*args`` a string is split shell-style and used
            when no positional arguments are given). Unknown names are logged and ignored.
        name: the component name for messages (default: fn's name).

    Returns:
        The decoded arguments.

    Raises:
        ComponentArgumentError: a missing, unknown or malformed argument.
        SystemExit: ``--help`` was given (status 0, help printed to stdout).
    """
    cname = _name_of(fn, name)
    defaults = dict(defaults or {})
    params = _parameters(fn, cname)
    _warn_unknown_defaults(params, defaults, cname)
    parser = create_args_parser(fn, defaults, cname)
    ns = vars(parser.parse_args(list(args)))
    for pname, value in _var_default(params, defaults).items():
        if not ns.get(pname):
            ns[pname] = value
    return _assemble(fn, ns, cname)


def component_maker(
    fn: Callable[..., Any],
    defaults: Optional[Mapping[str, Any]] = None,
    *,
    name: Optional[str] = None,
) -> Callable[[Sequence[str]], AppDef]:
    """:func:`materialize_appdef` of many command lines of one component (a sweep's
    trials): the signature, annotations and parser are read once, not once per call
    (at 10,000 trials they were most of a sweep's dryrun).

    Returns:
        A function of the command-line arguments returning the AppDef; it raises as
        :func:`materialize_appdef`.

    Raises:
        ComponentValidationException: ``fn`` takes ``**kwargs``.
    """
    cname = _name_of(fn, name)
    defaults = dict(defaults or {})
    params = _parameters(fn, cname)
    _warn_unknown_defaults(params, defaults, cname)
    types = resolve_annotations(fn)
    parser = create_args_parser(fn, defaults, cname)
    var_defaults = _var_default(params, defaults)

    def make(args: Sequence[str]) -> AppDef:
        if isinstance(args, str):
            raise TypeError("args must be a list of strings, not one string")
        ns = vars(parser.parse_args(list(args)))
        for pname, value in var_defaults.items():
            if not ns.get(pname):
                ns[pname] = value
        return _call(fn, _assemble(fn, ns, cname, params, types), cname)

    return make


def component_args_from_dict(
    fn: Callable[..., Any],
    args: Mapping[str, Any],
    defaults: Optional[Mapping[str, Any]] = None,
    *,
    name: Optional[str] = None,
) -> ComponentArgs:
    """Decode a JSON-style dict of component arguments (the API form of a command line).

    Values may be typed (``{"j": "2x4", "cpu": 4, "env": {"A": "1"}, "debug": True}``) or
    strings as on the command line (``{"cpu": "4", "env": "A=1"}``); the ``*args``
    parameter takes a list of strings (or one string, split shell-style).

    Args:
        fn: the component function.
        args: parameter name -> value.
        defaults: as for :func:`component_args_from_str`.
        name: the component name for messages (default: fn's name).

    Returns:
        The decoded arguments.

    Raises:
        ComponentArgumentError: an unknown parameter, a missing required one, or a value
            that does not fit its type.
    """
    cname = _name_of(fn, name)
    defaults = dict(defaults or {})
    params = _parameters(fn, cname)
    _warn_unknown_defaults(params, defaults, cname)
    unknown = sorted(set(args) - set(params))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(params), n=1)
        hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(params)}"
        raise ComponentArgumentError(f"unknown argument(s): {', '.join(unknown)} ({hint})", cname)
    values: Dict[str, Any] = {}
    missing: List[str] = []
    for pname, p in params.items():
        if pname in args:
            values[pname] = args[pname]
        elif pname in defaults:
            values[pname] = defaults[pname]
        elif p.kind is _VAR:
            values[pname] = []
        elif p.default is inspect.Parameter.empty:
            missing.append(_flag(pname))
        else:
            values[pname] = p.default
    if missing:
        raise ComponentArgumentError(
            f"the following arguments are required: {', '.join(missing)}", cname
        )
    return _assemble(fn, values, cname)


def materialize_appdef(
    fn: Callable[..., Any],
    args: Union[Sequence[str], Mapping[str, Any]],
    defaults: Optional[Mapping[str, Any]] = None,
    *,
    name: Optional[str] = None,
) -> AppDef:
    """Call component ``fn`` with its command line (or dict of args) and return its AppDef.

    Args:
        fn: the component function.
        args: the command-line arguments after the component name, or a dict of
            arguments (see :func:`component_args_from_dict`).
        defaults: parameter -> default overriding the declared defaults (the
            ``[component:NAME]`` section of ``.txconfig``); explicit ``args`` win.
        name: the component name used in messages, e.g. ``"dist.ddp"`` (default: fn's name).

    Returns:
        The AppDef the component built.

    Raises:
        ComponentArgumentError: bad arguments, or the component rejected a value (it
            raised ValueError, TypeError or KeyError); the message is one line.
        ComponentValidationException: the component did not return an AppDef, or takes
            ``**kwargs``.
        SystemExit: ``--help`` was given (status 0, help printed to stdout).
    """
    cname = _name_of(fn, name)
    if isinstance(args, Mapping):
        cargs = component_args_from_dict(fn, args, defaults, name=cname)
    else:
        if isinstance(args, str):
            raise TypeError("args must be a list of strings (or a dict), not one string")
        cargs = component_args_from_str(fn, args, defaults, name=cname)
    return _call(fn, cargs, cname)


def _call(fn: Callable[..., Any], cargs: ComponentArgs, cname: str) -> AppDef:
    """``fn`` called with ``cargs``; raises as :func:`materialize_appdef`."""
    try:
        app = cargs.call(fn)
    except KeyError as e:
        raise ComponentArgumentError(str(e.args[0]) if e.args else repr(e), cname) from e
    except (ValueError, TypeError) as e:
        raise ComponentArgumentError(one_line(e) or type(e).__name__, cname) from e
    if not isinstance(app, AppDef):
        raise ComponentValidationException(
            f"component {cname} returned {type(app).__name__}, expected tx.specs.AppDef"
        )
    return app


def materialize_appdef_from_dict(
    fn: Callable[..., Any],
    args: Mapping[str, Any],
    defaults: Optional[Mapping[str, Any]] = None,
    *,
    name: Optional[str] = None,
) -> AppDef:
    """:func:`materialize_appdef` with a JSON-style dict of arguments (the API form,
    e.g. ``{"script": "train.py", "j": "2x4", "script_args": ["--lr", "0.1"]}``).

    Raises:
        ComponentArgumentError: an unknown or missing argument, a bad value, or the
            component rejected a value.
        ComponentValidationException: the component did not return an AppDef.
    """
    return materialize_appdef(fn, dict(args), defaults, name=name)
