"""The sweep model: which parameters vary, over which values, and the trials they make.

A sweep is one app times a parameter set. A :class:`SweepSpec` holds a grid (each
parameter's values; the trials are their product), random parameters (each drawn from a
distribution, ``trials`` times, with ``seed``), or both (each grid point times ``trials``
draws). :func:`expand_trials` turns it into the trials' parameter dicts, in a fixed order:
the same spec and seed always give the same trials; :func:`count_trials` says how many
without making them.

Parameter values are JSON scalars (numbers, strings, booleans). A command-line value
(``--grid lr=0.01,0.1``) that reads as an int or a float becomes one; anything else stays a
string. :func:`substitute` puts a value where ``${name}`` stands in a text.

The sweep file format (YAML or JSON) is :data:`SWEEP_FILE_SCHEMA` (a JSON Schema, shown in
docs/sweeps.md); :func:`sweep_spec_from_dict` checks a document against it with one-line
errors. Standard library and attrs only (PyYAML when a YAML file is read).
"""
from __future__ import annotations

import functools
import math
import random
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import attrs

from tx.errors import UserError
from tx.specs.api import AppDefFormatError
from tx.specs.files import _fmt_of, _parse_json, _parse_yaml

__all__ = [
    "Distribution", "SWEEP_FILE_SCHEMA", "SweepFile", "SweepFormatError", "SweepSpec", "count_trials", "expand_trials",
    "format_value", "load_sweep_file", "parse_grid", "parse_random", "parse_value",
    "referenced_params", "substitute", "sweep_spec_from_dict",
]

#: ``${...}`` names that are AppDef macros (:class:`tx.specs.macros`): never sweep parameters
RESERVED = ("app_id", "replica_id", "img_root", "base_img_root", "rank0_env")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIST = re.compile(r"^\s*(?P<kind>[a-z]+)\s*\((?P<args>.*)\)\s*$")
DISTRIBUTIONS = ("uniform", "loguniform", "randint", "choice")
Scalar = Union[int, float, str, bool]


class SweepFormatError(UserError, ValueError):
    """A sweep's parameters or its sweep file are wrong; the message is one line."""


@attrs.frozen
class Distribution:
    """A random parameter's distribution.

    Attributes:
        kind: ``uniform`` (a float in [low, high), 6 significant digits), ``loguniform`` (a float whose log is
            uniform in [log low, log high); low > 0), ``randint`` (an int in [low, high],
            both ends included) or ``choice`` (one of ``values``, each as likely).
        low, high: the bounds (not for ``choice``).
        values: the choices (only for ``choice``).
    """

    kind: str
    low: float = 0.0
    high: float = 0.0
    values: Tuple[Scalar, ...] = ()

    def draw(self, rng: random.Random) -> Scalar:
        """One value drawn with ``rng``."""
        if self.kind == "uniform":
            return float(f"{rng.uniform(self.low, self.high):.6g}")
        if self.kind == "loguniform":
            return float(f"{math.exp(rng.uniform(math.log(self.low), math.log(self.high))):.6g}")
        if self.kind == "randint":
            return rng.randint(int(self.low), int(self.high))
        return self.values[rng.randrange(len(self.values))]

    def __str__(self) -> str:
        if self.kind == "choice":
            return f"choice({','.join(format_value(v) for v in self.values)})"
        return f"{self.kind}({format_value(self.low)},{format_value(self.high)})"


@attrs.frozen
class SweepSpec:
    """What a sweep varies.

    Attributes:
        grid: parameter -> its values (the trials are the product, in the order given:
            the last parameter varies fastest).
        random: parameter -> its :class:`Distribution`.
        trials: how many random draws (per grid point when there is a grid too); needed
            with ``random``, ignored without it.
        seed: the random generator's seed (the same seed gives the same trials).
    """

    grid: Mapping[str, Sequence[Scalar]] = attrs.field(factory=dict)
    random: Mapping[str, Distribution] = attrs.field(factory=dict)
    trials: Optional[int] = None
    seed: int = 0

    @property
    def names(self) -> List[str]:
        """The parameter names, grid ones first."""
        return [*self.grid, *(k for k in self.random if k not in self.grid)]


