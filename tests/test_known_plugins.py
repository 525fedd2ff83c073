"""tx-core's install hints (``tx/known_plugins.json``) name what tx's own plugin
distributions really register: every scheduler, workspace kind and tracker of every plugin
in plugins/ is in the table with its distribution, and the table names nothing else."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Dict, Tuple


from tx.plugins import PluginRegistry, known_plugins
from tx.testing.backends import backend_unavailable, require_module

tomllib = require_module("tomllib", "reads the plugins' pyproject.toml: Python 3.11+ (the standard library's tomllib)")

REPO = Path(__file__).resolve().parent.parent
HINTED = ("schedulers", "workspaces", "trackers")


def _plugin_entry_points():
    """``(entry point, module, distribution)`` of every plugin in plugins/ except
    tx-torchx-compat (it registers what other distributions declare)."""
    for pyproject in sorted((REPO / "plugins").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        for name, module in project.get("entry-points", {}).get("tx", {}).items():
            if project["name"] != "tx-torchx-compat":
                yield name, module, project["name"]


def test_the_table_matches_what_the_plugins_register():
    registered: Dict[Tuple[str, str], str] = {}
    for name, module, dist in _plugin_entry_points():
        if importlib.util.find_spec(module.partition(":")[0].rpartition(".")[0]) is None:
            backend_unavailable(dist, "the distribution is not installed: pip install -e plugins/<its directory>")
        reg = PluginRegistry(entry_points=[(name, module, dist, "0")], builtins=False)
        assert reg.plugins[name].error is None, reg.plugins[name].error
        for kind in HINTED:
            for n in reg.names(kind):
                registered[(kind, n)] = dist
    table = {(kind, n): d for kind, names in known_plugins().items() for n, d in names.items()}
    assert table == registered
