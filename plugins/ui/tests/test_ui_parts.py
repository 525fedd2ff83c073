"""`tx ui`'s parts in-process: which schedulers the page lists by default (the default
scheduler and every scheduler with a .txconfig section, or those of `-s`); a scheduler that
cannot be reached is one line and the rest still shows; why an app waits or failed in one
line, as `tx status` says it."""
from __future__ import annotations

import ast
import asyncio
import re
import socket
from pathlib import Path

import pytest

from tx.cli.cmd_status import render
from tx.cli.errors import CLIError
from tx.specs import AppState, AppStatus
from tx.testing.backends import require_module
from tx_ui._backend import Backend
from tx_ui.command import schedulers_to_show
from tx.views import why as _why


def test_the_default_scheduler_and_every_configured_one_else_those_of_s(tmp_path, monkeypatch):
    config = tmp_path / ".txconfig"
    config.write_text("[slurm]\npartition = debug\n\n[kubernetes]\nqueue = q\n")
    monkeypatch.setenv("TXCONFIG", str(config))
    shown = schedulers_to_show([])
    assert shown[0] == "local_cwd" and sorted(shown[1:]) == ["kubernetes", "slurm"]  # the default first
    config.write_text("[cli:run]\nscheduler = slurm\n\n[slurm]\npartition = debug\n")
    monkeypatch.setenv("TXCONFIG", str(config))
    assert schedulers_to_show([]) == ["slurm"]
    assert schedulers_to_show(["local_cwd,slurm", "local_cwd"]) == ["local_cwd", "slurm"]
    with pytest.raises(CLIError, match="unknown scheduler 'nope'"):
        schedulers_to_show(["local_cwd,nope"])


def test_the_ui_shows_what_tx_shows_from_one_module():
    """tx-ui imports from tx.cli only the contract of a plugin command (tx.cli.command and
    its CLIError); the status text, the one line of why and the order of the apps table are
    tx.views', the same functions `tx status` and `tx list` use."""
    import tx.views
    from tx.cli import cmd_list, cmd_status
    from tx_ui import _pages as server

    src = Path(server.__file__).parent
    reached = sorted({f"{path.name}: {node.module}" for path in src.rglob("*.py")
                      for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tx.cli")
                      and node.module not in ("tx.cli.command", "tx.cli.errors")})
    assert reached == []
    assert server.status_text is cmd_status.render is tx.views.status_text
    assert server.newest_first is cmd_list.newest_first is tx.views.newest_first
    assert server.why is tx.views.why and server.ACTIVE_STATES is tx.views.ACTIVE_STATES


def test_why_it_waits_or_failed_is_the_line_tx_status_gives():
    waiting = AppStatus(AppState.PENDING, msg="Resources: waiting for\n  2 nodes")
    assert _why(waiting) == "Resources: waiting for 2 nodes"
    assert "Msg: Resources: waiting for" in render(waiting)
    failed = AppStatus(AppState.FAILED, structured_error_msg="exit code 3\nin step 4")
    assert _why(failed) == "exit code 3 in step 4"
    assert _why(AppStatus(AppState.RUNNING)) == ""


def test_a_scheduler_that_cannot_be_reached_is_one_line_and_the_rest_shows(ui_env, txm, handle, tmp_path,
                                                                             monkeypatch):
    """A Kubernetes API server whose port refuses connections (the page's other case, one
    that never answers, is test_ui_http's)."""
    require_module("tx_scheduler_k8s", "the page lists a kubernetes scheduler: pip install -e plugins/scheduler-k8s")
    h = handle(txm("run", "-s", "local_cwd", "utils.echo", "--msg", "still here"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n")
    for key in ("TX_STATE_DIR", "HOME", "TMPDIR"):
        monkeypatch.setenv(key, ui_env[key])
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    backend = Backend(["local_cwd", "kubernetes"], timeout=60)
    try:
        apps, problems = asyncio.run(backend.apps())
    finally:
        backend.close()
    assert h in [a.app_handle for a in apps]
    assert len(problems) == 1 and re.fullmatch(
        rf"kubernetes: cannot reach the Kubernetes API server https://127.0.0.1:{port}: .*Connection refused "
        r"\(none of its apps are shown\)", problems[0]), problems


def test_the_pages_are_plain_route_handlers_in_one_table():
    """Every route is a module-level handler of tx_ui._pages taking the app's state as an
    argument (no handler defined inside create_app, which only builds the table's routes)."""
    import inspect

    from tx_ui import _pages, server

    assert [path for path, _h, _m in _pages.ROUTES] == [
        "/", "/app", "/sweep", "/cancel", "/events/apps", "/events/app", "/events/sweep", "/events/log",
        "/tracking", "/tracking/run", "/health"]
    for _path, handler, _methods in _pages.ROUTES:
        assert handler is getattr(_pages, handler.__name__), handler
        assert list(inspect.signature(handler).parameters)[:2] == ["ui", "request"], handler
    assert len(inspect.getsource(server.create_app).splitlines()) < 30
