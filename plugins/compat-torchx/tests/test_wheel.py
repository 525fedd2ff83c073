"""The built wheel: the finder's ``.pth`` at the root of site-packages, the package, its
metadata, and nothing a TorchX installation owns (no ``torchx/`` file, no ``torchx``
script), so installing or removing it never touches TorchX's files."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_wheel_contents(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(PLUGIN)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    (wheel,) = tmp_path.glob("tx_torchx_compat-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tx_torchx_compat.pth" in names
    assert "tx_torchx_compat/_finder.py" in names and "tx_torchx_compat/torchx/specs/api.py" in names
    assert not [n for n in names if n.startswith(("torchx/", "torchx-")) or "/scripts/" in n], names
    with zipfile.ZipFile(wheel) as z:
        assert z.read("tx_torchx_compat.pth") == (PLUGIN / "src" / "tx_torchx_compat.pth").read_bytes()
        entry_points = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "[tx]" in entry_points and "torchx_compat = tx_torchx_compat.hooks" in entry_points
    # the `torchx` command (it hands over to a real TorchX where one is installed)
    assert "[console_scripts]\ntorchx = tx_torchx_compat.torchx.cli.main:console\n" in entry_points
