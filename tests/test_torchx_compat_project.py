"""A TorchX 0.7.0 project directory (tests/torchx_project: its .torchxconfig, a component
file that imports ``torchx.specs`` and ``torchx.components.dist``, a training script that
reads ``TORCHX_*`` variables) runs unchanged with ``tx run``, with tx-torchx-compat
installed; config fallback, ``tx configure --from-torchx``, run options from the
environment, and the one-line errors TorchX users meet.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any, Callable, Dict

import pytest

if importlib.util.find_spec("tx_torchx_compat") is None:  # CI (TX_TEST_REQUIRE_BACKENDS=1) fails instead
    from tx.testing.backends import backends_required

    _why = "tx-torchx-compat is not installed: pip install -e plugins/compat-torchx"
    if backends_required():
        raise RuntimeError(_why)
    pytest.skip(_why, allow_module_level=True)

PROJECT = Path(__file__).resolve().parent / "torchx_project"
NOTICE = "no .txconfig found; reading TorchX's"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the TorchX project (without the in-house scheduler) as the working directory."""
    dst = tmp_path / "proj"
    shutil.copytree(PROJECT, dst, ignore=shutil.ignore_patterns("acme_scheduler", "__pycache__"))
    return dst


def results(project: Path, out: str = "results") -> Dict[str, Any]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((project / out).glob("worker-*.json"))}


def test_project_runs_unchanged(tx: Callable[..., Any], project: Path) -> None:
    """`tx run` with no arguments: scheduler and component from [cli:run], the component's
    defaults from [component:...], run options from [local_cwd]; the script sees TorchX's
    variables; one notice line says the TorchX config was read."""
    p = tx("run", cwd=project)
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    assert handle.startswith("local_cwd://"), p.stdout
    assert p.stderr.count(NOTICE) == 1, p.stderr
    got = results(project)
    assert sorted(got) == ["worker-0", "worker-1"], got
    for k in (0, 1):
        run = got[f"worker-{k}"]
        assert run["epochs"] == 2  # [component:components.py:train] epochs = 2
        assert run["env"] == {
            "TORCHX_JOB_ID": handle, "TORCHX_RANK0_HOST": "localhost", "TORCHX_ROLE_NAME": "trainer",
            "TORCHX_REPLICA_IDX": str(k), "PROJECT": "acme-vision",
        }
        assert f"trainer/{k} worker {k} epoch 1" in p.stdout  # the replicas' stdout relayed to stdout
    assert (project / "run-logs").is_dir()  # [local_cwd] log_dir = run-logs


def test_arguments_override_the_config(tx: Callable[..., Any], project: Path) -> None:
    p = tx("run", "components.py:train", "--epochs", "3", "--replicas", "1", "--out", "other", cwd=project)
    assert p.returncode == 0, p.stderr
    got = results(project, "other")
    assert list(got) == ["worker-0"] and got["worker-0"]["epochs"] == 3


def test_component_built_on_torchx_ddp(tx: Callable[..., Any], project: Path) -> None:
    p = tx("run", "--dryrun", "components.py:ddp_train", "--nodes", "2", cwd=project)
    assert p.returncode == 0, p.stderr
    assert "torchrun" in p.stdout and "train.py" in p.stdout and "num_replicas: 2" in p.stdout, p.stdout


def test_txconfig_wins_and_silences_the_notice(tx: Callable[..., Any], project: Path) -> None:
    (project / ".txconfig").write_text(
        "[cli:run]\nscheduler = local_cwd\ncomponent = components.py:train\n\n"
        "[component:components.py:train]\nepochs = 4\nreplicas = 1\n"
    )
    p = tx("run", cwd=project)
    assert p.returncode == 0, p.stderr
    assert NOTICE not in p.stderr
    assert results(project)["worker-0"]["epochs"] == 4
    assert not (project / "run-logs").exists()  # the .torchxconfig was not read


