"""Unique app ids: ``name-<id>`` where the id is safe in Kubernetes names and DNS labels."""
from __future__ import annotations

import os
import re
import unicodedata

__all__ = ["RESERVED_NAME", "clean_name", "get_len_random_id", "make_unique", "random_id", "unreserved"]

#: app names tx keeps for run and sweep handles: ``run`` or ``sweep`` (any case), alone or
#: followed by ``-``, ``_`` or ``.``. An app so named gets ids such as ``run-<random>`` that can
#: take the form of a run's or a sweep's id (``run-<name>-<8 hex>``), so that a handle would
#: name two things; :func:`tx.runner.handles.check_not_reserved` refuses them
RESERVED_NAME = re.compile(r"^(run|sweep)([-_.]|$)", re.IGNORECASE)

_START = "bcdfghjklmnpqrstvwxz"
_REST = _START + "012345679"


def random_id() -> str:
    """A random id of about 13 characters: a consonant, then consonants and digits
    (no vowels, so no words; starts with a letter, so valid as a DNS label)."""
    v = int.from_bytes(os.urandom(8), "little")
    out = [_START[v % len(_START)]]
    v //= len(_START)
    while v:
        out.append(_REST[v % len(_REST)])
        v //= len(_REST)
    return "".join(out)


def get_len_random_id(string_length: int) -> str:
    """A random id of exactly ``string_length`` characters (>= 1), first one a letter."""
    if string_length < 1:
        raise ValueError("string_length must be >= 1")
    raw = os.urandom(string_length)
    # 256 % 20 and 256 % 29 are small: the bias is below 4%, immaterial for ids
    return _START[raw[0] % len(_START)] + "".join(_REST[b % len(_REST)] for b in raw[1:])


def make_unique(name: str, string_length: int = 0) -> str:
    """``name-<random id>``; with ``string_length`` the id has that many characters."""
    rid = get_len_random_id(string_length) if string_length else random_id()
    return f"{name}-{rid}"


def clean_name(name: str, unsafe: str = r"[^A-Za-z0-9_.-]+", fallback: str = "app") -> str:
    """The part of an app id that comes from a user's app name: accents folded to ASCII
    (``Über`` -> ``Uber``), each run of characters matching ``unsafe`` replaced by one
    ``-``, and leading or trailing ``-``, ``.`` and ``_`` removed, so that the id never
    starts with ``-`` (which no command could then address). ``fallback`` when nothing is
    left (``日本語``, ``@@``).

    >>> clean_name("Über-run"), clean_name("(exp)"), clean_name("日本語"), clean_name("@team")
    ('Uber-run', 'exp', 'app', 'team')
    """

    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    out = re.sub(unsafe, "-", ascii_name).strip("-._")
    return out or fallback


def unreserved(name: str) -> str:
    """A name tx derived for an app (from a script or module), made safe from
    :data:`RESERVED_NAME`: ``run`` (from ``--script run.py``) -> ``app-run``; other names
    unchanged. A name the user chose is never changed: it is refused instead."""
    return f"app-{name}" if RESERVED_NAME.match(name or "") else name
