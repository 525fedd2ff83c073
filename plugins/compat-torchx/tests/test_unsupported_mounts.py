"""Mounts on a scheduler that supports none (``local_cwd``, ``local_dir``, ``ray``,
``slurm``, ``gcp_batch``): tx refuses them; the ``torchx`` command and TorchX's API drop
them, as TorchX 0.7 ignores them, and say so in one line on stderr (a Kubernetes-first
project dry-running on Slurm or on the local host). On the local schedulers a writable bind
mount with src equal to dst holds as it is (the host's filesystem) and is kept."""
import os
from typing import Any, List

import pytest

from tx.specs import AppDef, Resource, Role, VolumeMount

MOUNT = "type=volume,src=nas-pvc,dst=/mnt/data"
DROPPED = "supports no mounts; ignored, as TorchX does: role 'train': volume nas-pvc -> /mnt/data"
#: a dryrun of each needs no cluster; gcp_batch a project; local_dir an image directory
SCHEDULERS = [("slurm", []), ("gcp_batch", ["-cfg", "project=p"]), ("local_cwd", []),
              ("local_dir", []), ("ray", [])]
#: how tx refuses them: slurm's own check (its _validate), else Scheduler.ignored_mounts'
REFUSED = {"slurm": "has mounts",
           **{s: f"role 'train': the {s} scheduler cannot honour mount volume nas-pvc -> /mnt/data "
              "(it would run without it); " for s in ("gcp_batch", "local_cwd", "local_dir", "ray")}}


def _ddp(scheduler: str, cfg: List[str], *mounts: str) -> List[str]:
    """``run --dryrun`` of dist.ddp (role 'train') on ``scheduler`` with ``mounts``."""
    image = ["--image", os.getcwd()] if scheduler == "local_dir" else []  # an existing directory
    return ["run", "--dryrun", "-s", scheduler, *cfg, "dist.ddp", "-j", "1x2", "--script", "train.py",
            *image, *[a for m in mounts for a in ("--mounts", m)]]


@pytest.mark.parametrize("scheduler, cfg", SCHEDULERS)
def test_cli(cli: Any, scheduler: str, cfg: Any) -> None:
    p = cli(*_ddp(scheduler, cfg, MOUNT))
    if cli.name == "torchx":
        assert p.returncode == 0, p.stderr
        assert p.stderr == f"torchx run: warning: the {scheduler} scheduler {DROPPED}\n", p.stderr
        request = p.stdout.split("=== SCHEDULER REQUEST ===", 1)[1]
        assert "nas-pvc" not in request and "/mnt/data" not in request, request
    else:
        assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
        assert REFUSED[scheduler] in p.stderr and "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("scheduler, cfg", SCHEDULERS[2:4])
def test_local_bind_mounts_per_kind(cli: Any, scheduler: str, cfg: Any, tmp_path: Any) -> None:
    """local_cwd/local_dir: a writable bind mount with src == dst holds on the host and is
    kept silently by both commands; another dst, a read-only one, a device are refused by
    tx (each named) and dropped by torchx (each named, the kept one not)."""
    same = f"type=bind,src={tmp_path},dst={tmp_path}"
    p = cli(*_ddp(scheduler, cfg, same))
    assert p.returncode == 0 and p.stderr == "", p.stderr
    bad = [f"type=bind,src={tmp_path},dst=/data", f"type=bind,src={tmp_path},dst={tmp_path},readonly",
           "type=device,src=/dev/fuse"]
    texts = [f"bind {tmp_path} -> /data", f"bind {tmp_path} -> {tmp_path} (read-only)", "device /dev/fuse -> /dev/fuse"]
    for mount, text in zip(bad, texts):
        p = cli(*_ddp(scheduler, cfg, same, mount))
        if cli.name == "torchx":
            assert p.returncode == 0, p.stderr
            assert p.stderr == (f"torchx run: warning: the {scheduler} scheduler supports no mounts; ignored, "
                                f"as TorchX does: role 'train': {text}\n"), p.stderr
        else:
            assert p.returncode == 1 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
            assert f"role 'train': the {scheduler} scheduler cannot honour mount {text} (" in p.stderr, p.stderr
            assert "run on local_docker" in p.stderr, p.stderr


def _app() -> AppDef:
    return AppDef("m", roles=[Role("train", image="img", entrypoint="echo", args=["hi"],
                                   resource=Resource(cpu=1, gpu=0, memMB=128),
                                   mounts=[VolumeMount(src="nas-pvc", dst_path="/mnt/data")])])


#: (scheduler, its run options, TorchX's module of it, its create_scheduler's keyword arguments)
CLASSES = [("slurm", {}, "slurm", {}), ("gcp_batch", {"project": "p"}, "gcp_batch", {}),
           ("local_cwd", {}, "local", {}), ("local_dir", {}, "local", {"image_provider_class": "dir"}),
           ("ray", {}, "ray", {})]


@pytest.mark.parametrize("scheduler, cfg, module, kwargs", CLASSES)
def test_torchx_runner_and_scheduler_classes(scheduler: str, cfg: Any, module: str, kwargs: Any,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    from torchx.runner import get_runner
    from tx.runner import get_runner as tx_get_runner

    app = _app()
    mod = importlib.import_module(f"torchx.schedulers.{module}_scheduler")
    if kwargs.get("image_provider_class") == "dir":
        kwargs = {"image_provider_class": mod.LocalDirectoryImageProvider}
        app.roles[0].image = os.getcwd()  # local_dir runs in an existing directory
    with get_runner() as runner:
        info = runner.dryrun(app, scheduler, cfg)
    assert capsys.readouterr().err == f"torchx: warning: the {scheduler} scheduler {DROPPED}\n"
    assert [r.mounts for r in info._app.roles] == [[]] and app.roles[0].mounts  # the caller's app as it was
    # TorchX's scheduler classes, used directly
    info = mod.create_scheduler("sess", **kwargs).submit_dryrun(app, cfg)
    assert capsys.readouterr().err == f"torchx: warning: the {scheduler} scheduler {DROPPED}\n"
    assert "nas-pvc" not in repr(info.request)
    # tx's Runner refuses them
    with tx_get_runner() as runner, pytest.raises(ValueError, match="has mounts|cannot honour mount volume nas-pvc -> /mnt/data"):
        runner.dryrun(app, scheduler, cfg)
    # a scheduler with mounts keeps them, without a word
    with get_runner() as runner:
        info = runner.dryrun(app, "local_docker", {})
    assert "supports no mounts" not in capsys.readouterr().err and info._app.roles[0].mounts
