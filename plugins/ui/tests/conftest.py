"""Fixtures of the tx-ui tests: a private tx environment (state, home, temporary directory)
shared by a module, ``tx`` in it, one ``tx ui`` serving it, and a headless chromium."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator

import pytest

from tx.testing.backends import backend_unavailable, require_module
from tx_ui.testing import UIServer, serve

BIN = Path(sys.executable).parent
CHROMIUM = os.environ.get("TX_UI_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TX_UI_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--window-size=1280,900")


@pytest.fixture(scope="module")
def ui_env(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """Environment of the module's ``tx`` and ``tx ui``: its own state dir, home, TMPDIR
    (so its own local apps and logs), no user .txconfig."""
    root = tmp_path_factory.mktemp("ui")
    env = dict(os.environ)
    env.update(TX_STATE_DIR=str(root / "state"), HOME=str(root / "home"), TMPDIR=str(root / "tmp"))
    for d in ("home", "tmp", "work"):
        (root / d).mkdir()
    env.pop("TXCONFIG", None)
    env.pop("LOGLEVEL", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["TX_UI_TEST_WORK"] = str(root / "work")
    return env


@pytest.fixture(scope="module")
def txm(ui_env: Dict[str, str]) -> Callable[..., "subprocess.CompletedProcess[str]"]:
    """``txm(*args, timeout=120, text=True)``: run ``tx ARGS...`` in the module's environment
    (``text=False``: output as bytes, with no newline translation)."""

    def run(*args: str, timeout: float = 120, text: bool = True) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([str(BIN / "tx"), *args], env=ui_env, cwd=ui_env["TX_UI_TEST_WORK"],
                              text=text, capture_output=True, timeout=timeout)

    return run


@pytest.fixture(scope="module")
def ui(ui_env: Dict[str, str]) -> Iterator[UIServer]:
    """``tx ui -s local_cwd`` over the module's environment."""
    with serve(ui_env, "-s", "local_cwd", "--timeout", "5") as server:
        yield server


def handle_of(proc: "subprocess.CompletedProcess[str]") -> str:
    """The app handle ``tx run`` printed."""
    assert proc.stdout.strip().startswith("local_cwd://"), (proc.stdout, proc.stderr)
    return proc.stdout.splitlines()[0]  # the first line: the job's output follows it


@pytest.fixture(scope="module")
def handle() -> Callable[["subprocess.CompletedProcess[str]"], str]:
    """:func:`handle_of`, as a fixture (test modules cannot import a conftest)."""
    return handle_of


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Debian's headless chromium through its chromedriver (selenium; no browser download)."""
    webdriver = require_module("selenium.webdriver", "the browser tests drive chromium: pip install selenium")
    from selenium.webdriver.chrome.service import Service  # with selenium, checked above

    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        backend_unavailable("chromium", f"{CHROMIUM} or {CHROMEDRIVER} is missing: apt-get install chromium "
                                        "chromium-driver (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
