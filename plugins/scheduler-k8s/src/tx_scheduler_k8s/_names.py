"""Kubernetes object names: RFC 1123 labels, unique app ids, label values.

Rules (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/):

* a DNS label (RFC 1123): at most 63 characters, lowercase alphanumerics and ``-``,
  starting and ending with an alphanumeric. Pod host names, Volcano task names and JobSet
  replicated-job names must be labels; so must every part of a DNS name built from them.
* a DNS-1035 label (Service names): the same, starting with a letter.
* label values: at most 63 characters of ``[A-Za-z0-9_.-]``, alphanumeric at both ends.
"""
from __future__ import annotations

import functools
import re
from typing import Dict, Iterable, List

from tx.schedulers import get_len_random_id

MAX_LABEL = 63
#: characters of the random part of an app id (20 * 29**7 ~ 3e11 ids)
ID_CHARS = 8

#: the namespace of an app id without one, and of run option ``namespace`` unset
DEFAULT_NAMESPACE = "default"
_BAD = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


def normalize(name: str) -> str:
    """``name`` as a DNS label: lowercase, runs of other characters to ``-``, no ``-`` at
    the ends ("" when nothing is left). Not truncated."""
    out = _DASHES.sub("-", _BAD.sub("-", name.lower()))
    return out.strip("-")


def is_label(name: str) -> bool:
    """True for a valid RFC 1123 DNS label (63 characters at most)."""
    return len(name) <= MAX_LABEL and bool(_LABEL.match(name))


def is_subdomain(name: str) -> bool:
    """True for a valid DNS subdomain (RFC 1123: dot-separated labels, 253 characters at
    most), the form of most object names."""
    return 0 < len(name) <= 253 and all(is_label(p) for p in name.split("."))


def is_label_value(value: str) -> bool:
    """True for a valid label value."""
    return len(value) <= MAX_LABEL and bool(_LABEL_VALUE.match(value))


def is_qualified_name(key: str) -> bool:
    """True for a valid label key (``[prefix/]name``, as ``node.kubernetes.io/instance-type``)."""
    return len(key) <= 317 and bool(_QUALIFIED.match(key))


@functools.lru_cache(maxsize=1024)
def label_value(value: str) -> str:
    """``value`` made a valid label value (invalid characters to ``-``, cut to 63); kept for
    the values met last (a sweep labels each trial's objects with the same few)."""
    out = re.sub(r"[^A-Za-z0-9_.-]+", "-", value)[:MAX_LABEL]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", out)


def role_names(roles: Iterable[str], longest: int) -> Dict[str, str]:
    """Role name -> its DNS-label form, for every role.

    Args:
        roles: the role names of an app.
        longest: the most characters a normalized role name may have (what is left of 63
            once the app id prefix and replica suffixes are counted).

    Raises:
        ValueError: a role name with no letter or digit, one that is too long, or two roles
            whose names normalize to the same label (one line, naming the role).
    """
    out: Dict[str, str] = {}
    seen: Dict[str, str] = {}
    for name in roles:
        norm = normalize(name)
        if not norm:
            raise ValueError(
                f"role name {name!r} cannot be a Kubernetes name: it needs at least one letter or digit"
            )
        if len(norm) > longest:
            raise ValueError(
                f"role name {name!r} is too long for Kubernetes: at most {longest} characters "
                f"(lowercase letters, digits and '-') fit in the 63-character pod host name"
            )
        if norm in seen:
            raise ValueError(
                f"role names {seen[norm]!r} and {name!r} are the same Kubernetes name {norm!r}: rename one"
            )
        seen[norm] = name
        out[name] = norm
    return out


def app_id(app_name: str, budget: int) -> str:
    """A unique app id ``<name>-<random>`` of at most ``budget`` characters that is a
    DNS-1035 label (it names Services too): the normalized app name, leading digits
    dropped ("app" if nothing is left), cut to fit.

    Raises:
        ValueError: ``budget`` leaves no room for a name and the random part.
    """
    base = normalize(app_name).lstrip("0123456789-") or "app"
    room = budget - ID_CHARS - 1
    if room < 1:
        raise ValueError(f"no room for an app id in {budget} characters")
    base = base[:room].rstrip("-")
    return f"{base}-{get_len_random_id(ID_CHARS)}"


def split_app_id(app_id: str, default_namespace: str) -> List[str]:
    """``"namespace:name"`` -> ``[namespace, name]``; a bare ``name`` takes
    ``default_namespace``."""
    if ":" in app_id:
        ns, _, name = app_id.partition(":")
        return [ns or default_namespace, name]
    return [default_namespace, app_id]
