"""`pip install ./core` alone gives a working `tx` that lists no schedulers and says how
to install one (a fresh virtual environment, nothing else installed)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def core_only_venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("core-only") / "venv"
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if os.path.exists(uv):
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                        str(REPO / "core")], check=True, timeout=600)
    else:  # pragma: no cover - uv is installed with hatch
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(REPO / "core")],
                       check=True, timeout=600)
    return venv


def _tx(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TX", "VIRTUAL_ENV"))}
    env["HOME"] = str(cwd)
    return subprocess.run([str(venv / "bin" / "tx"), *args], capture_output=True, text=True,
                          env=env, cwd=str(cwd), timeout=60)


def test_core_alone_is_a_working_tx(core_only_venv, tmp_path):
    out = subprocess.run([str(core_only_venv / "bin" / "python"), "-m", "pip", "list"],
                         capture_output=True, text=True)
    assert "tx-scheduler" not in out.stdout
    p = _tx(core_only_venv, "--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("tx ")
    p = _tx(core_only_venv, "plugins", cwd=tmp_path)
    assert p.returncode == 0
    assert "schedulers" not in p.stdout
    # tx-core came from this checkout (pip install ./core): the hint installs from it too
    assert p.stdout.strip().splitlines()[-1] == (
        f"no scheduler is installed; install one, e.g.: pip install {REPO / 'plugins' / 'scheduler-local'}"
    )
    p = _tx(core_only_venv, "builtins", cwd=tmp_path)
    assert p.returncode == 0 and "dist.ddp" in p.stdout


def test_core_alone_run_says_how_to_install_a_scheduler(core_only_venv, tmp_path):
    for args in (["run", "utils.echo"], ["runopts"], ["list"], ["status", "local_cwd://tx/x-1"]):
        p = _tx(core_only_venv, *args, cwd=tmp_path)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1, (args, p)
        assert len(lines) == 1 and f"pip install {REPO / 'plugins' / 'scheduler-local'}" in lines[0], (args, p.stderr)
        assert "Traceback" not in p.stderr


def test_core_alone_names_the_distribution_of_a_known_name(core_only_venv, tmp_path):
    """The install hints are package data of the installed tx-core (``tx/known_plugins.json``)."""
    for args, hint in ((["run", "-s", "slurm", "utils.echo"], f"pip install {REPO / 'plugins' / 'scheduler-slurm'}"),
                       (["runopts", "kubernetes_mcad"], f"pip install {REPO / 'plugins' / 'scheduler-k8s'}")):
        p = _tx(core_only_venv, *args, cwd=tmp_path)
        assert p.returncode == 1 and p.stderr.strip().endswith(hint), (args, p.stderr)
    # and it works as printed: the hint installs the scheduler
    venv_python = str(core_only_venv / "bin" / "python")
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    cmd = [str(REPO / "plugins" / "scheduler-slurm")]
    inst = subprocess.run([uv, "pip", "install", "-q", "--python", venv_python, *cmd] if os.path.exists(uv)
                          else [venv_python, "-m", "pip", "install", "-q", *cmd], capture_output=True, text=True,
                          timeout=600)
    assert inst.returncode == 0, inst.stderr
    assert _tx(core_only_venv, "runopts", "slurm", cwd=tmp_path).returncode == 0
