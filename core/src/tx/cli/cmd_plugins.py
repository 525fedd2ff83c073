"""``tx plugins``: installed plugins, what they registered, what is broken (the text leaves out
the ``NULL`` and ``MISSING`` named resources, TorchX's placeholders; ``--json`` has them)."""
from __future__ import annotations

import argparse
import json
from typing import Any, Dict

from tx.cli.command import Argument, Command

__all__ = ["COMMAND"]

#: named resources that stand for "no resource" (TorchX's ``named_resources["NULL"]`` and
#: ``["MISSING"]``): registered for compatibility, left out of the text listing (kept in --json)
_SENTINEL_RESOURCES = ("NULL", "MISSING")


def _plugins(args: argparse.Namespace) -> int:
    # the registry (attrs, pluggy) is imported when the command runs, not when its parser is built
    from tx.plugins import CORE_PLUGIN, get_registry, install_hint, pip_install

    reg = get_registry()
    rows = []
    for info in reg.plugins.values():
        missing: Dict[str, Any] = {}
        for kind, names in info.registered.items():
            for n in names:
                r = reg.registrations[kind].get(n)
                if r is not None and r.missing_requirements():
                    missing[n] = {"needs": r.missing_requirements(),
                                  "fix": r.install or pip_install(r.distribution)}
        descriptions = {
            kind: {n: r.description for n in names
                   for r in [reg.registrations[kind].get(n)] if r is not None and r.description}
            for kind, names in info.registered.items()
        }
        rows.append({
            "plugin": info.name, "distribution": info.distribution, "version": info.version,
            "registered": info.registered, "error": info.error, "unavailable": missing,
            "descriptions": {k: v for k, v in descriptions.items() if v},
        })
    conflicts = {k: {n: [r.distribution for r in regs] for n, regs in v.items()}
                 for k, v in reg.conflicts.items() if v}
    if args.json:
        print(json.dumps({"plugins": rows, "conflicts": conflicts}, indent=2))
        return 0
    for row in rows:
        status = "unavailable" if row["error"] else "ok"
        print(f"{row['plugin']} ({row['distribution']} {row['version']}): {status}")
        for kind, names in row["registered"].items():
            if kind == "named_resources":  # TorchX's placeholders for "no resource", not sizes to pick
                names = [n for n in names if n not in _SENTINEL_RESOURCES]
            if getattr(args, "verbose", False):
                described = row["descriptions"].get(kind, {})
                for n in names:
                    text = described.get(n)
                    print(f"    {kind[:-1].replace('_', ' ')} {n or '(top level)'}" + (f": {text}" if text else ""))
            else:
                print(f"    {kind}: {', '.join(n or '(top level)' for n in names)}")
        if row["error"]:
            print(f"    error: {row['error']}")
        for n, m in row["unavailable"].items():
            print(f"    {n}: needs {', '.join(m['needs'])}; fix: {m['fix']}")
    for kind, names in conflicts.items():
        for n, dists in names.items():
            print(f"conflict: {kind} {n!r} registered by {' and '.join(dists)}")
    if not [r for r in rows if r["plugin"] != CORE_PLUGIN] or not reg.names("schedulers"):
        print(install_hint())
    return 0


#: ``tx plugins``: list installed plugins and what they registered
COMMAND = Command(run=_plugins, arguments=(
    Argument("--json", action="store_true", help="print JSON"),
    Argument("-v", "--verbose", action="store_true",
             help="one line per registered name, with its description (where it came from)"),
))
