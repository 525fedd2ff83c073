"""tx.specs.runopts: adding options, resolving configs, the ``-cfg`` string syntax, help text."""
from typing import Dict, List

import re

import pytest

from tx.specs import InvalidRunConfigException, get_type_name, runopt, runopts
from tx.specs.runopts import is_type, to_dict


@pytest.fixture
def opts():
    o = runopts()
    o.add("queue", type_=str, help="job queue", required=True)
    o.add("mounts", type_=List[str], help="mounts", default=["a"])
    o.add("env", type_=Dict[str, str], help="env vars")
    o.add("n", type_=int, help="count", default=2)
    o.add("ratio", type_=float, help="a ratio", default=0.5)
    o.add("dry", type_=bool, help="dry", default=False)
    return o


# -- add / container protocol -------------------------------------------------------------
def test_add_required_with_default_is_an_error():
    with pytest.raises(ValueError, match="required option 'q' cannot have a default"):
        runopts().add("q", type_=str, help="h", default="x", required=True)


@pytest.mark.parametrize("tp,default", [(int, "1"), (int, True), (List[str], "a"), (Dict[str, str], {"a": 1}), (str, 1)])
def test_add_default_of_wrong_type(tp, default):
    with pytest.raises(TypeError, match=re.escape(f"is not of type {get_type_name(tp)}")):
        runopts().add("k", type_=tp, help="h", default=default)


def test_empty_list_default_of_a_dict_option_is_an_empty_dict():
    # TorchX 0.7.0 accepts `default=[]` for a Dict[str, str] option; a non-empty list stays an error
    o = runopts()
    o.add("E", type_=Dict[str, str], help="a dict opt", default=[])
    assert o.get("E").default == {}
    assert o.resolve({}) == {"E": {}}
    assert o.cfg_from_str("E=f:b,F:B") == {"E": {"f": "b", "F": "B"}}
    with pytest.raises(TypeError, match="is not of type"):
        o.add("L", type_=Dict[str, str], help="h", default=["a"])


def test_iteration_len_contains_get_update(opts):
    assert len(opts) == 6
    assert [k for k, _ in opts] == ["queue", "mounts", "env", "n", "ratio", "dry"]
    assert "queue" in opts and "nope" not in opts
    assert opts.get("n") == runopt(2, int, False, "count")
    assert opts.get("nope") is None
    other = runopts()
    other.add("extra", type_=str, help="x", default="e")
    opts.update(other)
    assert opts.get("extra").default == "e" and len(opts) == 7


def test_type_names_and_is_type():
    assert get_type_name(str) == "str"
    assert get_type_name(List[str]) == "List[str]"
    assert get_type_name(Dict[str, str]) == "Dict[str, str]"
    assert is_type(["a"], List[str]) and not is_type(["a", 1], List[str])
    assert is_type({"a": "b"}, Dict[str, str]) and not is_type({"a": 1}, Dict[str, str])
    assert is_type(1, int) and not is_type(True, int)
    assert is_type(1, float) and not is_type(False, float)
    assert runopt(None, List[str], False, "").is_type_list_of_str
    assert runopt(None, Dict[str, str], False, "").is_type_dict_of_str


# -- resolve -------------------------------------------------------------------------------
def test_resolve_fills_defaults_and_keeps_unknown(opts):
    cfg = {"queue": "q", "n": 5, "other_plugin_opt": "x"}
    out = opts.resolve(cfg)
    assert out == {"queue": "q", "n": 5, "mounts": ["a"], "env": None, "ratio": 0.5, "dry": False,
                   "other_plugin_opt": "x"}
    assert cfg == {"queue": "q", "n": 5, "other_plugin_opt": "x"}  # not modified


def test_resolve_none_value_takes_default(opts):
    assert opts.resolve({"queue": "q", "n": None})["n"] == 2


def test_resolve_accepts_int_for_float(opts):
    assert opts.resolve({"queue": "q", "ratio": 1})["ratio"] == 1


def test_resolve_missing_required(opts):
    with pytest.raises(InvalidRunConfigException, match=r"required run option 'queue' \(str\) is missing: job queue") as ei:
        opts.resolve({})
    assert ei.value.cfg_key == "queue"


@pytest.mark.parametrize("key,value,tname", [
    ("n", "3", "int"), ("n", True, "int"), ("mounts", "a,b", "List[str]"),
    ("env", {"a": 1}, "Dict[str, str]"), ("dry", "true", "bool"), ("queue", 1, "str"),
])
def test_resolve_wrong_type(opts, key, value, tname):
    cfg = {"queue": "q", key: value}
    with pytest.raises(InvalidRunConfigException, match=re.escape(f"run option '{key}' must be {tname}, got")) as ei:
        opts.resolve(cfg)
    assert ei.value.cfg_key == key and ei.value.cfg == cfg


def test_resolve_none_cfg(opts):
    o = runopts()
    o.add("a", type_=str, help="h", default="x")
    assert o.resolve(None) == {"a": "x"}


