"""Fixtures of the tx-torchx-compat tests: distributions installed into a private site
directory the way pip installs them (modules plus a ``<name>-<version>.dist-info`` with
``METADATA`` and ``entry_points.txt``), seen by subprocesses through ``PYTHONPATH``; a
private cache (the plugin registry snapshot, the notice marker) and home per test."""
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, Optional

import pytest

BIN = Path(sys.executable).parent


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
    """Run ``python -c CODE`` (or ``tx ARGS`` with ``tx=True``) in a fresh interpreter."""

    def run(*args: str, tx: bool = False, extra: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        cmd = [str(BIN / "tx"), *args] if tx else [sys.executable, "-c", *args]
        return subprocess.run(cmd, env={**env, **(extra or {})}, cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)

    return run
