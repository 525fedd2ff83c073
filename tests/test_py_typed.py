"""Every distribution ships ``py.typed`` (PEP 561), so type checkers use tx's annotations."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _distributions():
    return [REPO / "core", *sorted(p.parent for p in (REPO / "plugins").glob("*/pyproject.toml"))]


def _packages(dist: Path):
    return [p for p in (dist / "src").iterdir() if p.is_dir() and (p / "__init__.py").is_file()]


@pytest.mark.parametrize("dist", _distributions(), ids=lambda p: p.name)
def test_every_package_has_py_typed(dist):
    pkgs = _packages(dist)
    assert pkgs, dist
    for pkg in pkgs:
        assert (pkg / "py.typed").is_file(), f"{pkg.relative_to(REPO)}/py.typed is missing"


@pytest.mark.slow
@pytest.mark.parametrize("dist", ["core", "plugins/scheduler-local"])
def test_wheel_contains_py_typed(dist, tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(tmp_path), str(REPO / dist)], check=True, timeout=300)
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("/py.typed") for n in names), names
