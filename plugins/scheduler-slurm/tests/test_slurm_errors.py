"""Errors without a cluster (offline): Slurm not installed, a command that fails or hangs,
plugin registration. Each error is one line that says what to do."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tx.plugins import PluginRegistry
from tx.specs import AppDef, Role
from tx_scheduler_slurm import _client, _plane
from tx_scheduler_slurm.scheduler import SlurmScheduler, create_scheduler

BIN = Path(sys.executable).parent


@pytest.fixture
def no_slurm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PATH without Slurm's commands (only an empty directory)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_slurm_not_installed_api(no_slurm: None) -> None:
    sched = create_scheduler("tx")
    app = AppDef("a", roles=[Role("r", entrypoint="true")])
    info = sched.submit_dryrun(app, {})  # dryrun works offline, without cluster facts
    assert "#SBATCH --job-name=a@r-0" in str(info)
    for call in (lambda: sched.schedule(info), lambda: sched.describe("12"), sched.list,
                 lambda: sched.cancel("12")):
        with pytest.raises(_client.SlurmNotInstalledError) as e:
            call()
        msg = str(e.value)
        assert "not found: Slurm is not installed here" in msg and "apt-get install slurm-client" in msg
        assert "\n" not in msg


def test_slurm_not_installed_cli(tmp_path: Path) -> None:
    """`tx run -s slurm` without sbatch: exit 1 and one line naming what to install
    (TorchX 0.7 printed a traceback)."""
    env = {"PATH": str(BIN), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for args in (["run", "-s", "slurm", "utils.echo", "--msg", "hi"], ["status", "slurm://tx/5"],
                 ["list", "-s", "slurm"]):
        p = subprocess.run([str(BIN / "tx"), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1, (args, p.stderr)
        assert "Slurm is not installed here" in lines[0] and "apt-get install slurm-client" in lines[0]
        assert "Traceback" not in p.stderr


def test_command_failure_and_timeout_are_one_line() -> None:
    with pytest.raises(_client.SlurmCommandError) as e:
        _client.run(["sh", "-c", "echo noise >&2; echo 'sh: error: it broke' >&2; exit 3"])
    assert str(e.value) == "sh failed (exit 3): sh: error: it broke"
    assert e.value.returncode == 3 and "noise" in e.value.stderr
    assert _client.run(["sh", "-c", "exit 2"], check=False).returncode == 2
    assert _client.run(["cat"], input="on stdin\n").stdout == "on stdin\n"
    with pytest.raises(_client.SlurmTimeoutError, match=r"^sleep did not answer within 0.2 s: is slurmctld up"):
        _client.run(["sleep", "30"], timeout=0.2)


def test_rate_limit_answers_are_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """slurmctld's rate-limit answer (SLURMCTLD_COMMUNICATIONS_BACKOFF) is retried after a
    jittered backoff, not reported as the command's failure; other failures are not retried."""
    from tx.schedulers import budget

    monkeypatch.setattr(budget, "BACKOFF_BASE_S", 0.01)
    count = tmp_path / "tries"
    script = (f"echo x >> {count}; [ $(wc -l < {count}) -gt 2 ] && {{ echo ok; exit 0; }}; "
              "echo 'squeue: error: slurm_load_jobs error: Rate limit exceeded, please retry momentarily' >&2; exit 1")
    before = _plane.budget().counts().get("throttled", 0)
    assert _client.run(["sh", "-c", script]).stdout == "ok\n"
    assert count.read_text().count("x") == 3 and _plane.budget().counts()["throttled"] - before == 2
    with pytest.raises(_client.SlurmCommandError):  # once, not retried
        _client.run(["sh", "-c", f"echo y >> {count}; echo 'squeue: error: Invalid job id specified' >&2; exit 1"])
    assert count.read_text().count("y") == 1


def test_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_SLURM_TIMEOUT", "2.5")
    assert _client.default_timeout() == 2.5
    monkeypatch.setenv("TX_SLURM_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="TX_SLURM_TIMEOUT must be a positive number"):
        _client.default_timeout()


def test_plugin_registers_slurm() -> None:
    reg = PluginRegistry(entry_points=[("slurm", "tx_scheduler_slurm.hooks", "tx-scheduler-slurm", "0.1.0")])
    r = reg.get("schedulers", "slurm")
    assert r is not None and r.distribution == "tx-scheduler-slurm" and r.install == "pip install tx-scheduler-slurm"
    sched = r.load()("mysession", some_other_param=1)  # params for other schedulers are ignored
    assert isinstance(sched, SlurmScheduler) and sched.session_name == "mysession" and sched.backend == "slurm"


def test_importing_the_plugin_is_cheap() -> None:
    code = "import sys, tx_scheduler_slurm.hooks; print(sorted(m for m in sys.modules if m.startswith('tx_scheduler_slurm')))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=os.environ)
    assert p.stdout.strip() == "['tx_scheduler_slurm', 'tx_scheduler_slurm.hooks', 'tx_scheduler_slurm.version']"


def test_client_version_is_asked_once_per_sinfo_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tx_scheduler_slurm._cluster import client_version

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sinfo = bin_dir / "sinfo"
    calls = tmp_path / "calls"
    sinfo.write_text(f'#!/bin/sh\necho x >> {calls}\necho "slurm 24.11.1"\n')
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    assert client_version() == (24, 11) and client_version() == (24, 11)
    assert calls.read_text().count("x") == 1  # the second answer came from the state dir
    sinfo.write_text(f'#!/bin/sh\necho x >> {calls}\necho "slurm 25.05.0"\n')  # another binary (size, mtime)
    assert client_version() == (25, 5) and calls.read_text().count("x") == 2
