"""tx.components.system.builders: component function -> argparse -> AppDef."""
from typing import Dict, List, Optional

import pytest

from tx import specs
from tx.components.system.builders import (
    ComponentArgs,
    ComponentArgumentError,
    component_args_from_dict,
    component_args_from_str,
    create_args_parser,
    materialize_appdef,
    materialize_appdef_from_dict,
)
from tx.components.system.finder import ComponentValidationException


def _app(**values) -> specs.AppDef:
    return specs.AppDef(name="test", roles=[specs.Role(name="r", image="i", metadata={"values": values})])


def values_of(app: specs.AppDef) -> dict:
    return app.roles[0].metadata["values"]


def comp(
    *args: str,
    name: str,
    h: Optional[str] = None,
    count: int = 1,
    ratio: float = 0.5,
    flag: bool = False,
    tags: Optional[List[str]] = None,
    nums: List[int] = [1, 2],  # noqa: B006 - read only
    env: Optional[Dict[str, str]] = None,
    weights: Dict[str, float] = {},  # noqa: B006
    maybe: Optional[bool] = None,
) -> specs.AppDef:
    """A test component.

    It has a long description.

    Args:
        args: program arguments
        name: the name
        h: a host type
        count: how many
        ratio: a ratio
        flag: a flag
        tags: some tags
        nums: some numbers
        env: environment
        weights: weights by name
        maybe: tri-state
    """
    return _app(args=list(args), name=name, h=h, count=count, ratio=ratio, flag=flag, tags=tags,
                nums=nums, env=env, weights=weights, maybe=maybe)


def build(*argv: str, defaults=None) -> dict:
    return values_of(materialize_appdef(comp, list(argv), defaults, name="test.comp"))


def test_defaults_and_types():
    v = build("--name", "n")
    assert v == {"args": [], "name": "n", "h": None, "count": 1, "ratio": 0.5, "flag": False, "tags": None,
                 "nums": [1, 2], "env": None, "weights": {}, "maybe": None}
    v = build("--name", "n", "-h", "gpu.small", "--count", "3", "--ratio", "2", "--flag", "True",
              "--tags", "a,b c", "--nums", "4,5", "--env", "A=1,B=x,y", "--weights", "w=0.25", "--maybe", "false")
    assert v == {"args": [], "name": "n", "h": "gpu.small", "count": 3, "ratio": 2.0, "flag": True,
                 "tags": ["a", "b c"], "nums": [4, 5], "env": {"A": "1", "B": "x,y"}, "weights": {"w": 0.25},
                 "maybe": False}


def test_bool_flag_without_value_and_h_as_component_arg():
    v = build("--flag", "-h", "cpu.small", "--name=x")
    assert v["flag"] is True and v["h"] == "cpu.small" and v["name"] == "x"


def test_empty_list_and_dict_values():
    v = build("--name", "n", "--tags", "", "--nums", "", "--env", "")
    assert v["tags"] is None and v["nums"] == [] and v["env"] is None


def test_varargs_remainder_and_double_dash():
    assert build("--name", "n", "a", "--count", "9")["args"] == ["a", "--count", "9"]
    v = build("--name", "n", "--count", "2", "--", "--count", "9", "--")
    assert v["args"] == ["--count", "9", "--"] and v["count"] == 2


def test_unchanged_arguments():
    tricky = ["a b", "$(x)", "'", '"', "\n", "", "--"]
    assert build("--name", "n", "--", *tricky)["args"] == tricky


def test_defaults_override_declared_and_cli_wins():
    defaults = {"count": "5", "name": "from-config", "flag": "true", "env": "K=V", "args": "x 'y z'"}
    v = build(defaults=defaults)
    assert (v["count"], v["name"], v["flag"], v["env"], v["args"]) == (5, "from-config", True, {"K": "V"}, ["x", "y z"])
    v = build("--count", "7", "--name", "cli", "p", defaults=defaults)
    assert (v["count"], v["name"], v["args"]) == (7, "cli", ["p"])


def test_unknown_defaults_are_ignored(monkeypatch):
    events = []

    class Rec:
        def __getattr__(self, level):
            return lambda event, **kw: events.append((level, event, kw))

    monkeypatch.setattr("tx.components.system.builders.get_logger", lambda name: Rec())
    assert build("--name", "n", defaults={"bogus": "1"})["name"] == "n"
    assert events and events[0][1] == "unknown_component_defaults" and events[0][2]["ignored"] == ["bogus"]


