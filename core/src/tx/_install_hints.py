"""Install hints: the ``pip install`` command that provides a plugin distribution, from
where tx-core was installed from (a checkout, a wheel, an index), and the names tx's own
plugin distributions register (``tx/known_plugins.json``). Public through
:mod:`tx.plugins`.
"""
from __future__ import annotations

import functools
import json
from typing import Dict, Optional, Tuple

from tx.hooknames import KINDS

__all__ = ["install_hint", "known_plugins", "KNOWN_PLUGINS_FILE", "not_installed_hint", "pip_install"]


def install_hint() -> str:
    """The one-line hint printed when no scheduler is installed."""
    return f"no scheduler is installed; install one, e.g.: {pip_install('tx-scheduler-local')}"


def pip_install(distribution: str) -> str:
    """The command that installs ``distribution`` (one of tx's plugin distributions) from
    where tx-core was installed from, as pip recorded it (PEP 610 ``direct_url.json``):
    from a checkout (``pip install ./core``, editable or not), the plugin's directory beside
    it (``pip install ./plugins/scheduler-slurm``, relative to the current directory when
    under it, as it is when the hint is made: where the plugin is is found once per process,
    how it is shown every time; ``-e`` when tx-core is editable); from a wheel file, the
    plugin's wheel in the same directory if there is one; otherwise (an index)
    ``pip install DISTRIBUTION``. Never raises: a hint is a courtesy."""
    try:
        found = _located(distribution)
        if found is not None:
            return f"pip install {'-e ' if found[1] else ''}{_shown(found[0])}"
    except Exception:  # noqa: BLE001 - a hint must never fail the command that shows it
        pass
    return f"pip install {distribution}"


@functools.lru_cache(maxsize=None)
def _located(distribution: str) -> Optional[Tuple[str, bool]]:
    """``(the plugin's directory or wheel, tx-core is editable)`` beside where tx-core was
    installed from, else None; read once per process (the installation does not move)."""
    try:
        where = _core_source()
        if where is not None:
            kind, path, editable = where
            found = _plugin_dir(path, distribution) if kind == "dir" else _wheel_beside(path, distribution)
            if found is not None:
                return found, editable
    except Exception:  # noqa: BLE001 - a hint must never fail the command that shows it
        pass
    return None


def _core_source() -> Optional[Tuple[str, str, bool]]:
    """``("dir", checkout's core directory, editable)`` or ``("wheel", wheel file, False)``
    where tx-core was installed from a local path, else None (an index)."""
    # deferred: importlib.metadata and urllib only when an install hint is shown
    import importlib.metadata
    import os  # deferred, as importlib.metadata
    from urllib.parse import unquote, urlparse  # deferred, as importlib.metadata

    text = importlib.metadata.distribution("tx-core").read_text("direct_url.json")
    if not text:
        return None
    data = json.loads(text)
    url = urlparse(str(data.get("url", "")))
    if url.scheme != "file":
        return None
    path = unquote(url.path)
    if "dir_info" in data and os.path.isdir(path):
        return "dir", path, bool((data.get("dir_info") or {}).get("editable"))
    if path.endswith(".whl") and os.path.isdir(os.path.dirname(path)):
        return "wheel", path, False
    return None


def _plugin_dir(core_dir: str, distribution: str) -> Optional[str]:
    """The directory under ``<checkout>/plugins`` whose pyproject.toml names ``distribution``."""
    import glob  # deferred, as in _core_source
    import os  # deferred, as in _core_source
    import re  # deferred, as in _core_source

    name = re.compile(rf'^name\s*=\s*["\']{re.escape(distribution)}["\']\s*$', re.M)
    for pyproject in sorted(glob.glob(os.path.join(os.path.dirname(core_dir.rstrip("/")), "plugins", "*",
                                                   "pyproject.toml"))):
        with open(pyproject, encoding="utf-8") as f:
            if name.search(f.read()):
                return os.path.dirname(pyproject)
    return None


def _wheel_beside(wheel: str, distribution: str) -> Optional[str]:
    """A wheel of ``distribution`` in the directory of ``wheel`` (the newest name), else None."""
    import glob  # deferred, as in _core_source
    import os  # deferred, as in _core_source

    found = sorted(glob.glob(os.path.join(os.path.dirname(wheel), distribution.replace("-", "_") + "-*.whl")))
    return found[-1] if found else None


def _shown(path: str) -> str:
    """``path`` as ``./rel/path`` when it is under the current directory, else absolute."""
    import os  # deferred, as in _core_source

    rel = os.path.relpath(path)
    return f"./{rel}" if not rel.startswith("..") else os.path.abspath(path)


#: the package data file of :func:`known_plugins`
KNOWN_PLUGINS_FILE = "known_plugins.json"


@functools.lru_cache(maxsize=None)
def known_plugins() -> Dict[str, Dict[str, str]]:
    """Names that tx's own plugin distributions register: registry kind -> name ->
    distribution, read from tx-core's package data file ``tx/known_plugins.json`` on first
    use (a plugin added to the project is a line there, not code here). A file that cannot
    be read gives ``{}``: hints are a courtesy, never an error."""
    from importlib import resources  # deferred: importlib.resources only when an install hint is shown

    try:
        text = resources.files("tx").joinpath(KNOWN_PLUGINS_FILE).read_text(encoding="utf-8")
    except OSError:
        return {}
    return _parse_known_plugins(text)


def _parse_known_plugins(text: str) -> Dict[str, Dict[str, str]]:
    """The kinds of :data:`KINDS` in ``text`` (JSON: kind -> name -> distribution), their
    string entries only; ``{}`` for text that is not a JSON object."""

    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        kind: {n: d for n, d in names.items() if isinstance(d, str)}
        for kind, names in data.items() if kind in KINDS and isinstance(names, dict)
    }


def not_installed_hint(kind: str, name: str) -> Optional[str]:
    """``"pip install DIST"`` for a name of ``kind`` that one of tx's distributions
    registers (see :func:`known_plugins`), else None."""
    dist = known_plugins().get(kind, {}).get(name)
    return pip_install(dist) if dist else None
