"""`tx ui`'s parts in-process: which schedulers the page lists by default (the default
scheduler and every scheduler with a .txconfig section, or those of `-s`), and why an app
waits or failed in one line, as `tx status` says it."""
from __future__ import annotations

import pytest

from tx.cli.cmd_status import render
from tx.cli.errors import CLIError
from tx.specs import AppState, AppStatus
from tx_ui.command import schedulers_to_show
from tx_ui.server import _why


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


def test_why_it_waits_or_failed_is_the_line_tx_status_gives():
    waiting = AppStatus(AppState.PENDING, msg="Resources: waiting for\n  2 nodes")
    assert _why(waiting) == "Resources: waiting for 2 nodes"
    assert "Msg: Resources: waiting for" in render(waiting)
    failed = AppStatus(AppState.FAILED, structured_error_msg="exit code 3\nin step 4")
    assert _why(failed) == "exit code 3 in step 4"
    assert _why(AppStatus(AppState.RUNNING)) == ""