def parse_value(text: str) -> Scalar:
    """A command-line value as an int or a float where it reads as one, else the text."""
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        f = float(t)
    except ValueError:
        return t
    return f if math.isfinite(f) else t


def format_value(value: Any) -> str:
    """A parameter value as text in an argument or an env value (``0.001``, ``32``,
    ``true``; floats in Python's shortest round-trip form)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _check_name(name: str, where: str) -> str:
    if not _NAME.match(name):
        raise SweepFormatError(f"{where}: bad parameter name {name!r}: use letters, digits and _")
    if name in RESERVED:
        raise SweepFormatError(f"{where}: {name!r} is an AppDef macro (${{{name}}}), not a sweep parameter")
    return name


def parse_grid(text: str) -> Tuple[str, List[Scalar]]:
    """``--grid NAME=V1,V2,...`` -> (name, values).

    Raises:
        SweepFormatError: no ``=``, a bad name, or no values.
    """
    name, sep, rest = text.partition("=")
    if not sep:
        raise SweepFormatError(f"--grid {text!r}: expected NAME=V1,V2,...")
    name = _check_name(name.strip(), f"--grid {text!r}")
    values = [parse_value(v) for v in rest.split(",") if v.strip()]
    if not values:
        raise SweepFormatError(f"--grid {text!r}: parameter {name!r} has no values")
    return name, values


def _distribution(kind: str, args: Sequence[Any], where: str) -> Distribution:
    if kind not in DISTRIBUTIONS:
        raise SweepFormatError(f"{where}: unknown distribution {kind!r}; one of {', '.join(DISTRIBUTIONS)}")
    if kind == "choice":
        if not args:
            raise SweepFormatError(f"{where}: choice() needs at least one value")
        return Distribution("choice", values=tuple(args))
    if len(args) != 2 or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
        raise SweepFormatError(f"{where}: {kind}(low,high) takes two numbers")
    low, high = args
    if not low < high:
        raise SweepFormatError(f"{where}: {kind}: low ({low}) must be below high ({high})")
    if kind == "loguniform" and low <= 0:
        raise SweepFormatError(f"{where}: loguniform: low ({low}) must be above 0")
    if kind == "randint" and not (isinstance(low, int) and isinstance(high, int)):
        raise SweepFormatError(f"{where}: randint(low,high) takes two integers")
    return Distribution(kind, float(low) if kind != "randint" else low, float(high) if kind != "randint" else high)


def parse_random(text: str) -> Tuple[str, Distribution]:
    """``--random NAME=KIND(ARGS)`` -> (name, distribution); KIND is ``uniform(low,high)``,
    ``loguniform(low,high)``, ``randint(low,high)`` or ``choice(v1,v2,...)``.

    Raises:
        SweepFormatError: the text does not follow that form.
    """
    where = f"--random {text!r}"
    name, sep, rest = text.partition("=")
    m = _DIST.match(rest)
    if not sep or not m:
        raise SweepFormatError(f"{where}: expected NAME=loguniform(1e-4,1e-1) (or uniform, randint, choice)")
    args = [parse_value(a) for a in m["args"].split(",") if a.strip()]
    return _check_name(name.strip(), where), _distribution(m["kind"], args, where)


def count_trials(spec: SweepSpec) -> int:
    """How many trials :func:`expand_trials` would give for ``spec``, computed from the
    sizes of the grid and ``trials`` (nothing is expanded: any size answers at once). It
    checks what :func:`expand_trials` checks.

    Raises:
        SweepFormatError: no parameters, a grid parameter without values, a parameter both
            in the grid and random, random parameters without ``trials`` (or ``trials`` below 1).
    """
    for name, values in spec.grid.items():
        if not values:
            raise SweepFormatError(f"grid parameter {name!r} has no values")
    if not spec.grid and not spec.random:
        raise SweepFormatError("the sweep has no parameters: give --grid, --random or a sweep file")
    twice = sorted(set(spec.grid) & set(spec.random))
    if twice:
        raise SweepFormatError(f"parameter {twice[0]!r} is both in the grid and random")
    if spec.random and (spec.trials is None or spec.trials < 1):
        raise SweepFormatError("random parameters need --trials N (N >= 1)")
    n = math.prod(len(values) for values in spec.grid.values())
    return n * spec.trials if spec.random and spec.trials is not None else n


def expand_trials(spec: SweepSpec) -> List[Dict[str, Scalar]]:
    """The trials of ``spec``: one dict of parameter values per trial, in trial-index order
    (:func:`count_trials` of them: bound that first, as the Runner does, since the trials
    are held in memory).

    Raises:
        SweepFormatError: as :func:`count_trials`.
    """
    count_trials(spec)
    points: List[Dict[str, Scalar]] = [{}]
    for name, values in spec.grid.items():
        points = [{**p, name: v} for p in points for v in values]
    if not spec.random:
        return points
    rng = random.Random(spec.seed)
    out = []
    for p in points:
        for _ in range(spec.trials or 0):
            out.append({**p, **{name: d.draw(rng) for name, d in spec.random.items()}})
    return out


@functools.lru_cache(maxsize=64)
def _pattern_of(names: Tuple[str, ...]) -> "re.Pattern[str]":
    return re.compile(r"\$\{(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")\}")


def _pattern(names: Sequence[str]) -> "re.Pattern[str]":
    return _pattern_of(tuple(names))


def substitute(text: str, params: Mapping[str, Any]) -> str:
    """``text`` with each ``${name}`` of a parameter in ``params`` replaced by its value
    (:func:`format_value`); other ``${...}`` (AppDef macros) are left as they are."""
    if not params or "${" not in text:
        return text
    return _pattern(list(params)).sub(lambda m: format_value(params[m.group(1)]), text)


def referenced_params(texts: Sequence[str], names: Sequence[str]) -> List[str]:
    """The names among ``names`` that appear as ``${name}`` in any of ``texts``."""
    if not names:
        return []
    pat = _pattern(names)
    found = {m.group(1) for t in texts for m in pat.finditer(t)}
    return [n for n in names if n in found]


#: the sweep file format, as a JSON Schema (draft 2020-12); docs/sweeps.md shows it
SWEEP_FILE_SCHEMA: Dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "tx sweep file",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "description": "the sweep's name (default: the app's)"},
        "component": {"type": "string", "description": "a component (dist.ddp, file.py:fn) or an AppDef file"},
        "args": {"type": "array", "items": {"type": "string"},
                 "description": "the component's arguments; ${NAME} stands for a parameter"},
        "env": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "env added to every role; ${NAME} stands for a parameter"},
        "grid": {"type": "object", "minProperties": 1,
                 "propertyNames": {"pattern": _NAME.pattern},
                 "additionalProperties": {"type": "array", "minItems": 1,
                                          "items": {"type": ["number", "string", "boolean"]}}},
        "random": {"type": "object", "minProperties": 1,
                   "propertyNames": {"pattern": _NAME.pattern},
                   "additionalProperties": {"$ref": "#/$defs/distribution"}},
        "trials": {"type": "integer", "minimum": 1},
        "seed": {"type": "integer"},
        "max_parallel": {"type": "integer", "minimum": 1},
    },
    "anyOf": [{"required": ["grid"]}, {"required": ["random", "trials"]}],
    "$defs": {
        "distribution": {
            "oneOf": [
                {"type": "object", "additionalProperties": False, "required": ["distribution", "low", "high"],
                 "properties": {"distribution": {"enum": ["uniform", "loguniform", "randint"]},
                                "low": {"type": "number"}, "high": {"type": "number"}}},
                {"type": "object", "additionalProperties": False, "required": ["distribution", "values"],
                 "properties": {"distribution": {"const": "choice"},
                                "values": {"type": "array", "minItems": 1,
                                           "items": {"type": ["number", "string", "boolean"]}}}},
            ]
        }
    },
}


@attrs.frozen
class SweepFile:
    """A sweep file's content: the spec and what else it sets (each None where unset)."""

    spec: SweepSpec
    name: Optional[str] = None
    component: Optional[str] = None
    args: Optional[List[str]] = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    max_parallel: Optional[int] = None


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool))


