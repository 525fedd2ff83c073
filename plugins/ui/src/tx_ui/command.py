"""``tx ui``: serve the local web page (the command's record; the web stack is imported when
it runs, so ``tx --help`` and ``tx completion`` stay fast)."""
from __future__ import annotations

import argparse
import socket
import sys
from typing import List

from tx import Argument, CLIError, Command

__all__ = ["COMMAND", "schedulers_to_show"]


def schedulers_to_show(asked: List[str]) -> List[str]:
    """The schedulers whose apps the page lists: those of ``-s`` (comma-separated, repeated),
    else the default scheduler (``[cli:run] scheduler``, else ``local_cwd``, else the first
    installed) and every installed scheduler with a section in ``.txconfig``.

    Raises:
        CLIError: a scheduler named with ``-s`` is not installed, or none is installed.
    """
    # the settings, the registry and the scheduler API: only when the command runs
    from tx.config import get_config, scheduler_section
    from tx import get_registry, install_hint
    from tx.schedulers import get_default_scheduler_name

    installed = get_registry().names("schedulers")
    names = [s.strip() for text in asked for s in text.split(",") if s.strip()]
    if names:
        unknown = [s for s in names if s not in installed]
        if unknown:
            raise CLIError(f"unknown scheduler {unknown[0]!r}; installed: {', '.join(installed) or 'none'}", 2)
        return list(dict.fromkeys(names))
    first = get_config("cli", "run", "scheduler") or get_default_scheduler_name(installed)
    if first is None:
        raise CLIError(install_hint())
    return list(dict.fromkeys([first, *(s for s in installed if scheduler_section(s))]))


def _port(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535 (0: a free one), got {text!r}")
    return n


def _seconds(text: str) -> float:
    try:
        n = float(text)
    except ValueError:
        n = 0.0
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return n


def _ui(args: argparse.Namespace) -> int:
    schedulers = schedulers_to_show(args.scheduler)
    try:
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((args.host, args.port))
        sock.listen(128)
    except OSError as e:
        raise CLIError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    port = sock.getsockname()[1]
    # the web stack (Starlette, uvicorn, Jinja2): only when the command runs (module docstring)
    from tx_ui._backend import Backend
    from tx_ui.server import create_app, new_token, run_server, serve_url

    token = new_token()
    url = serve_url(args.host, port, token)
    backend = Backend(schedulers, timeout=args.timeout)
    backend.prefetch()
    app = create_app(backend, token, port)

    def ready() -> None:
        print(f"tx ui: serving the apps of {', '.join(schedulers)} at", flush=True)
        print(f"    {url}", flush=True)
        print("tx ui: every request needs this token; Ctrl-C stops the server", file=sys.stderr, flush=True)
        if args.open:
            # the browser module: only with --open
            import webbrowser

            webbrowser.open(url)

    try:
        run_server(sock, app, on_ready=ready)
    finally:
        backend.close()
        sock.close()
    return 0


#: ``tx ui``: serve the local web page
COMMAND = Command(run=_ui, arguments=(
    Argument("--host", default="127.0.0.1",
             help="address to listen on (default: 127.0.0.1, this machine only)"),
    Argument("--port", type=_port, default=0, help="port to listen on (default: 0, a free one)"),
    Argument("--open", action="store_true", help="open the page in the browser"),
    Argument("-s", "--scheduler", action="append", default=[], metavar="SCHEDULER",
             help="list the apps of these schedulers (repeat or comma-separate; default: the default "
                  "scheduler and every scheduler with a section in .txconfig)"),
    Argument("--timeout", type=_seconds, default=10.0,
             help="seconds to wait for a scheduler before the page says it gave no answer (default: 10)"),
))
