"""Offline: the Ray job request, run options, app ids, the plugin's registration, and the
replica process side of the driver (no Ray needed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tx.specs import AppDef, InvalidRunConfigException, Resource, RetryPolicy, Role
from tx.specs.files import appdef_from_stored, appdef_to_stored, stored_run_options
from tx.testing.backends import require_module
from tx_scheduler_ray import tx_ray_driver
from tx_scheduler_ray.request import driver_dir
from tx_scheduler_ray.scheduler import create_scheduler
from tx_scheduler_ray.tx_ray_driver._replica import ReplicaProcess

BIN = Path(sys.executable).parent


@pytest.fixture
def sched(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return create_scheduler("tx")


def _app(image: str) -> AppDef:
    return AppDef("My App_1", roles=[
        Role("trainer", image=image, entrypoint="python", args=["-m", "train", "--id", "${replica_id}"],
             env={"FOO": "bar"}, num_replicas=3, min_replicas=2, max_retries=2, retry_policy=RetryPolicy.ROLE,
             resource=Resource(cpu=2, gpu=1, memMB=1024)),
        Role("ps", image=image, entrypoint="sh", args=["-c", "echo ps"]),
    ])


def test_request_shape(sched: Any, tmp_path: Path) -> None:
    (tmp_path / ".txignore").write_text("# comment\n*.ckpt\ndata/\n")
    info = sched.submit_dryrun(_app(str(tmp_path)), {"dashboard_address": "10.1.2.3:9999"})
    req = info.request
    assert req.address == "http://10.1.2.3:9999"
    assert req.app_id.startswith("10.1.2.3:9999-my-app-1-") and req.app_id.endswith(req.submission_id)
    assert req.entrypoint == "exec python -m tx_ray_driver"
    env = req.runtime_env
    assert env["working_dir"] == str(tmp_path) and env["excludes"] == ["*.ckpt", "data/"]
    assert env["py_modules"] == [driver_dir()] and os.path.isfile(os.path.join(driver_dir(), "__main__.py"))
    assert "pip" not in env
    spec = json.loads(env["env_vars"][tx_ray_driver.SPEC_ENV])
    assert spec == req.spec and spec["app_id"] == req.app_id and spec["address"] == "10.1.2.3:9999"
    trainer, ps = spec["roles"]
    assert trainer["resources"] == {"CPU": 2.0, "GPU": 1.0, "memory": 1024.0 * 2**20}
    assert ps["resources"] == {"CPU": 1.0}  # no resource: 1 CPU
    assert (trainer["num_replicas"], trainer["min_replicas"], trainer["max_retries"], trainer["retry_policy"]) == (3, 2, 2, "ROLE")
    assert trainer["args"] == ["-m", "train", "--id", "${replica_id}"]
    e = trainer["env"]
    assert e["FOO"] == "bar" and e["TX_APP_ID"] == e["TORCHX_APP_ID"] == req.app_id
    assert e["TX_REPLICA_ID"] == e["TORCHX_REPLICA_IDX"] == "${replica_id}"
    assert (e["TX_ROLE_NAME"], e["TX_ROLE_IDX"], e["TX_NUM_REPLICAS"]) == ("trainer", "0", "3")
    assert ps["env"]["TX_ROLE_IDX"] == "1"
    assert spec["rank0_env"] == ["TX_RANK0_HOST", "TORCHX_RANK0_HOST"]
    assert req.metadata == {"tx_app": "My App_1", "tx_session": "tx", "tx_version": "0.1.0",
                            "tx_appdef": appdef_to_stored(_app(str(tmp_path)), cfg=info._cfg)}
    assert appdef_from_stored(req.metadata["tx_appdef"]) == _app(str(tmp_path))
    assert stored_run_options(req.metadata["tx_appdef"])["dashboard_address"] == "10.1.2.3:9999"
    text = repr(info)
    assert f"app_id: {req.app_id}" in text and "python -m tx_ray_driver" in text and '"CPU": 2.0' in text


def test_address_from_ray_address_and_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert create_scheduler("tx").submit_dryrun(_app(str(tmp_path)), {}).request.address == "http://127.0.0.1:8265"
    monkeypatch.setenv("RAY_ADDRESS", "http://ray-head.example:8266/")
    req = create_scheduler("tx").submit_dryrun(_app(str(tmp_path)), {}).request
    assert req.address == "http://ray-head.example:8266" and req.app_id.startswith("ray-head.example:8266-")
    req = create_scheduler("tx").submit_dryrun(_app(str(tmp_path)), {"dashboard_address": "h:1"}).request
    assert req.address == "http://h:1"


def test_app_id_parsing(sched: Any) -> None:
    assert sched._parse("ray-head.example:8265-train-abc") == ("http://ray-head.example:8265", "train-abc")
    assert sched._parse("127.0.0.1:8265-a-b-c") == ("http://127.0.0.1:8265", "a-b-c")
    assert sched._parse("train-abc") == ("http://127.0.0.1:8265", "train-abc")
    assert sched._parse("bad id/with slash") == ("", "")


def test_requirements(sched: Any, tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("# pinned\nnumpy==2.0.0\n\nrequests>=2\n")
    req = sched.submit_dryrun(_app(str(tmp_path)), {}).request
    assert req.runtime_env["pip"] == ["numpy==2.0.0", "requests>=2"]
    other = tmp_path / "other.txt"
    other.write_text("six\n")
    assert sched.submit_dryrun(_app(str(tmp_path)), {"requirements": str(other)}).request.runtime_env["pip"] == ["six"]
    with pytest.raises(InvalidRunConfigException, match="requirements"):
        sched.submit_dryrun(_app(str(tmp_path)), {"requirements": str(tmp_path / "missing.txt")})


def test_working_dir_defaults_to_cwd(sched: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = AppDef("x", roles=[Role("r", image="ghcr.io/pytorch/torchx:0.7.0", entrypoint="echo")])
    assert sched.submit_dryrun(app, {}).request.runtime_env["working_dir"] == str(tmp_path)


def test_working_dir_option(sched: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run option ``working_dir`` (TorchX's ``RayJob.working_dir``; torchrec's README passes it)
    is the directory uploaded; a relative ``requirements`` is read from the current directory
    first (TorchX and Ray), else from the working_dir."""
    ex = tmp_path / "examples" / "ray"
    ex.mkdir(parents=True)
    (ex / "requirements.txt").write_text("torchrec\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("HOME", str(tmp_path))
    app = AppDef("x", roles=[Role("r", image="ghcr.io/pytorch/torchx:0.7.0", entrypoint="echo")])
    cfg = {"working_dir": "~/examples/ray", "requirements": "./requirements.txt"}
    env = sched.submit_dryrun(app, cfg).request.runtime_env
    assert env["working_dir"] == str(ex) and env["pip"] == ["torchrec"]
    (elsewhere / "requirements.txt").write_text("six\n")  # the current directory's comes first
    assert sched.submit_dryrun(app, cfg).request.runtime_env["pip"] == ["six"]
    # without requirements: the working_dir's requirements.txt
    assert sched.submit_dryrun(app, {"working_dir": str(ex)}).request.runtime_env["pip"] == ["torchrec"]
    with pytest.raises(InvalidRunConfigException, match="run option 'requirements': no file 'nope.txt' in the "
                                                         "current directory nor in the working_dir"):
        sched.submit_dryrun(app, {"working_dir": str(ex), "requirements": "nope.txt"})
    with pytest.raises(InvalidRunConfigException, match="run option 'working_dir': .* is not a directory"):
        sched.submit_dryrun(app, {"working_dir": str(tmp_path / "missing")})
    # the workspace (the first role's image, a directory) and working_dir: the same, or an error
    ws_app = AppDef("x", roles=[Role("r", image=str(ex), entrypoint="echo")])
    assert sched.submit_dryrun(ws_app, {"working_dir": str(ex)}).request.runtime_env["working_dir"] == str(ex)
    with pytest.raises(InvalidRunConfigException, match="'working_dir' .* and the workspace .* are different"):
        sched.submit_dryrun(ws_app, {"working_dir": str(elsewhere)})


def test_workspace_without_and_with_job_dir(sched: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text("print(1)\n")
    role = Role("r", image="img", entrypoint="python", args=["train.py"])
    assert sched.build_workspace(role, str(ws), {}).image == str(ws)
    job_dir = tmp_path / "job"
    new = sched.build_workspace(role, str(ws), {"job_dir": str(job_dir)})
    assert new.image == str(job_dir) and (job_dir / "train.py").read_text() == "print(1)\n"
    assert role.image == "img"


@pytest.mark.parametrize("roles, match", [
    ([Role("a", entrypoint="x", num_replicas=2, min_replicas=3)], "min_replicas"),
    ([Role("a", entrypoint="x"), Role("a", entrypoint="y")], "duplicate role|two roles"),
    ([Role("a b", entrypoint="x")], "role name"),
    ([], "no roles"),
])
def test_bad_apps(sched: Any, roles: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sched.submit_dryrun(AppDef("bad", roles=roles), {"dashboard_address": "h:1"})


def test_bad_cluster_config_file(sched: Any, tmp_path: Path) -> None:
    with pytest.raises(InvalidRunConfigException, match="cluster_config_file"):
        sched.submit_dryrun(_app(str(tmp_path)), {"cluster_config_file": str(tmp_path / "nope.yaml")})


def test_registered_by_name_and_hooks_import_no_ray() -> None:
    code = (
        "import sys\n"
        "import tx_scheduler_ray.hooks\n"
        "assert 'ray' not in sys.modules, 'hooks imported ray'\n"
        "from tx.plugins import PluginRegistry\n"
        "reg = PluginRegistry(entry_points=[('ray', 'tx_scheduler_ray.hooks', 'tx-scheduler-ray', '0.1.0')])\n"
        "assert reg.plugins['ray'].error is None\n"
        "s = reg.get('schedulers', 'ray').load()('sess')\n"
        "print(type(s).__name__, sorted(k for k, _ in s.run_opts()))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ("RayScheduler ['cluster_config_file', 'cluster_name', 'dashboard_address', "
                                "'infra_retries', 'job_dir', 'preempt_grace', 'requirements', 'working_dir']")


def test_cli_dryrun(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TX_", "RAY_"))}
    env["HOME"] = str(tmp_path)
    p = subprocess.run([str(BIN / "tx"), "run", "--dryrun", "-s", "ray", "-cfg", "dashboard_address=10.0.0.9:8265",
                        "--workspace", str(tmp_path), "dist.ddp", "-j", "2x1", "--script", "train.py"],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "app_id: 10.0.0.9:8265-train-" in p.stdout and "torchrun" in p.stdout
    assert f'"working_dir": "{tmp_path}"' in p.stdout


def test_torchrec_readme_dryrun(tmp_path: Path) -> None:
    """torchrec's README (examples/ray) through ``tx``, run from the repository's root: the
    example directory is uploaded with its requirements; a dryrun needs no Ray head (the
    ``torchx`` command: tx-torchx-compat's test_scheduler_signatures.py)."""
    ex = tmp_path / "examples" / "ray"
    ex.mkdir(parents=True)
    (ex / "requirements.txt").write_text("torchrec\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TX_", "RAY_"))}
    env["HOME"] = str(tmp_path)
    p = subprocess.run([str(BIN / "tx"), "run", "--dryrun", "-s", "ray", "-cfg",
                        f"dashboard_address=localhost:6379,working_dir={ex},requirements=./requirements.txt",
                        "dist.ddp", "-j", "1x2", "--script", "test_installation.py"],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "app_id: localhost:6379-test-installation-" in p.stdout
    assert f'"working_dir": "{ex}"' in p.stdout and '"torchrec"' in p.stdout, p.stdout


# -- the replica process (driver side, no Ray) ---------------------------------------------------
def test_replica_process_streams_and_sizes(tmp_path: Path) -> None:
    names = {s: f"tx/app/r-0.{s}" for s in tx_ray_driver.STREAMS}
    rp = ReplicaProcess(str(tmp_path), names)
    script = ("i=0; while [ $i -lt 2000 ]; do echo \"out $i\"; echo \"err $i\" >&2; i=$((i+1)); done; "
              "printf 'p1\\rp2\\n'; printf 'tail-no-newline'; exit 4")
    rp.start(["sh", "-c", script], dict(os.environ), str(tmp_path))
    res = rp.wait()
    assert res["exit_code"] == 4 and not res["stopped"]
    out, err, comb = ((tmp_path / names[s]).read_bytes().decode() for s in ("stdout", "stderr", "combined"))
    assert out == "".join(f"out {i}\n" for i in range(2000)) + "p1\rp2\ntail-no-newline"
    assert err == "".join(f"err {i}\n" for i in range(2000))
    # combined: every line of both streams, whole; the last one without "\n" gets one there
    lines = [ln + "\n" for ln in comb.split("\n")[:-1]]
    assert comb.endswith("\n")
    assert sorted(lines) == sorted([ln + "\n" for ln in out.split("\n")] + [ln + "\n" for ln in err.split("\n")[:-1]])
    assert [ln for ln in lines if ln.startswith("out")] == [f"out {i}\n" for i in range(2000)]
    assert res["sizes"] == {s: (tmp_path / names[s]).stat().st_size for s in tx_ray_driver.STREAMS}
    assert res["stderr_tail"].splitlines()[-1] == "err 1999"
    assert res["cause_tail"].endswith("err 1998\nerr 1999\n") and len(res["cause_tail"]) <= 128 << 10
    # a second attempt appends to the same files: why it failed is read from its own output only
    rp.start(["sh", "-c", "echo second >&2; exit 1"], dict(os.environ), str(tmp_path))
    res = rp.wait()
    assert res["cause_tail"] == "second\n" and res["stderr_tail"].splitlines()[-1] == "second"


def test_replica_process_stop_kills_the_group(tmp_path: Path) -> None:
    names = {s: f"tx/app/s-0.{s}" for s in tx_ray_driver.STREAMS}
    rp = ReplicaProcess(str(tmp_path), names)
    pidfile = tmp_path / "child"
    # "up" before the pid file: the test stops the group once the pid file is there, and a
    # shell not yet scheduled to run `echo up` (the old order) left stdout empty under load
    rp.start(["sh", "-c", f"sleep 300 & echo up; echo $! > {pidfile}; wait"], dict(os.environ), str(tmp_path))
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pidfile.read_text())
    res = rp.stop(grace=5)
    assert res["stopped"] and res["exit_code"] == -15, res  # ended by the SIGTERM, not the SIGKILL after 5 s


    def state() -> str:
        try:  # gone, or a zombie its new parent has not reaped yet
            return Path(f"/proc/{child}/stat").read_text().split(") ", 1)[1][0]
        except OSError:
            return "gone"

    # the group's SIGTERM is sent when stop() returns; the grandchild dies when it is next
    # scheduled (a fixed 0.2 s was not always enough on a loaded machine): wait for that
    deadline = time.monotonic() + 5
    while state() not in ("gone", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state() in ("gone", "Z"), state()
    assert (tmp_path / names["stdout"]).read_text() == "up\n"


def test_the_spec_passes_rays_env_var_expansion_unchanged(sched: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray expands ``$VAR`` and removes unknown ``${VAR}`` in a runtime env's env_vars
    (``ray._private.utils.update_envs``): the spec travels there, so a role's ``$HOME``,
    ``${TX_ROLE_NAME}`` or ``$$`` must reach the driver as written (they once arrived
    expanded with the driver's environment: ``${TX_ROLE_NAME}`` empty)."""
    require_module("ray", "the test runs Ray's own env_vars expansion: pip install 'ray[default]'")
    from ray._private.utils import update_envs

    script = 'echo "$HOME ${TX_ROLE_NAME} $$ ${replica_id}"'
    app = AppDef("dollars", roles=[Role("sh", image=str(tmp_path), entrypoint="sh", args=["-c", script],
                                        env={"P": "${PATH}:$HOME/bin"})])
    info = sched.submit_dryrun(app, {"dashboard_address": "10.1.2.3:9999"})
    raw = info.request.runtime_env["env_vars"][tx_ray_driver.SPEC_ENV]
    assert "$" not in raw
    monkeypatch.delenv("TX_TEST_SPEC", raising=False)
    update_envs({"TX_TEST_SPEC": raw})
    spec = json.loads(os.environ["TX_TEST_SPEC"])
    monkeypatch.delenv("TX_TEST_SPEC")
    assert spec == info.request.spec
    assert spec["roles"][0]["args"] == ["-c", script] and spec["roles"][0]["env"]["P"] == "${PATH}:$HOME/bin"


def test_preempt_grace_is_every_replicas_grace(sched: Any, tmp_path: Path) -> None:
    """``preempt_grace`` (default 30 s, rounded up) is in the spec and every replica's
    ``TX_PREEMPT_GRACE``; a negative one is refused."""
    spec = sched.submit_dryrun(_app(str(tmp_path)), {"preempt_grace": 7.5}).request.spec
    assert spec["preempt_grace_s"] == 8 and {r["env"]["TX_PREEMPT_GRACE"] for r in spec["roles"]} == {"8"}
    spec = sched.submit_dryrun(_app(str(tmp_path)), {}).request.spec
    assert spec["preempt_grace_s"] == 30 and spec["roles"][0]["env"]["TX_PREEMPT_GRACE"] == "30"
    with pytest.raises(InvalidRunConfigException, match="run option 'preempt_grace' must be seconds >= 0"):
        sched.submit_dryrun(_app(str(tmp_path)), {"preempt_grace": -1})


#: stands in for a replica's actor process: starts the replica, prints its pid, waits
ACTOR = """
import os, sys, time
from tx_scheduler_ray.tx_ray_driver._replica import ReplicaProcess
rp = ReplicaProcess(sys.argv[1], {s: "r." + s for s in ("stdout", "stderr", "combined")})
env = dict(os.environ, TX_PREEMPT_GRACE="3")
print(rp.start(["sh", "-c", "trap 'echo warned' TERM; echo up; while :; do sleep 0.1; done"], env, sys.argv[1])["pid"],
      flush=True)
time.sleep(300)
"""


def test_the_watchdog_warns_a_replica_whose_actor_is_gone_and_kills_it_after_the_grace(tmp_path: Path) -> None:
    """The actor's process SIGKILLed (as ``ray stop`` ends it after its grace, or a node
    gone): the replica gets SIGTERM within a second and SIGKILL ``TX_PREEMPT_GRACE`` (3 s)
    later, not before."""
    actor = subprocess.Popen([sys.executable, "-c", ACTOR, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        replica = int(actor.stdout.readline())
        out = tmp_path / "r.stdout"
        deadline = time.monotonic() + 10
        while "up" not in out.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        actor.kill()
        actor.wait()
        t0 = time.monotonic()
        while "warned" not in out.read_text():
            assert time.monotonic() - t0 < 5, out.read_text()
            time.sleep(0.05)
        warned = time.monotonic() - t0
        while os.path.exists(f"/proc/{replica}") and Path(f"/proc/{replica}/stat").read_text().split(") ")[1][0] != "Z":
            assert time.monotonic() - t0 < 15
            time.sleep(0.05)
        gone = time.monotonic() - t0
    finally:
        actor.kill()
    # SIGKILLed once the grace (3 s) had passed since the warning, not before (the loops above
    # bound a watchdog that never warns or never kills)
    assert gone - warned >= 2.5, (warned, gone)
