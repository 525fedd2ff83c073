"""Static checks of component functions, as TorchX's ``torchx.specs.file_linter``.

A component is a function that returns :class:`tx.specs.AppDef` and whose parameters can be
given on a command line, so the linter checks, from the source alone (nothing is imported):

1. every parameter (positional, ``*args``, keyword-only) has a type annotation, and
   ``**kwargs`` is not used;
2. the types are ``str``, ``int``, ``float``, ``bool``, ``List[P]`` / ``list[P]``,
   ``Dict[P, P]`` / ``dict[P, P]`` of those primitives ``P``, or ``Optional[...]`` /
   ``... | None`` of any of them;
3. the return annotation is ``AppDef`` (``specs.AppDef``, ``"AppDef"``);
4. a docstring is present and documents every parameter (warnings: the component still
   works, its ``--help`` is just poorer).

Syntax errors and a missing function are reported as messages too.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import attrs

from tx.components.system.decode import annotation_name as _name

__all__ = [
    "ERROR", "get_fn_docstring", "lint_function", "LinterMessage", "NOT_FOUND", "SYNTAX_ERROR",
    "validate", "validate_module", "WARNING",
]

ERROR = "error"
WARNING = "warning"
_PRIMITIVES = frozenset({"str", "int", "float", "bool"})
_LINTER = "TxComponentLinter"
#: ``LinterMessage.name`` of a syntax error (the file cannot be parsed)
SYNTAX_ERROR = "TxSyntaxError"
#: ``LinterMessage.name`` when the function is not defined in the file
NOT_FOUND = "TxFunctionNotFound"
_FuncDef = Union[ast.FunctionDef, ast.AsyncFunctionDef]


@attrs.define
class LinterMessage:
    """One finding of the linter.

    Attributes:
        name: the check that produced it.
        description: what is wrong, in one line.
        line: 1-based line in the file (0: the whole file).
        char: 0-based column.
        severity: ``"error"`` (the function is not a valid component) or ``"warning"``.
    """

    name: str
    description: str
    line: int
    char: int
    severity: str = ERROR

    def __str__(self) -> str:
        return f"{self.line}:{self.char}: {self.severity}: {self.description}"


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{path} is a directory, expected a .py file") from None


def _parse(source: str, path: str) -> Union[ast.Module, LinterMessage]:
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as e:
        return LinterMessage(
            SYNTAX_ERROR, f"syntax error in {path}: {e.msg}", e.lineno or 0, e.offset or 0
        )


def _top_level_functions(tree: ast.Module) -> Dict[str, _FuncDef]:
    """Functions defined at module level (also inside top-level if/try/with blocks)."""
    found: Dict[str, _FuncDef] = {}

    def scan(body: List[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[node.name] = node
            elif isinstance(node, ast.If):
                scan(node.body)
                scan(node.orelse)
            elif isinstance(node, ast.Try):
                for part in (node.body, node.orelse, node.finalbody):
                    scan(part)
                for handler in node.handlers:
                    scan(handler.body)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                scan(node.body)

    scan(tree.body)
    return found


def validate(path: str, function_name: str, docs: bool = True) -> List[LinterMessage]:
    """Lint the component function ``function_name`` defined in the file ``path``.

    Args:
        path: a ``.py`` file.
        function_name: the name of a module-level function in it.
        docs: also check the docstring (warnings only; skipping it spares parsing the
            docstring when only errors matter, as when running a component).

    Returns:
        The findings, errors and warnings; a valid component has no ``"error"`` ones.
        A syntax error or a missing function is one error message.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        IsADirectoryError: ``path`` is a directory.
    """
    tree = _parse(_read(path), path)
    if isinstance(tree, LinterMessage):
        return [tree]
    fn = _top_level_functions(tree).get(function_name)
    if fn is None:
        return [LinterMessage(NOT_FOUND, f"function {function_name!r} not found in {path}", 0, 0)]
    return lint_function(fn, docs)


def validate_module(module_path_or_file: str) -> Dict[str, List[LinterMessage]]:
    """Lint every candidate component of a file or module.

    Candidates are the public (not ``_``-prefixed) module-level functions whose return
    annotation is missing or names AppDef; functions annotated to return something else are
    helpers, not components, and are left out.

    Args:
        module_path_or_file: a ``.py`` file path, or a dotted module name (``pkg.module``)
            whose source is located without importing the module itself.

    Returns:
        function name -> its findings (an empty list for a clean component). A syntax
        error is reported under the key ``""``.

    Raises:
        FileNotFoundError: no such file.
        ModuleNotFoundError: no such module, or it has no Python source.
    """
    path = _locate(module_path_or_file)
    tree = _parse(_read(path), path)
    if isinstance(tree, LinterMessage):
        return {"": [tree]}
    out: Dict[str, List[LinterMessage]] = {}
    for name, fn in _top_level_functions(tree).items():
        if name.startswith("_"):
            continue
        if fn.returns is not None and _return_name(fn.returns) != "AppDef":
            continue
        out[name] = lint_function(fn)
    return out


def _locate(target: str) -> str:
    if target.endswith(".py") or os.sep in target or "/" in target or os.path.isfile(target):
        return target

    try:
        spec = importlib.util.find_spec(target)
    except (ImportError, ValueError) as e:
        raise ModuleNotFoundError(f"cannot locate module {target!r}: {e}") from None
    if spec is None:
        raise ModuleNotFoundError(f"no module named {target!r}")
    origin = spec.origin
    if not origin or not origin.endswith(".py"):
        raise ModuleNotFoundError(f"module {target!r} has no Python source file to lint")
    return origin


def lint_function(fn: _FuncDef, docs: bool = True) -> List[LinterMessage]:
    """Lint one parsed function definition (see the module docstring for the rules);
    ``docs=False`` skips the docstring warnings."""
    msgs: List[LinterMessage] = []
    if isinstance(fn, ast.AsyncFunctionDef):
        msgs.append(LinterMessage(_LINTER, f"component {fn.name!r} must not be async", fn.lineno, fn.col_offset))
    a = fn.args
    params = [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs]
    for arg in params:
        if arg.arg == "help" and arg is not a.vararg:
            msgs.append(LinterMessage(
                _LINTER, f"parameter 'help' of {fn.name!r} clashes with --help: rename it",
                arg.lineno, arg.col_offset,
            ))
        reason = _check_annotation(arg.annotation)
        if reason:
            msgs.append(LinterMessage(
                _LINTER, f"{reason} for argument {arg.arg!r} in function {fn.name!r}",
                arg.lineno, arg.col_offset,
            ))
    if a.kwarg is not None:
        msgs.append(LinterMessage(
            _LINTER,
            f"**{a.kwarg.arg} is not supported in component {fn.name!r}: declare each "
            "parameter, or take a Dict[str, str]",
            a.kwarg.lineno, a.kwarg.col_offset,
        ))
    ret = _return_name(fn.returns) if fn.returns is not None else None
    if ret is None:
        msgs.append(LinterMessage(
            _LINTER, f"function {fn.name!r} has no return annotation: components return AppDef",
            fn.lineno, fn.col_offset,
        ))
    elif ret != "AppDef":
        msgs.append(LinterMessage(
            _LINTER,
            f"function {fn.name!r} is annotated to return {ret!r}: components return AppDef",
            fn.lineno, fn.col_offset,
        ))
    if docs:
        msgs.extend(_docstring_warnings(fn, [p.arg for p in params]))
    return msgs


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _unwrap_optional(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Subscript):
        base = _name(node.value)
        if base == "Optional":
            return node.slice
        if base == "Union" and isinstance(node.slice, ast.Tuple):
            rest = [e for e in node.slice.elts if not _is_none(e)]
            if len(rest) == 1 and len(node.slice.elts) == 2:
                return rest[0]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        if _is_none(node.right):
            return node.left
        if _is_none(node.left):
            return node.right
    return node


def _is_primitive(node: ast.expr) -> bool:
    return isinstance(node, (ast.Name, ast.Attribute)) and _name(node) in _PRIMITIVES


def _check_annotation(node: Optional[ast.expr]) -> Optional[str]:
    """None when ``node`` is a supported parameter annotation, else the reason it is not."""
    if node is None:
        return "missing type annotation"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return f"unparsable annotation {node.value!r}"
    node = _unwrap_optional(node)
    if _is_primitive(node):
        return None
    if isinstance(node, ast.Subscript):
        base = _name(node.value)
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base in ("List", "list"):
            if len(elts) == 1 and _is_primitive(elts[0]):
                return None
            return f"non-primitive list element type {ast.unparse(node.slice)!r}"
        if base in ("Dict", "dict"):
            if len(elts) != 2:
                return f"malformed dict type {ast.unparse(node)!r} (expected Dict[K, V])"
            for part, what in zip(elts, ("key", "value")):
                if not _is_primitive(part):
                    return f"non-primitive dict {what} type {ast.unparse(part)!r}"
            return None
        return f"unsupported container type {ast.unparse(node)!r}"
    return (
        f"unsupported type {ast.unparse(node)!r} (use str, int, float, bool, List[...], "
        "Dict[..., ...] or Optional[...] of them)"
    )


def _return_name(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.rpartition(".")[2].strip()
    name = _name(node)
    return name or ast.unparse(node)


def _docstring_warnings(fn: _FuncDef, params: List[str]) -> List[LinterMessage]:
    doc = ast.get_docstring(fn)
    if not doc:
        return [LinterMessage(
            _LINTER,
            f"function {fn.name!r} has no docstring: add a Google-style docstring "
            "(a description and an Args: section) so that --help explains it",
            fn.lineno, fn.col_offset, WARNING,
        )]
    documented = set(_parse_docstring(doc)[1])
    return [
        LinterMessage(
            _LINTER, f"argument {p!r} of {fn.name!r} is not documented in the docstring's Args:",
            fn.lineno, fn.col_offset, WARNING,
        )
        for p in params
        if p not in documented
    ]


def _parse_docstring(doc: str) -> Tuple[str, Dict[str, str]]:
    import docstring_parser  # deferred: docstring_parser only to read a docstring

    try:
        parsed = docstring_parser.parse(doc, style=docstring_parser.DocstringStyle.GOOGLE)
    except docstring_parser.ParseError:
        try:
            parsed = docstring_parser.parse(doc)
        except docstring_parser.ParseError:
            return doc.strip(), {}
    desc = parsed.short_description or ""
    if parsed.long_description:
        sep = "\n\n" if parsed.blank_after_short_description else "\n"
        desc = f"{desc}{sep}{parsed.long_description}" if desc else parsed.long_description
    args = {
        p.arg_name: " ".join((p.description or "").split())
        for p in parsed.params
    }
    return desc, args


def get_fn_docstring(fn: Callable[..., Any]) -> Tuple[str, Dict[str, str]]:
    """The description of ``fn`` and the help of each parameter, from its Google-style
    docstring (parsed with ``docstring_parser``).

    Returns:
        ``(description, {param: help})``. Without a docstring the description is a tip on
        adding one; every parameter of ``fn`` has an entry (``""`` when undocumented).
    """
    params = list(inspect.signature(fn).parameters)
    doc = inspect.getdoc(fn)
    tip = (
        f"{fn.__name__} (TIP: improve this help string by adding a Google-style docstring "
        "to the component)"
    )
    if not doc:
        return tip, {p: "" for p in params}
    desc, args = _parse_docstring(doc)
    return desc or tip, {p: args.get(p, "") for p in params}
