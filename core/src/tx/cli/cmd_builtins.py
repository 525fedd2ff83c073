"""``tx builtins``: the components tx can find."""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--print", dest="print_name", default=None, metavar="NAME",
                   help="print the source of component NAME")
    p.add_argument("--json", action="store_true", help="print JSON lines (name, description, fn_name, source, distribution)")


def run(args: argparse.Namespace) -> int:
    return _builtins(args)


def _builtins(args: argparse.Namespace) -> int:
    from tx.components.system import finder

    if args.print_name:
        sys.stdout.write(finder.get_builtin_source(args.print_name))
        return 0
    from tx.cli._text import plain

    comps = finder.get_components()
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


class BuiltinsCommand:
    """``tx builtins``: list the components tx can find."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        return run(args)
