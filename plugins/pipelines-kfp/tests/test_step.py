"""The run_app step, run by kfp.local (SubprocessRunner, in this environment): the step
launches a real app on local_cwd through tx.runner, its replicas' lines land in the step's
log, its handle is the task's output; an app that fails fails the step, and the pipeline,
with the app's structured error. The app's handle is checked with ``tx status`` afterwards."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tx.testing.backends import require_module

require_module("kfp", "the KFP v2 SDK; these tests run in hatch's kfp environment: hatch run kfp:test")

from kfp import dsl, local  # noqa: E402

from tx.specs import AppDef, Role  # noqa: E402
from tx_pipelines_kfp.step import run_app  # noqa: E402

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def kfp_local(tmp_path, monkeypatch, tx_env):
    """kfp.local with the SubprocessRunner in this interpreter's environment (use_venv=False:
    no venv, no pip), the step's tx state private to the test (tx_env)."""
    for k in ("TX_STATE_DIR", "HOME", "TMPDIR", "PATH"):
        monkeypatch.setenv(k, tx_env[k])
    monkeypatch.delenv("TXCONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "kfp-root"))
    return tx_env


def _py(name: str, code: str, replicas: int = 1) -> AppDef:
    return AppDef(name=name, roles=[Role(name="main", image="", entrypoint=sys.executable, args=["-c", code],
                                         num_replicas=replicas)])


def _tx_status(env, handle: str) -> dict:
    out = subprocess.run([str(Path(sys.executable).parent / "tx"), "status", "--json", handle], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_a_step_runs_the_app_relays_its_logs_and_outputs_its_handle(kfp_local, capfd):
    app = _py("hello", "import os; print('hello from replica', os.environ['TX_REPLICA_ID'])", replicas=2)
    task = run_app(app, "local_cwd")  # kfp.local runs a component called outside a pipeline at once
    handle = task.output
    assert handle.startswith("local_cwd://") and "/hello-" in handle
    log = capfd.readouterr().out
    assert f"tx: launched {handle}" in log
    assert "main/0 hello from replica 0" in log and "main/1 hello from replica 1" in log
    assert "State: SUCCEEDED" in log
    assert _tx_status(kfp_local, handle)["state"] == "SUCCEEDED"


def test_a_failing_app_fails_the_step_and_the_pipeline_with_its_error(kfp_local, capfd):
    ok = _py("first", "print('first step ran')")
    bad = _py("doomed", "import sys; print('working'); sys.exit('checkpoint dir is not writable')")
    never = _py("never", "print('must not run')")

    @dsl.pipeline(name="fails")
    def pipeline():
        a = run_app(ok, "local_cwd")
        b = run_app(bad, "local_cwd").after(a)
        run_app(never, "local_cwd").after(b)

    with pytest.raises(RuntimeError, match="finished with status .*FAILURE"):
        pipeline()
    log = capfd.readouterr().out
    assert "main/0 first step ran" in log
    assert "main/0 working" in log
    # the step's error: handle, state and the app's structured error, in one line
    (line,) = [x.strip() for x in log.splitlines() if x.strip().startswith("tx_pipelines_kfp._run.AppStepError: ")]
    handle = line.split()[1]
    assert handle.startswith("local_cwd://") and "/doomed-" in handle
    assert "FAILED: replica main/0 exited with code 1: checkpoint dir is not writable" in line
    assert "must not run" not in log
    assert _tx_status(kfp_local, handle)["state"] == "FAILED"


def test_an_unknown_scheduler_fails_the_step_in_one_line(kfp_local, capfd):
    with pytest.raises(RuntimeError, match="finished with status .*FAILURE"):
        run_app(_py("lost", "print(1)"), "no_such_scheduler")
    log = capfd.readouterr().out
    assert "no_such_scheduler" in log


def test_stopping_the_step_cancels_the_app(tmp_path, tx_env):
    """KFP stops a step with SIGTERM: the step's program cancels the app before it exits."""
    import os
    import signal

    app = _py("sleeper", "import time; print('started', flush=True); time.sleep(120)")
    code = f"from tx_pipelines_kfp._run import run_and_wait; run_and_wait({json.dumps(_appdef_json(app))}, 'local_cwd')"
    proc = subprocess.Popen([sys.executable, "-c", code], env=tx_env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in proc.stdout:  # until the app's first line reached the step's log
            lines.append(line)
            if "main/0 started" in line:
                break
        handle = next(x.split()[-1] for x in lines if x.startswith("tx: launched "))
        os.kill(proc.pid, signal.SIGTERM)
        rest = proc.communicate(timeout=60)[0]
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, "".join(lines) + rest
    assert f"cancelling {handle}" in rest
    assert _tx_status(tx_env, handle)["state"] == "CANCELLED"


def _appdef_json(app: AppDef) -> str:
    from tx.specs.files import appdef_to_json

    return appdef_to_json(app)
