"""``tx configure``: write a commented ``.txconfig`` template (or convert a ``.torchxconfig``)."""
from __future__ import annotations

import argparse
import io
import os
import sys

from tx.cli._common import make_runner
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError

__all__ = ["COMMAND"]


def _configure(args: argparse.Namespace) -> int:
    # the settings and the registry are imported when the command runs, not when its parser is built
    from tx.plugins import install_hint
    from tx.config import CONFIG_FILE
    from tx.config.run_options import template
    from tx.config.torchx import convert_torchx_config, find_torchx_config

    buf = io.StringIO()
    if args.from_torchx is not None:
        src = find_torchx_config(args.from_torchx or None)
        with open(src) as f:
            buf.write(convert_torchx_config(f.read()))
        print(f"converted {src}", file=sys.stderr)
    else:
        with make_runner() as runner:
            names = [s for s in (args.schedulers or "").split(",") if s] or runner.scheduler_backends()
            if not names:
                raise CLIError(install_hint())
            opts = {n: runner.scheduler_run_opts(n) for n in names}
        template(buf, opts)
    if args.print_only:
        sys.stdout.write(buf.getvalue())
        return 0
    # `torchx configure` (tx-torchx-compat) sets config_file=".torchxconfig" and force, as TorchX does
    path = os.path.join(os.getcwd(), getattr(args, "config_file", None) or CONFIG_FILE)
    if os.path.exists(path) and not args.force:
        raise CLIError(f"{path} exists; use --force to overwrite it or --print to see the template")
    with open(path, "w") as f:
        f.write(buf.getvalue())
    print(f"wrote {path}", file=sys.stderr)
    return 0


#: ``tx configure``: write a .txconfig with the schedulers' run options
COMMAND = Command(run=_configure, arguments=(
    Argument("-s", "--schedulers", default=None, help="comma-separated schedulers (default: all installed)"),
    Argument("--print", dest="print_only", action="store_true",
             help="print to stdout instead of writing ./.txconfig"),
    Argument("-a", "--all", dest="all_opts", action="store_true",
             help="accepted for TorchX's `configure -a`: the template always has every run option"),
    Argument("--force", action="store_true", help="overwrite an existing ./.txconfig"),
    Argument("--from-torchx", "--from_torchx", dest="from_torchx", nargs="?", const="", default=None,
             metavar="PATH",
             help="convert TorchX's .torchxconfig (PATH, else $TORCHXCONFIG, else the "
                  "nearest one from here up, then ~) into ./.txconfig"),
))