def test_help_text(capsys):
    parser = create_args_parser(comp, {"count": "5"}, name="test.comp")
    text = parser.format_help()
    assert text.startswith("usage: tx run <run args...> test.comp")
    assert "A test component.\n\nIt has a long description." in text
    flat = " ".join(text.split())
    assert "--name str the name (required)" in flat
    assert "--count int how many (default: 5)" in flat
    assert "-h str, --h str a host type" in flat and "a host type (default" not in flat  # None: nothing said
    assert "--tags str,... some tags" in flat and "some tags (default" not in flat
    assert "--env KEY=VALUE,... environment" in flat and "(default: None)" not in flat
    assert "--flag [true|false] a flag (default: False)" in flat
    assert "args program arguments" in flat and "args program arguments (" not in flat
    with pytest.raises(SystemExit) as info:
        materialize_appdef(comp, ["--help"], name="test.comp")
    assert info.value.code == 0
    assert "--ratio float" in capsys.readouterr().out


def undocumented(x: int) -> specs.AppDef:
    return _app(x=x)


def test_unambiguous_prefixes_of_options_are_accepted():
    """As TorchX's component parser (argparse's default): ``--mount`` for ``--mounts``."""
    v = build("--nam", "n", "--cou", "3", "--fl", "--nu", "7")
    assert (v["name"], v["count"], v["flag"], v["nums"]) == ("n", 3, True, [7])


def test_help_without_docstring():
    text = create_args_parser(undocumented).format_help()
    assert "TIP: improve this help string" in text
    assert "--x int (required)" in " ".join(text.split())


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "test.comp: the following arguments are required: --name"),
        (["--name", "n", "--bogus"], "test.comp: unrecognized arguments: --bogus (put the program's own arguments after --)"),
        (["--name", "n", "--count", "x"], "test.comp: argument --count: invalid int value: 'x'"),
        (["--name", "n", "--ratio", "1,5"], "test.comp: argument --ratio: invalid float value: '1,5'"),
        (["--name", "n", "--flag", "maybe"], "test.comp: argument --flag: invalid bool value: 'maybe' (use true or false)"),
        (["--name", "n", "--nums", "1,x"], "test.comp: argument --nums: invalid int value: 'x'"),
        (["--name", "n", "--env", "novalue"], "test.comp: argument --env: expected KEY=VALUE,KEY2=VALUE2"),
        (["--name"], "test.comp: argument --name: expected one argument"),
        (["--na", "n", "--n", "3"], "test.comp: ambiguous option: --n could match --name, --nums (write more"),
    ],
)
def test_parse_errors_raise_one_line(argv, message):
    with pytest.raises(ComponentArgumentError) as info:
        build(*argv)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)
    assert info.value.component == "test.comp"


def rejecting(value: int = 0) -> specs.AppDef:
    """Rejects negative values.

    Args:
        value: a value
    """
    if value < 0:
        raise ValueError("value must be >= 0,\n got a negative one")
    if value == 1:
        raise KeyError("unknown thing 'x'")
    if value == 2:
        return "not an appdef"  # type: ignore[return-value]
    return _app(value=value)


def test_component_errors_become_argument_errors():
    with pytest.raises(ComponentArgumentError, match=r"^rej: value must be >= 0, got a negative one$"):
        materialize_appdef(rejecting, ["--value", "-1"], name="rej")
    with pytest.raises(ComponentArgumentError, match=r"^rejecting: unknown thing 'x'$"):
        materialize_appdef(rejecting, ["--value", "1"])
    with pytest.raises(ComponentValidationException, match="returned str, expected tx.specs.AppDef"):
        materialize_appdef(rejecting, ["--value", "2"])


def with_kwargs(a: str, **kw: str) -> specs.AppDef:
    return _app(a=a)


def with_help(help: str = "") -> specs.AppDef:
    return _app(help=help)


def test_kwargs_and_help_param_not_supported():
    with pytest.raises(ComponentValidationException, match=r"\*\*kw is not supported"):
        materialize_appdef(with_kwargs, ["--a", "x"])
    with pytest.raises(ComponentValidationException, match="cannot be named 'help'"):
        materialize_appdef(with_help, [])


