"""``tx configure``: write a commented ``.txconfig`` template (or convert a ``.torchxconfig``)."""
from __future__ import annotations

import argparse
import os
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace) -> int:
    return _configure(args)


def _configure(args: argparse.Namespace) -> int:
    import io

    from tx.cli._common import make_runner
    from tx.cli.errors import CLIError
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


class ConfigureCommand:
    """``tx configure``: write a .txconfig with the schedulers' run options."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        return run(args)
