"""Mounts on a scheduler that supports none (``slurm``, ``gcp_batch``): tx refuses them;
the ``torchx`` command and TorchX's API drop them, as TorchX 0.7 ignores them, and say so in
one line on stderr (a Kubernetes-first project dry-running on Slurm)."""
from typing import Any

import pytest

from tx.specs import AppDef, Resource, Role, VolumeMount

MOUNT = "type=volume,src=nas-pvc,dst=/mnt/data"
DROPPED = "supports no mounts; ignored, as TorchX does: role 'train': volume nas-pvc -> /mnt/data"
#: a dryrun of each needs no cluster; gcp_batch a project
SCHEDULERS = [("slurm", []), ("gcp_batch", ["-cfg", "project=p"])]


@pytest.mark.parametrize("scheduler, cfg", SCHEDULERS)
def test_cli(cli: Any, scheduler: str, cfg: Any) -> None:
    p = cli("run", "--dryrun", "-s", scheduler, *cfg, "dist.ddp", "-j", "1x2", "--script", "train.py",
            "--mounts", MOUNT)
    if cli.name == "torchx":
        assert p.returncode == 0, p.stderr
        assert p.stderr == f"torchx run: warning: the {scheduler} scheduler {DROPPED}\n", p.stderr
        request = p.stdout.split("=== SCHEDULER REQUEST ===", 1)[1]
        assert "nas-pvc" not in request and "/mnt/data" not in request, request
    else:
        assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
        assert "has mounts" in p.stderr and "Traceback" not in p.stderr, p.stderr


def _app() -> AppDef:
    return AppDef("m", roles=[Role("train", image="img", entrypoint="echo", args=["hi"],
                                   resource=Resource(cpu=1, gpu=0, memMB=128),
                                   mounts=[VolumeMount(src="nas-pvc", dst_path="/mnt/data")])])


@pytest.mark.parametrize("scheduler, cfg", [("slurm", {}), ("gcp_batch", {"project": "p"})])
def test_torchx_runner_and_scheduler_classes(scheduler: str, cfg: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    from torchx.runner import get_runner
    from tx.runner import get_runner as tx_get_runner

    app = _app()
    with get_runner() as runner:
        info = runner.dryrun(app, scheduler, cfg)
    assert capsys.readouterr().err == f"torchx: warning: the {scheduler} scheduler {DROPPED}\n"
    assert [r.mounts for r in info._app.roles] == [[]] and app.roles[0].mounts  # the caller's app as it was
    # TorchX's scheduler classes, used directly
    mod = importlib.import_module(f"torchx.schedulers.{scheduler}_scheduler")
    info = mod.create_scheduler("sess").submit_dryrun(app, cfg)
    assert capsys.readouterr().err == f"torchx: warning: the {scheduler} scheduler {DROPPED}\n"
    assert "nas-pvc" not in repr(info.request)
    # tx's Runner refuses them
    with tx_get_runner() as runner, pytest.raises(ValueError, match="mounts"):
        runner.dryrun(app, scheduler, cfg)
    # a scheduler with mounts keeps them, without a word
    with get_runner() as runner:
        info = runner.dryrun(app, "local_docker", {})
    assert "supports no mounts" not in capsys.readouterr().err and info._app.roles[0].mounts
