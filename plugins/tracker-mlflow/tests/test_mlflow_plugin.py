"""The plugin's registration, and that nothing imports mlflow before a tracker is made."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tx.plugins import PluginRegistry


def test_registered_from_its_entry_point():
    reg = PluginRegistry(entry_points=[("mlflow", "tx_tracker_mlflow.hooks", "tx-tracker-mlflow", "0.1.0")])
    assert reg.plugins["mlflow"].error is None
    r = reg.get("trackers", "mlflow")
    assert (r.target, r.requires, r.install) == (
        "tx_tracker_mlflow.tracker:create", ("mlflow",), "pip install tx-tracker-mlflow")
    assert reg.get("trackers", "file").distribution == "tx-core"


def test_the_installed_registry_has_it():
    from tx.plugins import get_registry

    assert get_registry().get("trackers", "mlflow").distribution == "tx-tracker-mlflow"


def _imports_mlflow(code: str, tmp_path) -> bool:
    probe = code + "\nimport sys\nprint('mlflow' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize("code", [
    "import tx_tracker_mlflow, tx_tracker_mlflow.hooks, tx_tracker_mlflow.tracker",
    "from tx.cli.main import main; main(['--version'])",
    "from tx.plugins import get_registry; get_registry().get('trackers', 'mlflow')",
    # a job and `tx tracker` with the file tracker only
    "import os; os.environ.update(TX_TRACKERS='file', TX_TRACKER_FILE_CONFIG='runs')\n"
    "from tx.tracker import app_run_from_env; app_run_from_env().add_metadata(a=1)\n"
    "from tx.cli.main import main; assert main(['tracker', 'list', 'jobs']) == 0",
])
def test_mlflow_is_not_imported_before_a_tracker_is_made(code, tmp_path):
    assert not _imports_mlflow(code, tmp_path)


def test_positive_control_making_the_tracker_imports_mlflow(tmp_path):
    assert _imports_mlflow(
        f"from tx.tracker import build_trackers; build_trackers({{'mlflow': 'sqlite:///{tmp_path}/m.db'}})", tmp_path)
