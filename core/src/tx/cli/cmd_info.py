"""``tx builtins``, ``tx runopts``, ``tx configure``, ``tx plugins`` and ``tx lint``."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    if name == "builtins":
        p.add_argument("--print", dest="print_name", default=None, metavar="NAME",
                       help="print the source of component NAME")
        p.add_argument("--json", action="store_true", help="print JSON lines (name, description, fn_name, source, distribution)")
    elif name == "runopts":
        p.add_argument("scheduler", nargs="?", default=None, help="one scheduler (default: all)")
        p.add_argument("--format", choices=["text", "markdown", "json"], default="text",
                       help="text (TorchX's usage text), a markdown table (plugin READMEs) or JSON")
    elif name == "configure":
        p.add_argument("-s", "--schedulers", default=None,
                       help="comma-separated schedulers (default: all installed)")
        p.add_argument("--print", dest="print_only", action="store_true",
                       help="print to stdout instead of writing ./.txconfig")
        p.add_argument("-a", "--all", dest="all_opts", action="store_true",
                       help="accepted for TorchX's `configure -a`: the template always has every run option")
        p.add_argument("--force", action="store_true", help="overwrite an existing ./.txconfig")
        p.add_argument("--from-torchx", "--from_torchx", dest="from_torchx", nargs="?", const="",
                       default=None, metavar="PATH",
                       help="convert TorchX's .torchxconfig (PATH, else $TORCHXCONFIG, else the "
                            "nearest one from here up, then ~) into ./.txconfig")
    elif name == "plugins":
        p.add_argument("--json", action="store_true", help="print JSON")
        p.add_argument("-v", "--verbose", action="store_true",
                       help="one line per registered name, with its description (where it came from)")
    elif name == "lint":
        p.add_argument("path", metavar="FILE[:FUNCTION]", help="a Python file of component functions")


def run(args: argparse.Namespace) -> int:
    return int(globals()[f"_{args.command}"](args) or 0)


def _builtins(args: argparse.Namespace) -> int:
    from tx.specs import finder

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


def _runopts(args: argparse.Namespace) -> int:
    from tx.cli._common import make_runner
    from tx.cli.main import CLIError
    from tx.plugins import install_hint

    with make_runner() as runner:
        names = [args.scheduler] if args.scheduler else runner.scheduler_backends()
        if not names:
            raise CLIError(install_hint())
        for name in names:
            try:
                opts = runner.scheduler_run_opts(name)
            except Exception as e:  # noqa: BLE001 - one broken plugin must not hide the rest
                if args.scheduler:
                    raise
                from tx.cli._errors import describe_error

                print(f"{name}:\n    unavailable: {describe_error(e)}\n")
                continue
            print(_format_runopts(name, opts, args.format))
    return 0


def _format_runopts(name: str, opts: Any, fmt: str) -> str:
    from tx.specs.runopts import get_type_name

    if fmt == "text":
        return f"{name}:\n{opts!r}"
    rows = [
        {"name": k, "type": get_type_name(o.opt_type), "required": o.is_required,
         "default": o.default, "help": o.help}
        for k, o in opts
    ]
    if fmt == "json":
        return json.dumps({"scheduler": name, "runopts": rows})
    out = [f"### `{name}` run options\n", "| option | type | default | description |",
           "| --- | --- | --- | --- |"]
    for r in rows:
        default = "**required**" if r["required"] else f"`{r['default']!r}`"
        out.append(f"| `{r['name']}` | `{r['type']}` | {default} | {r['help']} |")
    return "\n".join(out) + "\n"


def _configure(args: argparse.Namespace) -> int:
    import io

    from tx.cli._common import make_runner
    from tx.cli.main import CLIError
    from tx.plugins import install_hint
    from tx.runner import config

    buf = io.StringIO()
    if args.from_torchx is not None:
        src = config.find_torchx_config(args.from_torchx or None)
        with open(src) as f:
            buf.write(config.convert_torchx_config(f.read()))
        print(f"converted {src}", file=sys.stderr)
    else:
        with make_runner() as runner:
            names = [s for s in (args.schedulers or "").split(",") if s] or runner.scheduler_backends()
            if not names:
                raise CLIError(install_hint())
            opts = {n: runner.scheduler_run_opts(n) for n in names}
        config.template(buf, opts)
    if args.print_only:
        sys.stdout.write(buf.getvalue())
        return 0
    path = os.path.join(os.getcwd(), config.CONFIG_FILE)
    if os.path.exists(path) and not args.force:
        raise CLIError(f"{path} exists; use --force to overwrite it or --print to see the template")
    with open(path, "w") as f:
        f.write(buf.getvalue())
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _plugins(args: argparse.Namespace) -> int:
    from tx.plugins import CORE_PLUGIN, get_registry, install_hint

    reg = get_registry()
    rows = []
    for info in reg.plugins.values():
        missing: Dict[str, Any] = {}
        for kind, names in info.registered.items():
            for n in names:
                r = reg.registrations[kind].get(n)
                if r is not None and r.missing_requirements():
                    missing[n] = {"needs": r.missing_requirements(),
                                  "fix": r.install or f"pip install {r.distribution}"}
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


def _lint(args: argparse.Namespace) -> int:
    from tx.cli.main import CLIError
    from tx.specs import file_linter

    path, _, fn = args.path.partition(":")
    if not os.path.isfile(path):
        raise CLIError(f"{path}: no such file", 2)
    if fn:
        results = {fn: file_linter.validate(path, fn)}
    else:
        results = file_linter.validate_module(path)
    bad = 0
    for name, messages in results.items():
        for m in messages:
            print(f"{path}:{m.line}:{m.char}: {m.severity}: {name}: {m.description}")
            bad += m.severity == "error"
    if not bad:
        print(f"{path}: {len(results)} component(s), no errors", file=sys.stderr)
    return 1 if bad else 0
