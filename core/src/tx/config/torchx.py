"""TorchX's config files, converted: ``tx configure --from-torchx``.

(Reading ``.torchxconfig`` where no ``.txconfig`` exists is :func:`tx.config.find_configs`.)
"""
from __future__ import annotations

import os
from typing import List, Optional

from tx.config.files import ENV_TORCHXCONFIG, TORCHX_CONFIG_FILE, ConfigError, read_ini, search_dirs

__all__ = ["convert_torchx_config", "find_torchx_config"]


def find_torchx_config(path: Optional[str] = None) -> str:
    """The TorchX config file ``tx configure --from-torchx`` converts: ``path``, else
    ``$TORCHXCONFIG``, else the nearest ``.torchxconfig`` (the working directory, its
    parents, then home).

    Raises:
        ConfigError: the file does not exist, or none is found.
    """
    path = path or os.environ.get(ENV_TORCHXCONFIG)
    if path:
        if not os.path.isfile(path):
            raise ConfigError(f"{path}: no such file")
        return path
    for d in search_dirs():
        candidate = os.path.join(d, TORCHX_CONFIG_FILE)
        if os.path.isfile(candidate):
            return candidate
    raise ConfigError(f"no {TORCHX_CONFIG_FILE} in the working directory, its parents or ~")


def convert_torchx_config(text: str) -> str:
    """A ``.txconfig`` from the text of a TorchX ``.torchxconfig``, line by line (comments
    and layout kept): ``[torchx:tracker]`` becomes ``[tx:tracker]``; a ``[component:]``
    section with an empty component name (meaningless to both) is dropped with its keys;
    every other section and key is the same in both formats.

    Raises:
        ConfigError: the text is not valid INI.
    """
    read_ini(text, TORCHX_CONFIG_FILE)
    out: List[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("[") and "]" in stripped:
            name = stripped[1:stripped.index("]")].strip()
            prefix, sep, rest = name.partition(":")
            skipping = prefix == "component" and sep and not rest.strip()
            if name == "torchx:tracker":
                line = line.replace("torchx:tracker", "tx:tracker", 1)
        if not skipping:
            out.append(line)
    return "".join(out)
