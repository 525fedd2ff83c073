"""Dryrun of the local schedulers: request contents, early errors (a missing `--script`
fails before anything starts), run options, GPUs."""
import json
import os
import stat
from pathlib import Path
from typing import Any, Dict

import pytest
from structlog.testing import capture_logs

from tx.log import configure, get_logger
from tx.plugins import PluginRegistry
from tx.specs import AppDef, InvalidRunConfigException, Resource, Role
from tx_scheduler_local import hooks
from tx_scheduler_local.scheduler import nvidia_smi_device_count
from tx_scheduler_local._scripts import script_of
from tx_scheduler_local.scheduler import create_cwd_scheduler, create_dir_scheduler


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_hooks_register_both_schedulers() -> None:
    reg = PluginRegistry(entry_points=[], builtins=False)
    reg.add_plugin(hooks, "local", "tx-scheduler-local", "0.1.0")
    assert reg.names("schedulers") == ["local_cwd", "local_dir"]
    assert reg.get("schedulers", "local_cwd").load().__name__ == "create_cwd_scheduler"
    assert reg.get("schedulers", "local_dir").load().__name__ == "create_dir_scheduler"


def test_run_options(sched: Any) -> None:
    opts = dict(sched.run_opts())
    assert {k: o.opt_type for k, o in opts.items()} == {
        "log_dir": str, "prepend_cwd": bool, "auto_set_cuda_visible_devices": bool, "cancel_timeout": float,
        "preempt_grace": float, "infra_retries": int,
    }
    assert opts["cancel_timeout"].default == 10.0
    assert opts["preempt_grace"].default == 30.0
    assert not any(o.is_required for o in opts.values())


