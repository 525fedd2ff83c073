"""UserError: every error written for users derives from it and is one line in the CLI;
other exceptions are 'unexpected'. The console exit runs atexit handlers."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tx.cli.errors import EXIT_USAGE, CLIError, describe_error, exit_code, report
from tx.errors import UserError


def _user_error_classes():
    from tx.plugins import PluginConflictError, PluginError
    from tx.config import ConfigError
    from tx.schedulers import SchedulerError
    from tx.specs import (
        AppDefFormatError,
        AppStatusError,
        InvalidRunConfigException,
        MalformedAppHandleException,
        UnknownAppException,
        UnknownSchedulerException,
    )
    from tx.components.system.errors import ComponentArgumentError, ComponentNotFoundException
    from tx.workspace import WorkspaceError

    return [CLIError, PluginError, PluginConflictError, ConfigError, SchedulerError, AppDefFormatError,
            AppStatusError, InvalidRunConfigException, MalformedAppHandleException, UnknownAppException,
            UnknownSchedulerException, ComponentArgumentError, ComponentNotFoundException, WorkspaceError]


@pytest.mark.parametrize("cls", _user_error_classes(), ids=lambda c: c.__name__)
def test_user_errors_derive_from_user_error(cls):
    assert issubclass(cls, UserError)


def test_describe_error_user_vs_unexpected():
    from tx.schedulers import SchedulerError

    assert describe_error(SchedulerError("queue 'q' does not exist")) == "queue 'q' does not exist"
    assert describe_error(ValueError("bad value")) == "bad value"
    msg = describe_error(ZeroDivisionError("division by zero"))
    assert msg.startswith("ZeroDivisionError: division by zero (unexpected;"), msg


def test_errors_are_told_apart_by_class_not_by_name(capsys):
    from tx.specs import InvalidRunConfigException
    from tx.components.system.errors import ComponentArgumentError, ComponentNotFoundException

    assert exit_code(CLIError("usage", EXIT_USAGE)) == 2 and exit_code(CLIError("failed")) == 1
    assert exit_code(ComponentArgumentError("--msg is required")) == 2
    assert exit_code(ComponentNotFoundException("no component x")) == 1 and exit_code(ValueError("v")) == 1
    assert describe_error(InvalidRunConfigException("bad -cfg", "k", "k=1")) == (
        "bad -cfg (see `tx runopts <scheduler>`)")

    class InvalidRunConfigException(Exception):  # TorchX's name, not tx's class
        pass

    assert describe_error(InvalidRunConfigException("x")).startswith("InvalidRunConfigException: x (unexpected;")
    assert report(ComponentArgumentError("--msg is required"), "run") == 2
    assert report(CLIError("a\nb"), "log") == 1
    assert capsys.readouterr().err == "tx run: error: --msg is required\ntx log: error: a\\nb\n"


@pytest.mark.parametrize(("argv", "code"), [
    (["plugins"], 0),
    (["no-such-command"], 2),  # argparse's SystemExit
    (["status", "nosched://s/app"], 1),  # a user error, reported by tx.cli.errors
])
def test_console_exit_runs_atexit_handlers(tmp_path, argv, code):
    """`tx` skips the interpreter's teardown for speed, but plugins' atexit handlers still
    run, and the exit code is the command's."""
    site = tmp_path / "site"
    dist = site / "exitplug-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: exitplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[tx]\nexitplug = exit_hooks\n")
    marker = tmp_path / "flushed.txt"
    (site / "exit_hooks.py").write_text(
        "import atexit\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('buffered records'))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(site), TX_NO_CACHE="1", XDG_CACHE_HOME=str(tmp_path / "c"))
    tx = os.path.join(os.path.dirname(sys.executable), "tx")
    p = subprocess.run([tx, *argv], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == code, p.stderr
    if code == 0:
        assert "exitplug" in p.stdout
    else:
        assert len(p.stderr.splitlines()) == 1 and "error:" in p.stderr, p.stderr
    assert marker.read_text() == "buffered records"
