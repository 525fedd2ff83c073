"""``tx runopts [SCHEDULER]``: run options, as text, markdown or JSON."""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from tx.cli._common import make_runner
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError, describe_error

if TYPE_CHECKING:
    from tx.specs.runopts import runopts

__all__ = ["COMMAND"]


def _runopts(args: argparse.Namespace) -> int:
    # the registry is imported when the command runs, not when its parser is built
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
                print(f"{name}:\n    unavailable: {describe_error(e)}\n")
                continue
            print(_format_runopts(name, opts, args.format))
    return 0


def _format_runopts(name: str, opts: runopts, fmt: str) -> str:
    # the model is imported when the command runs, not when its parser is built
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


#: ``tx runopts``: show a scheduler's run options
COMMAND = Command(run=_runopts, arguments=(
    Argument("scheduler", nargs="?", default=None, help="one scheduler (default: all)"),
    Argument("--format", choices=["text", "markdown", "json"], default="text",
             help="text (TorchX's usage text), a markdown table (plugin READMEs) or JSON"),
))