def sweep_spec_from_dict(data: Any, where: str = "sweep file") -> SweepFile:
    """Check a parsed sweep document against :data:`SWEEP_FILE_SCHEMA` and build it.

    Raises:
        SweepFormatError: the document does not validate (one line naming the field).
    """
    def bad(msg: str) -> SweepFormatError:
        return SweepFormatError(f"{where}: {msg}")

    if not isinstance(data, dict):
        raise bad("expected a mapping at the top")
    unknown = sorted(set(data) - set(SWEEP_FILE_SCHEMA["properties"]))
    if unknown:
        raise bad(f"unknown field {unknown[0]!r}; fields: {', '.join(SWEEP_FILE_SCHEMA['properties'])}")
    for key in ("name", "component"):
        if key in data and not isinstance(data[key], str):
            raise bad(f"{key} must be a string")
    if "args" in data and not (isinstance(data["args"], list) and all(isinstance(a, str) for a in data["args"])):
        raise bad("args must be a list of strings")
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise bad("env must map names to strings")
    for key, low in (("trials", 1), ("seed", None), ("max_parallel", 1)):
        v = data.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or (low is not None and v < low)):
            raise bad(f"{key} must be an integer" + (f" >= {low}" if low is not None else ""))
    grid: Dict[str, List[Scalar]] = {}
    for name, values in (data.get("grid") or {}).items():
        _check_name(str(name), where)
        if not isinstance(values, list) or not values or not all(_is_scalar(v) for v in values):
            raise bad(f"grid.{name} must be a non-empty list of numbers, strings or booleans")
        grid[name] = list(values)
    if "grid" in data and not grid:
        raise bad("grid is empty")
    rand: Dict[str, Distribution] = {}
    for name, d in (data.get("random") or {}).items():
        _check_name(str(name), where)
        if not isinstance(d, dict) or "distribution" not in d:
            raise bad(f"random.{name} must be a mapping with a distribution")
        kind = d["distribution"]
        keys = {"distribution", "values"} if kind == "choice" else {"distribution", "low", "high"}
        extra = sorted(set(d) - keys)
        missing = sorted(keys - set(d))
        if extra or missing:
            raise bad(f"random.{name}: " + (f"unknown field {extra[0]!r}" if extra else f"missing {missing[0]!r}"))
        if kind == "choice":
            if not isinstance(d["values"], list) or not all(_is_scalar(v) for v in d["values"]):
                raise bad(f"random.{name}.values must be a list of numbers, strings or booleans")
            args: List[Any] = d["values"]
        else:
            args = [d["low"], d["high"]]
        rand[name] = _distribution(str(kind), args, f"{where}: random.{name}")
    if "random" in data and not rand:
        raise bad("random is empty")
    if not grid and not (rand and "trials" in data):
        raise bad("give a grid, or random parameters with trials")
    spec = SweepSpec(grid=grid, random=rand, trials=data.get("trials"), seed=data.get("seed", 0))
    count_trials(spec)  # the remaining checks (a name both in grid and random); nothing is expanded
    return SweepFile(spec=spec, name=data.get("name"), component=data.get("component"),
                     args=data.get("args"), env=dict(env), max_parallel=data.get("max_parallel"))


def load_sweep_file(path: str) -> SweepFile:
    """Read and check a YAML or JSON sweep file (by extension, as AppDef files are read).

    Raises:
        SweepFormatError: the file cannot be read, does not parse, or does not validate.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SweepFormatError(f"cannot read sweep file {path}: {e.strerror}") from None
    try:
        data = _parse_json(text, path) if _fmt_of(path, text) == "json" else _parse_yaml(text, path)
    except AppDefFormatError as e:
        raise SweepFormatError(str(e)) from None
    return sweep_spec_from_dict(data, where=path)