def test_request_env_argv_and_macros(sched: Any, cfg: Dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    role = Role(
        "trainer", image="ignored", entrypoint="echo", num_replicas=2,
        args=["--rank", "${replica_id}", "--id", "${app_id}", "--root", "${img_root}", "--host", "$${rank0_env}"],
        env={"JOB": "local_cwd://tx/${app_id}", "PYTHONUNBUFFERED": "0"},
    )
    info = sched.submit_dryrun(AppDef("my app/1", roles=[role]), cfg)
    req = info.request
    assert req.app_id.startswith("my-app-1-")
    assert req.log_dir == os.path.join(cfg["log_dir"], "tx", req.app_id)
    (r,) = req.roles
    assert r.cwd == str(tmp_path) and os.path.basename(r.entrypoint) == "echo" and os.path.isabs(r.entrypoint)
    for k, rep in enumerate(r.replicas):
        assert rep.argv == ["echo", "--rank", str(k), "--id", req.app_id, "--root", str(tmp_path), "--host", "${rank0_env}"]
        assert rep.dir == os.path.join(req.log_dir, "trainer", str(k))
        env = rep.env
        assert env["JOB"] == f"local_cwd://tx/{req.app_id}"
        assert env["PYTHONUNBUFFERED"] == "0"  # the role's value wins over the default
        assert env["TX_RANK0_HOST"] == "localhost"
        assert (env["TX_ROLE_NAME"], env["TX_REPLICA_ID"], env["TX_APP_ID"]) == ("trainer", str(k), req.app_id)
        assert env["TORCHELASTIC_ERROR_FILE"] == os.path.join(rep.dir, "error.json")
        assert env["PET_LOG_DIR"] == os.path.join(req.log_dir, "torchelastic", "trainer")
        # the preemption warning's grace, and the file the job's preempted() notes a warning in
        assert (env["TX_PREEMPT_GRACE"], env["TX_PREEMPT_NOTE"]) == ("30", os.path.join(rep.dir, "preempt.note"))
        assert env["PATH"].split(os.pathsep)[-1] == str(tmp_path)
    text = str(info)
    assert text.startswith(f"local request for app {req.app_id} (my app/1) on local_cwd, session tx\n")
    assert f"    [1] argv: {json.dumps(r.replicas[1].argv)}\n" in text


def test_prepend_cwd_finds_cwd_executable_first(sched: Any, cfg: Dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mine = _exe(tmp_path / "ls", "#!/bin/sh\necho mine\n")
    app = AppDef("p", roles=[Role("r", image="", entrypoint="ls")])
    assert sched.submit_dryrun(app, cfg).request.roles[0].entrypoint != str(mine)
    req = sched.submit_dryrun(app, {**cfg, "prepend_cwd": True}).request
    assert req.roles[0].entrypoint == str(mine)
    assert req.roles[0].replicas[0].env["PATH"].split(os.pathsep)[0] == str(tmp_path)


def test_entrypoint_not_found_is_a_dryrun_error(sched: Any, cfg: Dict[str, Any]) -> None:
    app = AppDef("nf", roles=[Role("r", image="", entrypoint="no-such-command-tx-xyz")])
    with pytest.raises(ValueError, match="role 'r': entrypoint 'no-such-command-tx-xyz' not found"):
        sched.submit_dryrun(app, cfg)
    app = AppDef("nf", roles=[Role("r", image="", entrypoint="./missing.sh")])
    with pytest.raises(ValueError, match="missing.sh' does not exist"):
        sched.submit_dryrun(app, cfg)


def test_log_dir_parents_are_made_and_a_file_is_refused(sched: Any, tmp_path: Path, h: Any) -> None:
    app = AppDef("ld", roles=[h.sh("r", "true")])
    nested = tmp_path / "nope" / "deeper" / "logs"
    info = sched.submit_dryrun(app, {"log_dir": str(nested)})  # as TorchX: parents are made
    assert info.request.log_dir.startswith(str(nested) + os.sep)
    assert not (tmp_path / "nope").exists()  # a dryrun creates nothing
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidRunConfigException, match="not a directory") as e:
        sched.submit_dryrun(app, {"log_dir": str(tmp_path / "file")})
    assert e.value.cfg_key == "log_dir"
    with pytest.raises(InvalidRunConfigException, match="file' is not a directory"):
        sched.submit_dryrun(app, {"log_dir": str(tmp_path / "file" / "sub" / "logs")})


def test_runopts_says_log_dir_parents_are_made_and_a_run_makes_them(tx, tmp_path, one_line_error):
    """`tx runopts` says what the code does: a log_dir's missing parents are made when the app
    runs (it once said the parent must exist); a log_dir under a file is refused."""
    for scheduler in ("local_cwd", "local_dir"):
        text = " ".join(tx("runopts", scheduler).stdout.split())
        assert "made with its missing parents when the app runs" in text and "must exist" not in text
    logs = tmp_path / "a" / "b" / "logs"
    dry = tx("run", "-s", "local_cwd", "--dryrun", "-cfg", f"log_dir={logs}", "utils.echo")
    assert dry.returncode == 0 and not (tmp_path / "a").exists(), dry.stderr
    p = tx("run", "-s", "local_cwd", "-cfg", f"log_dir={logs}", "utils.echo", "--msg", "made")
    assert p.returncode == 0 and "echo/0 made" in p.stdout, p.stderr
    app_id = p.stdout.splitlines()[0].rsplit("/", 1)[1]
    assert (logs / "tx" / app_id / "echo" / "0" / "stdout.log").read_text() == "made\n"
    (tmp_path / "file").write_text("")
    one_line_error(tx("run", "-s", "local_cwd", "-cfg", f"log_dir={tmp_path / 'file' / 'x'}", "utils.echo"),
                   "is not a directory", 1)


def test_bad_names_and_cancel_timeout(sched: Any, cfg: Dict[str, Any], state_dir: Path, h: Any) -> None:
    with pytest.raises(ValueError, match="role name 'a/b'"):
        sched.submit_dryrun(AppDef("x", roles=[h.sh("a/b", "true")]), cfg)
    with pytest.raises(InvalidRunConfigException, match="cancel_timeout"):
        sched.submit_dryrun(AppDef("x", roles=[h.sh("a", "true")]), {**cfg, "cancel_timeout": -1.0})
    with pytest.raises(InvalidRunConfigException, match="run option 'preempt_grace' must be >= 0 seconds"):
        sched.submit_dryrun(AppDef("x", roles=[h.sh("a", "true")]), {**cfg, "preempt_grace": -1.0})
    with pytest.raises(ValueError, match="session name"):
        create_cwd_scheduler("a/b", state_dir=str(state_dir)).submit_dryrun(AppDef("x", roles=[h.sh("a", "true")]), cfg)


def test_dryrun_touches_nothing(sched: Any, cfg: Dict[str, Any], state_dir: Path, log_root: Path, h: Any) -> None:
    info = sched.submit_dryrun(AppDef("x", roles=[h.sh("a", "true", 3)]), cfg)
    assert not state_dir.exists() and not log_root.exists()
    assert sched.describe(info.request.app_id) is None


def test_local_dir_image_must_be_a_directory(state_dir: Path, cfg: Dict[str, Any], tmp_path: Path) -> None:
    s = create_dir_scheduler("tx", state_dir=str(state_dir))
    with pytest.raises(ValueError, match="image '.*nope' is not an existing directory"):
        s.submit_dryrun(AppDef("d", roles=[Role("r", image=str(tmp_path / "nope"), entrypoint="sh")]), cfg)
    with pytest.raises(ValueError, match="image '' is not an existing directory"):
        s.submit_dryrun(AppDef("d", roles=[Role("r", image="", entrypoint="sh")]), cfg)


def test_local_dir_with_a_builtin_says_how_to_give_the_directory_and_both_ways_work(tx, tmp_path, one_line_error):
    """A built-in component's image is a container image name; local_dir (as TorchX's) takes
    the image as the directory to run in: the error says how to give one, and both ways run."""
    one_line_error(tx("run", "-s", "local_dir", "utils.echo"), "pass the component --image DIR", 1)
    p = tx("run", "-s", "local_dir", "utils.echo")
    assert "[component:NAME] in .txconfig" in p.stderr and "or run it on local_cwd" in p.stderr
    img = tmp_path / "img"
    img.mkdir()
    p = tx("run", "-s", "local_dir", "utils.sh", "--image", str(img), "pwd")
    assert p.returncode == 0 and f"sh/0 {img}" in p.stdout, p.stdout + p.stderr
    (tmp_path / ".txconfig").write_text(f"[component:utils.sh]\nimage = {img}\n")
    p = tx("run", "-s", "local_dir", "utils.sh", "pwd")
    assert p.returncode == 0 and f"sh/0 {img}" in p.stdout, p.stdout + p.stderr


def _named_app(tmp_path: Path, name: str, image: str) -> Path:
    path = tmp_path / f"app-{len(name)}.yaml"
    path.write_text(json.dumps({"name": name, "roles": [{"name": "r", "image": image, "entrypoint": "echo",
                                                         "args": ["hi"]}]}))
    return path


@pytest.mark.parametrize("scheduler", ["local_cwd", "local_dir"])
def test_a_name_too_long_for_a_file_name_is_refused_at_dryrun_and_leaves_nothing(tx, tx_env, tmp_path,
                                                                                 one_line_error, scheduler):
    """The app id names files (the registry's ``.new-<app_id>-<pid>`` is the longest): a
    name that cannot fit is refused in one line by the dryrun and the run alike, whatever
    tx's pid; before, 226-300 characters passed the dryrun and the run failed with `File
    name too long` naming an internal path, leaving an empty log directory."""
    from tx_scheduler_local.request import NAME_MAX

    assert NAME_MAX == 227
    app = _named_app(tmp_path, "a" * (NAME_MAX + 1), str(tmp_path))
    for args in (["--dryrun"], []):
        one_line_error(tx("run", "-s", scheduler, *args, str(app)),
                       f"is {NAME_MAX + 1} characters long; {scheduler} names files after its apps and keeps at "
                       f"most {NAME_MAX} characters of a name", 1)
    logs = Path(tx_env["TMPDIR"])
    assert [p for p in logs.rglob("*") if p.is_dir()] == []
    assert not (Path(tx_env["TX_STATE_DIR"]) / "local").exists()


def test_the_longest_name_runs_whatever_the_pid(tx, tmp_path):
    app = _named_app(tmp_path, "b" * 227, "img")
    for _ in range(3):  # each run has another pid and random id
        p = tx("run", "-s", "local_cwd", str(app))
        assert p.returncode == 0 and "r/0 hi" in p.stdout, p.stdout + p.stderr


def test_local_dir_looks_up_entrypoint_in_image_first(state_dir: Path, cfg: Dict[str, Any], tmp_path: Path) -> None:
    img = tmp_path / "img"
    img.mkdir()
    mine = _exe(img / "ls", "#!/bin/sh\necho mine\n")
    s = create_dir_scheduler("tx", state_dir=str(state_dir))
    req = s.submit_dryrun(AppDef("d", roles=[Role("r", image=str(img), entrypoint="ls", args=["${img_root}"])]), cfg).request
    assert req.roles[0].entrypoint == str(mine)
    assert req.roles[0].cwd == str(img)
    assert req.roles[0].replicas[0].argv == ["ls", str(img)]


@pytest.mark.parametrize("entrypoint,args,script", [
    ("torchrun", ["--rdzv_backend", "c10d", "--nnodes", "1", "--tee", "3", "--role", "", "train.py", "--lr", "1"], "train.py"),
    ("torchrun", ["--standalone", "--nproc_per_node=2", "a/b.py"], "a/b.py"),
    ("torchrun", ["--nnodes", "1", "-m", "pkg.main"], None),
    ("torchrun", ["--no-python", "--nnodes", "1", "echo"], None),
    ("bash", ["-c", "torchrun --nnodes 2 --rdzv_endpoint ${H:=x}:29500 'my script.py' --x 1"], "my script.py"),
    ("bash", ["-c", "torchrun x.py; rm -rf /"], None),
    ("python", ["-u", "-W", "ignore", "run.py", "arg"], "run.py"),
    ("python3", ["-c", "print(1)"], None),
    ("/usr/bin/python3.11", ["-m", "http.server"], None),
    ("sh", ["-c", "echo hi"], None),
    ("echo", ["x.py"], None),
])
def test_script_of(entrypoint, args, script):
    assert script_of(entrypoint, args) == script


@pytest.mark.parametrize("scheduler", ["local_cwd", "local_dir"])
def test_missing_script_fails_before_anything_starts(tx, tx_env, tmp_path, one_line_error, scheduler):
    img = ["--image", str(tmp_path)] if scheduler == "local_dir" else []
    one_line_error(tx("run", "-s", scheduler, "dist.ddp", "-j", "1x2", *img, "--script", "tain.py"),
                   f"runs 'tain.py', which does not exist in {tmp_path}", 1)
    one_line_error(tx("run", "-s", scheduler, "dist.ddp", "-j", "2x1", *img, "--script", "tain.py"),
                   "runs 'tain.py', which does not exist", 1)
    # nothing was started or recorded
    apps = os.path.join(tx_env["TX_STATE_DIR"], "local", "apps")
    assert not os.path.isdir(apps) or os.listdir(apps) == []
    (tmp_path / "ok.py").write_text("print('fine')\n")
    p = tx("run", "-s", scheduler, "utils.python", *img, "--script", "ok.py")
    assert p.returncode == 0 and "python/0 fine" in p.stdout, p.stderr


# -- auto_set_cuda_visible_devices ---------------------------------------------------------
@pytest.fixture
def warnings_on() -> None:
    """structlog set up at WARNING (capture_logs needs it configured before it starts)."""
    configure("WARNING")
    get_logger(__name__).warning("test logging set up")


def _gpu_app() -> AppDef:
    return AppDef("g", roles=[
        Role("a", image="", entrypoint="true", num_replicas=1, resource=Resource(cpu=1, gpu=2, memMB=64)),
        Role("cpu", image="", entrypoint="true", num_replicas=2),
        Role("b", image="", entrypoint="true", num_replicas=3, resource=Resource(cpu=1, gpu=1, memMB=64),
             env={"CUDA_VISIBLE_DEVICES": "7"}),
    ])


def _cuda(info: Any) -> Dict[str, Any]:
    return {r.name: [rep.env.get("CUDA_VISIBLE_DEVICES") for rep in r.replicas] for r in info.request.roles}


def test_cuda_devices_assigned_on_8_gpu_host(state_dir: Path, cfg: Dict[str, Any]) -> None:
    s = create_cwd_scheduler("tx", state_dir=str(state_dir), cuda_device_count=lambda: 8)
    info = s.submit_dryrun(_gpu_app(), {**cfg, "auto_set_cuda_visible_devices": True})
    assert _cuda(info) == {"a": ["0,1"], "cpu": [None, None], "b": ["2", "3", "4"]}


def test_cuda_too_few_devices_warns_and_sets_nothing(state_dir: Path, cfg: Dict[str, Any], warnings_on: None) -> None:
    s = create_cwd_scheduler("tx", state_dir=str(state_dir), cuda_device_count=lambda: 8)
    app = AppDef("g", roles=[Role("w", image="", entrypoint="true", num_replicas=3, resource=Resource(cpu=1, gpu=4, memMB=64))])
    with capture_logs() as logs:
        info = s.submit_dryrun(app, {**cfg, "auto_set_cuda_visible_devices": True})
    assert _cuda(info) == {"w": [None, None, None]}
    assert any("requests 12 GPUs but this host has 8" in e["event"] for e in logs), logs


def test_cuda_option_off_warns_that_replicas_share(state_dir: Path, cfg: Dict[str, Any], warnings_on: None) -> None:
    calls = []
    s = create_cwd_scheduler("tx", state_dir=str(state_dir), cuda_device_count=lambda: calls.append(1) or 8)
    with capture_logs() as logs:
        info = s.submit_dryrun(_gpu_app(), cfg)
    assert _cuda(info) == {"a": [None], "cpu": [None, None], "b": ["7", "7", "7"]}
    assert any("4 replicas request GPUs and will share" in e["event"] for e in logs), logs
    assert calls == []  # the host is not even asked
    with capture_logs() as logs:
        s.submit_dryrun(AppDef("one", roles=[_gpu_app().roles[0]]), cfg)
    assert not logs


def test_nvidia_smi_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert nvidia_smi_device_count() == 0  # no binary
    _exe(tmp_path / "nvidia-smi", "#!/bin/sh\necho 'GPU 0: A100 (UUID: x)'\necho\necho 'GPU 1: A100 (UUID: y)'\n")
    assert nvidia_smi_device_count() == 2
    _exe(tmp_path / "nvidia-smi", "#!/bin/sh\necho 'GPU 0: A100'\nexit 9\n")
    assert nvidia_smi_device_count() == 0  # a failing command
