"""Tracker settings: which trackers jobs record to, and each one's config string.

From ``.txconfig`` (TorchX's ``[torchx:tracker]`` is read as ``[tx:tracker]``)::

    [tx:tracker]
    file =                      # names of the trackers to use (values are not used)
    mlflow =

    [tracker:file]
    config = /shared/tx-runs    # passed to the tracker's factory (meaning is its own)

or from the environment, which wins: ``TX_TRACKERS`` (comma separated names; set but empty
means none) and ``TX_TRACKER_<NAME>_CONFIG`` (:func:`tx.config.environ.tracker_config_var`),
with TorchX's ``TORCHX_*`` names read where tx's are unset.
"""
from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional

from tx.config.environ import TRACKERS, getenv, tracker_config_var
from tx.config.files import get_configs, load_sections

__all__ = ["configured_trackers", "tracker_configs"]


def tracker_configs(dirs: Optional[Iterable[str]] = None) -> Dict[str, Optional[str]]:
    """The trackers the config files configure (``[tx:tracker]`` and ``[tracker:NAME]``).

    Returns:
        ``{name: config or None}`` in the order of ``[tx:tracker]``; ``{}`` without it.

    Raises:
        tx.config.ConfigError: a config file cannot be read.
    """
    names = get_configs("tx", "tracker", dirs)
    sections = load_sections("tracker", dirs) if names else {}
    return {name: (sections.get(name, {}).get("config") or None) for name in names}


def configured_trackers(
    dirs: Optional[Iterable[str]] = None, environ: Optional[Mapping[str, str]] = None
) -> Dict[str, Optional[str]]:
    """The trackers in effect (:func:`tx.tracker.get_configured_trackers`): names from
    ``TX_TRACKERS`` when set, else from :func:`tracker_configs`; each config from
    ``TX_TRACKER_<NAME>_CONFIG`` when set (non-empty), else the file's.

    Args:
        dirs: directories searched for ``.txconfig`` (default: the usual search).
        environ: the environment to read (default ``os.environ``).

    Returns:
        ``{name: config or None}``, in order.

    Raises:
        tx.config.ConfigError: a config file cannot be read.
    """
    names_env = getenv(TRACKERS, environ)
    if names_env is not None:
        names = [n.strip() for n in names_env.split(",") if n.strip()]
        sections = load_sections("tracker", dirs) if names else {}
        out = {n: (sections.get(n, {}).get("config") or None) for n in names}
    else:
        out = tracker_configs(dirs)
    for name in out:
        value = getenv(tracker_config_var(name), environ)
        if value:
            out[name] = value
    return out
