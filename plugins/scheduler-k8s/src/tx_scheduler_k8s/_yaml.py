"""A small, fast YAML writer for API objects (dicts, lists, str, int, float, bool, None).

``yaml.dump`` (even with libyaml) spends seconds on the dryrun of thousands of replicas
because it represents every node in Python; this writes the block style that ``kubectl``
users read, directly. Strings are written plain only when YAML 1.1 and 1.2 both read them
back as the same string (a conservative pattern, no reserved words); every other string is
a double-quoted scalar written by ``json.dumps`` (JSON's escapes are YAML's). The output
is read back by ``yaml.safe_load`` as the same object (tests check it).
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List

_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*$")
_RESERVED = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})


def scalar(value: Any) -> str:
    """One scalar in YAML."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    s = str(value)
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    return json.dumps(s, ensure_ascii=False)


def _str(s: str, _cache: Dict[str, str] = {}) -> str:  # noqa: B006 - a deliberate memo
    out = _cache.get(s)
    if out is None:
        out = scalar(s)
        if len(_cache) < 100_000:
            _cache[s] = out
    return out


def _map(d: Any, indent: int, out: List[str]) -> None:
    pad = " " * indent
    append = out.append
    for k, v in d.items():
        key = _str(k)
        if type(v) is str:
            append(f"{pad}{key}: {_str(v)}\n")
        elif isinstance(v, dict) and v:
            append(f"{pad}{key}:\n")
            _map(v, indent + 2, out)
        elif isinstance(v, list) and v:
            append(f"{pad}{key}:\n")
            _list(v, indent, out)
        else:
            append(f"{pad}{key}: {_leaf(v)}\n")


def _list(items: Any, indent: int, out: List[str]) -> None:
    pad = " " * indent
    for v in items:
        if isinstance(v, dict) and v:
            sub: List[str] = []
            _map(v, indent + 2, sub)
            sub[0] = f"{pad}- {sub[0][indent + 2:]}"
            out.extend(sub)
        elif isinstance(v, list) and v:
            out.append(f"{pad}-\n")
            _list(v, indent + 2, out)
        elif type(v) is str:
            out.append(f"{pad}- {_str(v)}\n")
        else:
            out.append(f"{pad}- {_leaf(v)}\n")


def _leaf(v: Any) -> str:
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[]"
    return scalar(v)


def dump(obj: Any) -> str:
    """``obj`` (a dict) as a block-style YAML document."""
    out: List[str] = []
    if isinstance(obj, dict):
        _map(obj, 0, out)
    elif isinstance(obj, list):
        _list(obj, 0, out)
    else:
        out.append(scalar(obj) + "\n")
    return "".join(out)
