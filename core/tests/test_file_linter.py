"""tx.components.system.file_linter: static checks of component functions."""
import pytest

from tx.components.system import file_linter
from tx.components.system.file_linter import ERROR, NOT_FOUND, SYNTAX_ERROR, WARNING, get_fn_docstring, validate, validate_module

SOURCE = '''
from typing import Dict, List, Optional, Union
import typing
import tx.specs as specs
from tx.specs import AppDef


def good(
    a: str,
    b: int,
    *args: str,
    c: float = 1.0,
    d: bool = False,
    e: Optional[str] = None,
    f: List[int] = [],
    g: Dict[str, str] = {},
    h: Optional[Dict[str, float]] = None,
    i: typing.Optional[typing.List[bool]] = None,
    j: "Optional[int]" = None,
    k: Union[str, None] = None,
) -> specs.AppDef:
    """Good component.

    Args:
        a: a
        b: b
        args: args
        c: c
        d: d
        e: e
        f: f
        g: g
        h: h
        i: i
        j: j
        k: k
    """


def pep604(a: int | None = None, b: list[str] | None = None, c: None | dict[str, int] = None) -> AppDef:
    """PEP 604.

    Args:
        a: a
        b: b
        c: c
    """


def quoted_return(a: str) -> "AppDef":
    """Quoted.

    Args:
        a: a
    """


def no_doc(a: str) -> AppDef:
    pass


def partly_documented(a: str, b: str) -> AppDef:
    """Only a.

    Args:
        a: a
    """


def missing_annotation(a, *rest, b: int = 1) -> AppDef:
    """Doc.

    Args:
        a: a
        rest: rest
        b: b
    """


def bad_types(
    a: object,
    b: List[List[str]],
    c: Dict[str, List[str]],
    d: Dict[str],
    e: typing.Tuple[int, int],
    f: list,
    g: Optional[object] = None,
    h: Union[int, str] = 1,
) -> AppDef:
    """Doc.

    Args:
        a: a
        b: b
        c: c
        d: d
        e: e
        f: f
        g: g
        h: h
    """


def kwargs_fn(a: str, **kw: str) -> AppDef:
    """Doc.

    Args:
        a: a
        kw: kw
    """


def help_param(help: str) -> AppDef:
    """Doc.

    Args:
        help: h
    """


def no_return(a: str):
    """Doc.

    Args:
        a: a
    """


def wrong_return(a: str) -> specs.Role:
    """Doc.

    Args:
        a: a
    """


async def async_fn(a: str) -> AppDef:
    """Doc.

    Args:
        a: a
    """


def _private(a: str) -> AppDef:
    """Doc."""


def helper(x: int) -> int:
    return x


if True:
    def conditional(a: str) -> AppDef:
        """Conditional.

        Args:
            a: a
        """
'''


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "comps.py"
    p.write_text(SOURCE)
    return str(p)


def errors(msgs):
    return [m.description for m in msgs if m.severity == ERROR]


def warnings_(msgs):
    return [m.description for m in msgs if m.severity == WARNING]


@pytest.mark.parametrize("fn", ["good", "pep604", "quoted_return", "conditional"])
def test_valid(path, fn):
    assert validate(path, fn) == []


def test_docstring_warnings(path):
    msgs = validate(path, "no_doc")
    assert errors(msgs) == []
    assert warnings_(msgs) == ["function 'no_doc' has no docstring: add a Google-style docstring "
                               "(a description and an Args: section) so that --help explains it"]
    assert warnings_(validate(path, "partly_documented")) == [
        "argument 'b' of 'partly_documented' is not documented in the docstring's Args:"
    ]


def test_missing_annotations(path):
    msgs = validate(path, "missing_annotation")
    assert errors(msgs) == [
        "missing type annotation for argument 'a' in function 'missing_annotation'",
        "missing type annotation for argument 'rest' in function 'missing_annotation'",
    ]
    assert msgs[0].line == SOURCE.splitlines().index("def missing_annotation(a, *rest, b: int = 1) -> AppDef:") + 1


def test_bad_types(path):
    errs = errors(validate(path, "bad_types"))
    assert len(errs) == 8
    assert errs[0].startswith("unsupported type 'object'")
    assert errs[1] == "non-primitive list element type 'List[str]' for argument 'b' in function 'bad_types'"
    assert errs[2] == "non-primitive dict value type 'List[str]' for argument 'c' in function 'bad_types'"
    assert errs[3].startswith("malformed dict type 'Dict[str]'")
    assert errs[4].startswith("unsupported container type 'typing.Tuple[int, int]'")
    assert errs[5].startswith("unsupported type 'list'")
    assert errs[6].startswith("unsupported type 'object'")
    assert errs[7].startswith("unsupported container type 'Union[int, str]'")


def test_kwargs_and_returns(path):
    assert errors(validate(path, "kwargs_fn")) == [
        "**kw is not supported in component 'kwargs_fn': declare each parameter, or take a Dict[str, str]"
    ]
    assert errors(validate(path, "no_return")) == [
        "function 'no_return' has no return annotation: components return AppDef"
    ]
    assert errors(validate(path, "wrong_return")) == [
        "function 'wrong_return' is annotated to return 'Role': components return AppDef"
    ]
    assert errors(validate(path, "async_fn")) == ["component 'async_fn' must not be async"]
    assert errors(validate(path, "help_param")) == ["parameter 'help' of 'help_param' clashes with --help: rename it"]


def test_not_found_and_syntax_error(tmp_path, path):
    (msg,) = validate(path, "nope")
    assert (msg.name, msg.severity) == (NOT_FOUND, ERROR)
    assert msg.description == f"function 'nope' not found in {path}"
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n    pass\n")
    (msg,) = validate(str(bad), "f")
    assert msg.name == SYNTAX_ERROR and msg.line == 1 and "syntax error" in msg.description
    assert validate_module(str(bad)) == {"": [msg]}


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        validate(str(tmp_path / "none.py"), "f")
    with pytest.raises(IsADirectoryError):
        validate(str(tmp_path), "f")
    with pytest.raises(ModuleNotFoundError, match="no module named 'no_such_module_xyz'"):
        validate_module("no_such_module_xyz")


def test_validate_module_file(path):
    results = validate_module(path)
    assert "_private" not in results and "helper" not in results
    assert set(results) == {
        "good", "pep604", "quoted_return", "no_doc", "partly_documented", "missing_annotation",
        "bad_types", "kwargs_fn", "help_param", "no_return", "async_fn", "conditional",
    }
    assert results["good"] == []
    assert errors(results["no_return"])


def test_validate_module_by_name():
    results = validate_module("tx.components.dist")
    assert set(results) == {"ddp", "spmd"}
    assert results == {"ddp": [], "spmd": []}


def test_message_str():
    m = file_linter.LinterMessage("n", "desc", 3, 4, WARNING)
    assert str(m) == "3:4: warning: desc"


def test_get_fn_docstring():
    def documented(a: str, b: int = 1) -> None:
        """Short line
        continued.

        Long text.

        Args:
            a: the a,
                on two lines
        """

    desc, args = get_fn_docstring(documented)
    assert desc == "Short line\ncontinued.\n\nLong text."
    assert args == {"a": "the a, on two lines", "b": ""}

    def bare(x: int) -> None:
        pass

    desc, args = get_fn_docstring(bare)
    assert desc.startswith("bare (TIP: improve this help string") and args == {"x": ""}

