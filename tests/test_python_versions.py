"""The Python versions tx supports are said once and agree: every distribution's
``requires-python`` and the README's quickstart (torch 2.13 needs Python 3.10 or newer)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REQUIRES = ">=3.10"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None


def _requires_python(path: Path) -> str:
    text = path.read_text()
    if tomllib is not None:
        return tomllib.loads(text)["project"]["requires-python"]
    m = re.search(r'^requires-python\s*=\s*"([^"]*)"', text, re.M)  # pragma: no cover
    assert m, path
    return m.group(1)


def test_every_distribution_requires_the_same_python() -> None:
    projects = [REPO / "core" / "pyproject.toml", *sorted((REPO / "plugins").glob("*/pyproject.toml"))]
    assert len(projects) >= 3
    found = {str(p.relative_to(REPO)): _requires_python(p) for p in projects}
    assert found == {k: REQUIRES for k in found}


def test_readme_names_the_same_versions() -> None:
    readme = (REPO / "README.md").read_text()
    assert "Python 3.10 to 3.13" in readme
    assert "3.9" not in readme
    assert sys.version_info >= (3, 10)