def test_torchxconfig_variable(tx: Callable[..., Any], tx_env: Dict[str, str], project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "conf" / "team.torchxconfig"
    elsewhere.parent.mkdir()
    shutil.move(str(project / ".torchxconfig"), elsewhere)
    p = tx("run", cwd=project, env={**tx_env, "TORCHXCONFIG": str(elsewhere)})
    assert p.returncode == 0, p.stderr
    assert f"{NOTICE} {elsewhere}" in p.stderr
    assert results(project)["worker-0"]["epochs"] == 2
    missing = tx("run", cwd=project, env={**tx_env, "TORCHXCONFIG": str(tmp_path / "nope")})
    assert missing.returncode != 0 and "TORCHXCONFIG=" in missing.stderr and "no such file" in missing.stderr


def test_configure_from_torchx(tx: Callable[..., Any], project: Path) -> None:
    (project / ".torchxconfig").write_text(
        (project / ".torchxconfig").read_text() + "\n[component:]\nj = 1x1\n\n[local_dir]\n"
    )
    p = tx("configure", "--from-torchx", cwd=project)
    assert p.returncode == 0, p.stderr
    text = (project / ".txconfig").read_text()
    assert "[tx:tracker]" in text and "[torchx:tracker]" not in text
    assert "[component:]" not in text and "j = 1x1" not in text
    assert "[component:components.py:train]" in text and "log_dir = run-logs" in text and "# A TorchX 0.7.0 project's config" in text
    assert "[local_dir]" in text
    again = tx("configure", "--from-torchx", cwd=project)
    assert again.returncode != 0 and "exists" in again.stderr
    run = tx("run", cwd=project)
    assert run.returncode == 0, run.stderr
    assert NOTICE not in run.stderr and results(project)["worker-0"]["epochs"] == 2


def test_run_options_from_the_environment(tx: Callable[..., Any], tx_env: Dict[str, str], project: Path) -> None:
    """TORCHX_<KEY> / TX_<KEY> set run options; -cfg and config files win."""
    cfg = project / ".torchxconfig"
    cfg.write_text(cfg.read_text().replace("log_dir = run-logs\n", ""))
    p = tx("run", cwd=project, env={**tx_env, "TORCHX_LOG_DIR": "env-logs"})
    assert p.returncode == 0, p.stderr
    assert (project / "env-logs").is_dir()
    p = tx("run", cwd=project, env={**tx_env, "TORCHX_LOG_DIR": "env-logs", "TX_LOG_DIR": "tx-logs"})
    assert p.returncode == 0, p.stderr
    assert (project / "tx-logs").is_dir()
    p = tx("run", "-cfg", "log_dir=cfg-logs", cwd=project, env={**tx_env, "TX_LOG_DIR": "tx-logs2"})
    assert p.returncode == 0, p.stderr
    assert (project / "cfg-logs").is_dir() and not (project / "tx-logs2").exists()
    bad = tx("run", cwd=project, env={**tx_env, "TORCHX_PREPEND_CWD": "maybe"})
    assert bad.returncode != 0 and "TORCHX_PREPEND_CWD" in bad.stderr and "Traceback" not in bad.stderr


def test_duplicate_cfg_key_is_one_line_error(tx: Callable[..., Any], tmp_path: Path, one_line_error: Any) -> None:
    one_line_error(tx("run", "-cfg", "log_dir=a,log_dir=b", "utils.echo", cwd=tmp_path), "'log_dir' is given twice")
    one_line_error(tx("run", "-cfg", "log_dir=a", "-cfg", "log_dir=b", "utils.echo", cwd=tmp_path),
                   "'log_dir' is given twice")


def test_empty_session_handle_is_one_line_error(tx: Callable[..., Any], tmp_path: Path, one_line_error: Any) -> None:
    one_line_error(tx("status", "local_cwd:///app", cwd=tmp_path), "local_cwd:///app")
