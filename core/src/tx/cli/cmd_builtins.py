"""``tx builtins``: the components tx can find."""
from __future__ import annotations

import argparse
import json
import sys

from tx.cli._text import plain
from tx.cli.command import Argument, Command

__all__ = ["COMMAND"]


def _builtins(args: argparse.Namespace) -> int:
    # the component finder is imported when the command runs, not when its parser is built
    from tx.components.system.finder import get_builtin_source, get_components

    if args.print_name:
        sys.stdout.write(get_builtin_source(args.print_name))
        return 0
    comps = get_components()
    if args.json:
        for name, comp in sorted(comps.items()):
            print(json.dumps({"name": name, "description": plain(comp.description or "").strip(),
                              "fn_name": comp.fn_name, "source": comp.source,
                              "distribution": comp.distribution}))
        return 0
    print(f"Found {len(comps)} components:")
    width = max((len(n) for n in comps), default=0)
    for i, (name, comp) in enumerate(sorted(comps.items()), start=1):
        print(f"{i:3d}. {name.ljust(width)}  {plain(comp.description.splitlines()[0]) if comp.description else ''}")
    return 0


#: ``tx builtins``: list the components tx can find
COMMAND = Command(run=_builtins, arguments=(
    Argument("--print", dest="print_name", default=None, metavar="NAME",
             help="print the source of component NAME"),
    Argument("--json", action="store_true",
             help="print JSON lines (name, description, fn_name, source, distribution)"),
))