def positional(a: str, b: int, *rest: int, c: bool = True) -> specs.AppDef:
    return _app(a=a, b=b, rest=list(rest), c=c)


def test_positional_params_and_typed_varargs():
    cargs = component_args_from_str(positional, ["--a", "x", "--b", "2", "--c", "false", "3", "4"])
    assert cargs == ComponentArgs({"a": "x", "b": 2}, [3, 4], {"c": False})
    assert values_of(cargs.call(positional)) == {"a": "x", "b": 2, "rest": [3, 4], "c": False}
    with pytest.raises(ComponentArgumentError, match="argument rest: invalid int value: 'z'"):
        component_args_from_str(positional, ["--a", "x", "--b", "2", "z"])


def pep604(
    a: "int | None" = None,
    b: "list[str] | None" = None,
    c: "dict[str, int] | None" = None,
    d: "Optional[List[float]]" = None,
    e: "bool | None" = None,
) -> specs.AppDef:
    return _app(a=a, b=b, c=c, d=d, e=e)


def unresolvable(a: "NotDefinedAnywhere | None" = None, b: "list[int] | None" = None, c: "Optional[bool]" = None) -> specs.AppDef:  # noqa: F821
    return _app(a=a, b=b, c=c)


def test_pep604_builtin_generics_and_string_annotations():
    app = materialize_appdef(pep604, ["--a", "1", "--b", "x,y", "--c", "k=2", "--d", "0.5,1", "--e", "TRUE"])
    assert values_of(app) == {"a": 1, "b": ["x", "y"], "c": {"k": 2}, "d": [0.5, 1.0], "e": True}
    assert values_of(materialize_appdef(pep604, [])) == {"a": None, "b": None, "c": None, "d": None, "e": None}


def test_annotations_resolved_from_source_when_typing_cannot():
    # get_type_hints fails on the undefined name; the annotations are rebuilt from their text
    app = materialize_appdef(unresolvable, ["--a", "raw", "--b", "1,2", "--c", "yes"])
    assert values_of(app) == {"a": "raw", "b": [1, 2], "c": True}


def test_args_from_dict():
    cargs = component_args_from_dict(comp, {"name": "n", "count": 4, "ratio": 1, "flag": True, "tags": ["a"],
                                            "env": {"A": "1"}, "weights": "w=2", "args": ["x", "--y"]})
    assert cargs.var_args == ["x", "--y"]
    assert cargs.kwargs["count"] == 4 and cargs.kwargs["ratio"] == 1.0 and cargs.kwargs["flag"] is True
    assert cargs.kwargs["tags"] == ["a"] and cargs.kwargs["env"] == {"A": "1"} and cargs.kwargs["weights"] == {"w": 2.0}
    assert cargs.kwargs["nums"] == [1, 2] and cargs.kwargs["h"] is None
    v = values_of(materialize_appdef_from_dict(comp, {"name": "n", "count": "3"}, {"count": "9", "ratio": "0.1"}))
    assert (v["count"], v["ratio"]) == (3, 0.1)
    assert values_of(materialize_appdef(comp, {"name": "n", "args": "a 'b c'"}))["args"] == ["a", "b c"]


@pytest.mark.parametrize(
    "args, message",
    [
        ({}, "the following arguments are required: --name"),
        ({"name": "n", "cout": 1}, "unknown argument(s): cout (did you mean count?)"),
        ({"name": "n", "count": "x"}, "argument --count: invalid int value: 'x'"),
        ({"name": "n", "count": True}, "argument --count: invalid int value: True"),
        ({"name": "n", "flag": 1}, "argument --flag: invalid bool value: 1"),
        ({"name": ["n"]}, "argument --name: expected a string"),
        ({"name": "n", "env": 5}, "argument --env: expected KEY=VALUE"),
    ],
)
def test_args_from_dict_errors(args, message):
    with pytest.raises(ComponentArgumentError) as info:
        component_args_from_dict(comp, args, name="t")
    assert str(info.value).startswith(f"t: {message}")


def test_string_args_rejected():
    with pytest.raises(TypeError, match="list of strings"):
        materialize_appdef(comp, "--name n")  # type: ignore[arg-type]
