"""The "write a scheduler" walk-through of docs/hooks.md, for real: the example plugin in
tests/example_plugin is installed with pip into a private site directory (put on
``sys.path`` and ``PYTHONPATH`` for this module only), found through its entry point, and
passes tx's conformance kit, in this process and in fresh ones, and the CLI runs it."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from tx.plugins import get_registry, set_registry
from tx.schedulers.api import Scheduler
from tx.schedulers.streams import Stream
from tx.testing import SchedulerConformance

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "tests" / "example_plugin"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def procs_installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, str]]:
    base = tmp_path_factory.mktemp("procs")
    site = base / "site"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(PLUGIN)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert (site / "tx_scheduler_procs" / "py.typed").is_file()
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(site))
    mp.setenv("PYTHONPATH", os.pathsep.join(x for x in (str(site), os.environ.get("PYTHONPATH")) if x))
    mp.setenv("PROCS_STATE_DIR", str(base / "state"))
    mp.setenv("XDG_CACHE_HOME", str(base / "cache"))
    importlib.invalidate_caches()
    old = set_registry(None)
    try:
        yield dict(os.environ)
    finally:
        set_registry(old)
        mp.undo()
        for name in [m for m in sys.modules if m.startswith("tx_scheduler_procs")]:
            del sys.modules[name]


@pytest.fixture
def procs(procs_installed: Dict[str, str]) -> Iterator[Scheduler[Any]]:
    reg = get_registry().get("schedulers", "procs")
    assert reg is not None and reg.distribution == "tx-scheduler-procs", reg
    sched = reg.load()("kit")
    yield sched
    sched.close()


class TestProcsConformance(SchedulerConformance):
    """The kit, with the scheduler created by name through the registry, as `tx` does."""

    log_streams = (Stream.STDOUT, Stream.STDERR)
    timeout = 60.0
    appdef_not_stored = "the example scheduler keeps no copy of the AppDef (the walk-through stays short)"

    @pytest.fixture
    def scheduler(self, procs: Scheduler[Any]) -> Scheduler[Any]:
        return procs


def test_cli_runs_the_example_plugin(procs_installed: Dict[str, str], tmp_path: Path) -> None:
    env = {**procs_installed, "TX_STATE_DIR": str(tmp_path / "tx-state"), "HOME": str(tmp_path)}

    def tx(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "tx"), *args], env=env, cwd=str(tmp_path), capture_output=True,
                              text=True, timeout=120)

    plugins = tx("plugins")
    assert "tx-scheduler-procs" in plugins.stdout and "procs" in plugins.stdout, plugins.stdout
    run = tx("run", "-s", "procs", "utils.echo", "--msg", "hello from procs")
    assert run.returncode == 0, run.stderr
    handle = run.stdout.splitlines()[0]
    assert handle.startswith("procs://tx/echo-")
    assert "echo/0 hello from procs" in run.stdout
    assert run.stderr.splitlines()[-1].startswith("tx run: SUCCEEDED after ")
    status = tx("status", handle)
    assert "State: SUCCEEDED" in status.stdout, status.stdout + status.stderr
    assert tx("log", f"{handle}/echo/0").stdout == "echo/0 hello from procs\n"
    opts = tx("runopts", "procs")
    assert "nice" in opts.stdout


def test_hooks_md_shows_the_example_plugins_code() -> None:
    """The walk-through's snippets are the example plugin's code (the doc cannot go stale)."""
    import re

    doc = (REPO / "docs" / "hooks.md").read_text()
    section = doc.split("## Write a scheduler", 1)[1].split("## Testing a plugin", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    src = PLUGIN / "src" / "tx_scheduler_procs"
    files = {"python": (src / "hooks.py").read_text() + (src / "scheduler.py").read_text(),
             "toml": (PLUGIN / "pyproject.toml").read_text()}
    checked = 0
    for lang, body in blocks:
        if lang not in files or "class TestProcsConformance" in body:
            continue
        for line in body.splitlines():
            line = line.split("  #")[0].rstrip()
            if line.strip() and line.strip() != "..." and not line.lstrip().startswith("#"):
                assert line.strip() in files[lang], f"docs/hooks.md shows a line the example does not have: {line!r}"
                checked += 1
    assert checked > 40
