"""Shared fixtures of the end-to-end tests: run `tx` in a subprocess with an isolated state."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.fixture
def tx_env(tmp_path) -> dict:
    """Environment for `tx` subprocesses: private state dir, no user .txconfig."""
    env = dict(os.environ)
    env["TX_STATE_DIR"] = str(tmp_path / "state")
    env["HOME"] = str(tmp_path / "home")
    os.makedirs(env["HOME"], exist_ok=True)
    env.pop("TXCONFIG", None)
    env.pop("LOGLEVEL", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture
def tx(tx_env, tmp_path):
    """Run `tx ARGS...` and return the CompletedProcess (text mode)."""

    def run(*args: str, cwd: Optional[Path] = None, timeout: float = 120, env: Optional[dict] = None,
            input: Optional[str] = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN / "tx"), *args], cwd=str(cwd or tmp_path), env=env or tx_env, text=True,
            capture_output=True, timeout=timeout, input=input,
        )

    return run


@pytest.fixture
def one_line_error():
    """The :func:`assert_one_line_error` check, as a fixture (test modules cannot import
    conftest under --import-mode=importlib)."""
    return assert_one_line_error


def assert_one_line_error(proc: subprocess.CompletedProcess, needle: str, code: Optional[int] = None) -> None:
    """The process failed with exactly one line on stderr containing ``needle``."""
    lines: List[str] = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode != 0, proc
    if code is not None:
        assert proc.returncode == code, proc
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0], lines[0]
