"""Fixtures of the tx-torchx-compat tests: distributions installed into a private site
directory the way pip installs them (modules plus a ``<name>-<version>.dist-info`` with
``METADATA`` and ``entry_points.txt``), seen by subprocesses through ``PYTHONPATH``; a
private cache (the plugin registry snapshot, the notice marker) and home per test."""
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import pytest

BIN = Path(sys.executable).parent
#: what the ``torchx`` console script runs
CONSOLE = "import sys\nfrom tx_torchx_compat.torchx.cli.main import console\nsys.exit(console())"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    d = tmp_path / "site"
    d.mkdir()
    return d


@pytest.fixture
def install(site: Path) -> Callable[..., None]:
    """``install(name, version, files={path: text}, entry_points="ini text")``."""

    def run(name: str, version: str, files: Dict[str, str], entry_points: str = "") -> None:
        for rel, text in files.items():
            p = site / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(entry_points)
        (info / "RECORD").write_text("")

    return run


@pytest.fixture
def env(tmp_path: Path, site: Path) -> Dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), e.get("PYTHONPATH")) if p)
    e["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    e["HOME"] = str(tmp_path / "home")
    e["TX_STATE_DIR"] = str(tmp_path / "state")
    e.pop("TXCONFIG", None)
    e.pop("TORCHXCONFIG", None)
    return e


@pytest.fixture
def py(env: Dict[str, str], tmp_path: Path) -> Callable[..., subprocess.CompletedProcess]:
    """Run ``python -c CODE`` (or ``tx ARGS`` with ``tx=True``, ``torchx ARGS`` with
    ``torchx=True``: the ``torchx`` console script's function; the script of the shared
    environment comes from another checkout) in a fresh interpreter."""

    def run(*args: str, tx: bool = False, torchx: bool = False, extra: Optional[Dict[str, str]] = None,
            cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
        if tx:
            cmd = [str(BIN / "tx"), *args]
        elif torchx:  # what the console script runs (-P: no working directory on sys.path)
            cmd = [sys.executable, "-P", "-c", CONSOLE, *args]
        else:
            cmd = [sys.executable, "-c", *args]
        return subprocess.run(cmd, env={**env, **(extra or {})}, cwd=cwd or tmp_path, capture_output=True, text=True,
                              timeout=120)

    return run


@pytest.fixture(params=["tx", "torchx"])
def cli(request: Any, py: Callable[..., subprocess.CompletedProcess]) -> Callable[..., subprocess.CompletedProcess]:
    """The same arguments through ``tx`` and through ``torchx`` (``cli.name`` says which)."""

    def run(*args: str, **kw: Any) -> subprocess.CompletedProcess:
        return py(*args, **{request.param: True}, **kw)

    run.name = request.param  # type: ignore[attr-defined]
    return run