# -- cfg_from_str --------------------------------------------------------------------------
def test_to_dict_torchx_examples():
    assert to_dict("FOO=v1,BAR=v2") == {"FOO": "v1", "BAR": "v2"}
    assert to_dict("FOO=a,b,BAR=c") == {"FOO": "a,b", "BAR": "c"}
    assert to_dict("FOO=a;b;BAR=c") == {"FOO": "a;b", "BAR": "c"}
    assert to_dict("FOO=a,b;BAR=c,d") == {"FOO": "a,b", "BAR": "c,d"}
    assert to_dict("FOO=''") == {"FOO": ""}
    assert to_dict('FOO="",BAR=1') == {"FOO": "", "BAR": "1"}
    assert to_dict("") == {}
    assert to_dict("  FOO = x  ") == {"FOO": "x"}


@pytest.mark.parametrize("text", ["FOO", "=1", "A=1=2"])
def test_to_dict_errors(text):
    with pytest.raises(ValueError):
        to_dict(text)


def test_cfg_from_str_types(opts):
    cfg = opts.cfg_from_str("queue=q,mounts=a,b;c,env=A:1;B:2,n=3,ratio=0.25,dry=true")
    assert cfg == {"queue": "q", "mounts": ["a", "b", "c"], "env": {"A": "1", "B": "2"},
                   "n": 3, "ratio": 0.25, "dry": True}
    assert isinstance(cfg["n"], int) and isinstance(cfg["ratio"], float)


def test_cfg_from_str_only_given_keys(opts):
    assert opts.cfg_from_str("n=7") == {"n": 7}
    assert opts.cfg_from_str("") == {}


def test_cfg_from_str_dict_with_comma_pairs(opts):
    assert opts.cfg_from_str("env=A:1,B:x:y,n=1") == {"env": {"A": "1", "B": "x:y"}, "n": 1}


def test_cfg_from_str_empty_values(opts):
    assert opts.cfg_from_str("queue=''") == {"queue": ""}
    assert opts.cfg_from_str('mounts=""') == {"mounts": []}
    assert opts.cfg_from_str("mounts=a,,b") == {"mounts": ["a", "b"]}


@pytest.mark.parametrize("text,expected", [
    ("dry=true", True), ("dry=True", True), ("dry=TRUE", True), ("dry=1", True), ("dry=yes", True),
    ("dry=false", False), ("dry=False", False), ("dry=0", False), ("dry=no", False), ("dry=''", False),
])
def test_cfg_from_str_bools(opts, text, expected):
    assert opts.cfg_from_str(text) == {"dry": expected}


def test_cfg_from_str_bad_bool(opts):
    with pytest.raises(InvalidRunConfigException, match="run option 'dry' must be bool: expected true or false, got 'maybe'"):
        opts.cfg_from_str("dry=maybe")


@pytest.mark.parametrize("text,key", [("n=two", "n"), ("n=1.5", "n"), ("ratio=x", "ratio"), ("env=novalue", "env")])
def test_cfg_from_str_bad_values(opts, text, key):
    with pytest.raises(InvalidRunConfigException, match=f"run option '{key}' must be") as ei:
        opts.cfg_from_str(text)
    assert ei.value.cfg_key == key and ei.value.cfg == text


def test_cfg_from_str_unknown_key_did_you_mean(opts):
    with pytest.raises(InvalidRunConfigException) as ei:
        opts.cfg_from_str("quue=q")
    assert str(ei.value) == (
        "unknown run option 'quue' (did you mean 'queue'?); options: queue, mounts, env, n, ratio, dry"
    )
    assert ei.value.cfg_key == "quue"


def test_cfg_from_str_unknown_key_without_match(opts):
    with pytest.raises(InvalidRunConfigException, match=r"unknown run option 'zzz'; options: queue"):
        opts.cfg_from_str("zzz=1")


def test_cfg_from_str_non_strict_drops_unknown(opts):
    assert opts.cfg_from_str("zzz=1,n=2", strict=False) == {"n": 2}


def test_cfg_from_str_malformed(opts):
    with pytest.raises(InvalidRunConfigException, match="bad run config 'queue'"):
        opts.cfg_from_str("queue")


# -- help text -----------------------------------------------------------------------------
def test_repr_usage_text(opts):
    assert repr(opts) == (
        "    usage:\n"
        "        queue=QUEUE,[mounts=MOUNTS],[env=ENV],[n=N],[ratio=RATIO],[dry=DRY]\n"
        "\n"
        "    required arguments:\n"
        "        queue=QUEUE (str)\n"
        "            job queue\n"
        "\n"
        "    optional arguments:\n"
        "        mounts=MOUNTS (List[str], ['a'])\n"
        "            mounts\n"
        "        env=ENV (Dict[str, str], None)\n"
        "            env vars\n"
        "        n=N (int, 2)\n"
        "            count\n"
        "        ratio=RATIO (float, 0.5)\n"
        "            a ratio\n"
        "        dry=DRY (bool, False)\n"
        "            dry\n"
    )


def test_repr_empty():
    assert repr(runopts()) == "    usage:\n        \n"
