"""The sweep model (tx.specs.sweep): parsing, trial expansion, substitution, sweep files."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tx.specs.sweep import (
    SWEEP_FILE_SCHEMA,
    Distribution,
    SweepFormatError,
    SweepSpec,
    count_trials,
    expand_trials,
    format_value,
    load_sweep_file,
    parse_grid,
    parse_random,
    referenced_params,
    substitute,
    sweep_spec_from_dict,
)
from tx.testing.backends import require_module


def test_grid_values_are_typed_and_the_product_varies_the_last_parameter_fastest():
    assert parse_grid("lr=0.01, 0.1,1") == ("lr", [0.01, 0.1, 1])
    assert parse_grid("opt=adam,sgd") == ("opt", ["adam", "sgd"])
    spec = SweepSpec(grid=dict([parse_grid("lr=0.01,0.1,1"), parse_grid("batch=32,64")]))
    trials = expand_trials(spec)
    assert len(trials) == 6
    assert trials[:3] == [{"lr": 0.01, "batch": 32}, {"lr": 0.01, "batch": 64}, {"lr": 0.1, "batch": 32}]


def test_random_trials_are_in_range_and_the_same_for_the_same_seed():
    spec = SweepSpec(random=dict([parse_random("lr=loguniform(1e-4,1e-1)"), parse_random("n=randint(1,3)"),
                                  parse_random("opt=choice(adam,sgd)")]), trials=50, seed=7)
    trials = expand_trials(spec)
    assert trials == expand_trials(spec)
    assert trials != expand_trials(SweepSpec(random=spec.random, trials=50, seed=8))
    assert all(1e-4 <= t["lr"] <= 1e-1 and t["n"] in (1, 2, 3) and t["opt"] in ("adam", "sgd") for t in trials)
    assert {t["n"] for t in trials} == {1, 2, 3}


def test_grid_times_random_draws_per_point():
    spec = SweepSpec(grid={"b": [1, 2]}, random={"lr": Distribution("uniform", 0.0, 1.0)}, trials=3)
    trials = expand_trials(spec)
    assert [t["b"] for t in trials] == [1, 1, 1, 2, 2, 2]


@pytest.mark.parametrize("spec", [
    SweepSpec(grid={"a": [1, 2, 3], "b": ["x", "y"]}),
    SweepSpec(random={"lr": Distribution("uniform", 0.0, 1.0)}, trials=4),
    SweepSpec(grid={"b": [1, 2]}, random={"lr": Distribution("uniform", 0.0, 1.0)}, trials=3),
])
def test_count_trials_is_how_many_expand_trials_makes(spec):
    assert count_trials(spec) == len(expand_trials(spec))


def test_count_trials_of_a_huge_spec_expands_nothing():
    values = list(range(1000))
    assert count_trials(SweepSpec(grid={"a": values, "b": values, "c": values})) == 10 ** 9
    big = SweepSpec(grid={"a": values}, random={"lr": Distribution("uniform", 0.0, 1.0)}, trials=10 ** 12)
    assert count_trials(big) == 10 ** 15
    # a sweep file is checked without expanding it either
    assert sweep_spec_from_dict({"grid": {"a": values, "b": values, "c": values}}).spec.grid["a"] == values


@pytest.mark.parametrize("text, message", [
    ("lr=", "parameter 'lr' has no values"),
    ("lr", "expected NAME=V1,V2"),
    ("app_id=1", "is an AppDef macro"),
    ("1x=2", "bad parameter name '1x'"),
])
def test_bad_grid_is_one_line(text, message):
    with pytest.raises(SweepFormatError, match=message) as e:
        parse_grid(text)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text, message", [
    ("lr=loguniform(0,1)", "must be above 0"),
    ("lr=normal(1,2)", "unknown distribution 'normal'"),
    ("lr=uniform(2,1)", "must be below high"),
    ("lr=randint(1.5,3)", "two integers"),
    ("lr=uniform(1)", "takes two numbers"),
    ("lr=0.1", "expected NAME=loguniform"),
])
def test_bad_random_is_one_line(text, message):
    with pytest.raises(SweepFormatError, match=message):
        parse_random(text)


def test_expand_refuses_no_parameters_empty_grid_and_random_without_trials():
    with pytest.raises(SweepFormatError, match="no parameters"):
        expand_trials(SweepSpec())
    with pytest.raises(SweepFormatError, match="'lr' has no values"):
        expand_trials(SweepSpec(grid={"lr": []}))
    with pytest.raises(SweepFormatError, match="--trials"):
        expand_trials(SweepSpec(random={"lr": Distribution("uniform", 0.0, 1.0)}))


def test_substitute_fills_parameters_and_leaves_macros():
    assert substitute("--lr=${lr} --id ${app_id} ${lrx}", {"lr": 1e-05}) == "--lr=1e-05 --id ${app_id} ${lrx}"
    assert substitute("${a}${ab}", {"a": 1, "ab": True}) == "1true"
    assert format_value(0.001) == "0.001" and format_value("x") == "x"
    assert referenced_params(["--lr ${lr}", "${b}"], ["lr", "b", "c"]) == ["lr", "b"]


GOOD = [
    {"component": "utils.sh", "args": ["echo", "${lr}"], "grid": {"lr": [0.1, 1]}},
    {"random": {"lr": {"distribution": "loguniform", "low": 1e-4, "high": 0.1},
                "opt": {"distribution": "choice", "values": ["adam", "sgd"]}}, "trials": 4, "seed": 1},
    {"grid": {"b": [1]}, "env": {"LR": "${b}"}, "max_parallel": 2, "name": "x"},
]
BAD = [
    ({"grid": {"lr": []}}, "grid.lr must be a non-empty list"),
    ({"grid": {}}, "grid is empty"),
    ({"random": {"lr": {"distribution": "uniform", "low": 0, "high": 1}}}, "give a grid, or random parameters with trials"),
    ({"grid": {"lr": [1]}, "trials": 0}, "trials must be an integer >= 1"),
    ({"grid": {"lr": [1]}, "colour": "red"}, "unknown field 'colour'"),
    ({"grid": {"lr": [[1]]}}, "grid.lr must be"),
    ({"grid": {"b": [1]}, "random": {"lr": {"distribution": "uniform", "low": 0}}, "trials": 1}, "missing 'high'"),
    ({"grid": {"b": [1]}, "args": "echo"}, "args must be a list of strings"),
    ([1, 2], "expected a mapping"),
]


@pytest.mark.parametrize("doc", GOOD)
def test_good_sweep_files_validate_here_and_against_the_schema(doc):
    jsonschema = require_module("jsonschema", "checks the sweep file schema: pip install jsonschema")
    jsonschema.validate(doc, SWEEP_FILE_SCHEMA)
    assert sweep_spec_from_dict(doc).spec.names


@pytest.mark.parametrize("doc, message", BAD)
def test_bad_sweep_files_fail_here_and_against_the_schema(doc, message):
    jsonschema = require_module("jsonschema", "checks the sweep file schema: pip install jsonschema")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SWEEP_FILE_SCHEMA)
    with pytest.raises(SweepFormatError, match=message) as e:
        sweep_spec_from_dict(doc)
    assert "\n" not in str(e.value)


def test_load_sweep_file_yaml_json_and_errors(tmp_path):
    y = tmp_path / "s.yaml"
    y.write_text("grid:\n  lr: [0.1, 1]\nmax_parallel: 2\n")
    f = load_sweep_file(str(y))
    assert f.spec.grid == {"lr": [0.1, 1]} and f.max_parallel == 2
    j = tmp_path / "s.json"
    j.write_text(json.dumps(GOOD[1]))
    assert len(expand_trials(load_sweep_file(str(j)).spec)) == 4
    j.write_text("{")
    with pytest.raises(SweepFormatError, match="invalid JSON"):
        load_sweep_file(str(j))
    with pytest.raises(SweepFormatError, match="cannot read sweep file"):
        load_sweep_file(str(tmp_path / "missing.yaml"))


def test_docs_show_the_schema_and_a_valid_example():
    jsonschema = require_module("jsonschema", "checks the sweep file schema: pip install jsonschema")
    yaml = require_module("yaml", "reads docs/sweeps.md's YAML example: pip install pyyaml")

    text = (Path(__file__).resolve().parents[2] / "docs" / "sweeps.md").read_text()
    blocks = dict(re.findall(r"```(yaml|json)\n(.*?)```", text, re.S))
    assert json.loads(blocks["json"]) == SWEEP_FILE_SCHEMA
    jsonschema.Draft202012Validator.check_schema(SWEEP_FILE_SCHEMA)
    example = yaml.safe_load(blocks["yaml"])
    jsonschema.validate(example, SWEEP_FILE_SCHEMA)
    f = sweep_spec_from_dict(example)
    assert len(expand_trials(f.spec)) == 8 and f.component == "dist.ddp" and f.max_parallel == 4
