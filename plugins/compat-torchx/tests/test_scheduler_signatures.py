"""TorchX 0.7.0's public scheduler constructors, as code that builds schedulers itself
(codeflare-sdk's ``RayScheduler(session_name, ray_client=...)``) calls them."""
import inspect
from pathlib import Path
from typing import Any

import pytest

# (module, class, TorchX 0.7.0's constructor parameters after self, its create_scheduler's)
SIGNATURES = [
    ("ray_scheduler", "RayScheduler", ["session_name", "ray_client"], ["session_name", "ray_client", "kwargs"]),
    ("kubernetes_scheduler", "KubernetesScheduler", ["session_name", "client", "docker_client"],
     ["session_name", "client", "docker_client", "kwargs"]),
    ("kubernetes_mcad_scheduler", "KubernetesMCADScheduler", ["session_name", "client", "docker_client"],
     ["session_name", "client", "docker_client", "kwargs"]),
    ("aws_batch_scheduler", "AWSBatchScheduler", ["session_name", "client", "log_client", "docker_client"],
     ["session_name", "client", "log_client", "docker_client", "kwargs"]),
    ("gcp_batch_scheduler", "GCPBatchScheduler", ["session_name", "client"], ["session_name", "client", "kwargs"]),
    ("docker_scheduler", "DockerScheduler", ["session_name"], ["session_name"]),
    ("slurm_scheduler", "SlurmScheduler", ["session_name"], ["session_name"]),
]


@pytest.mark.parametrize("module, cls, ctor, factory", SIGNATURES)
def test_constructors_take_torchx_arguments(module: str, cls: str, ctor: Any, factory: Any) -> None:
    import importlib

    mod = importlib.import_module(f"torchx.schedulers.{module}")
    klass = getattr(mod, cls)
    params = list(inspect.signature(klass.__init__).parameters)[1:]
    assert params[:len(ctor)] == ctor, params
    fparams = list(inspect.signature(mod.create_scheduler).parameters)
    assert fparams[:len(factory) - 1] == factory[:len(factory) - 1], fparams
    # positionally, as TorchX's callers pass them; None for every client
    sched = klass("sess", *[None] * (len(ctor) - 1))
    assert sched.session_name == "sess"
    made = mod.create_scheduler("sess", some_torchx_param=1)  # unknown scheduler params are ignored
    assert made.session_name == "sess" and isinstance(made, klass)


def test_ray_scheduler_with_a_client_uses_it() -> None:
    from torchx.schedulers.ray_scheduler import RayScheduler

    class Client:  # what a JobSubmissionClient answers about itself
        def get_address(self) -> str:
            return "http://head.example:8265"

    plain = RayScheduler("sess", ray_client=None)
    given = RayScheduler("sess", Client())
    assert plain.session_name == given.session_name == "sess"
    assert given._default_url() == "http://head.example:8265"


def test_ray_working_dir_cfg(cli: Any, tmp_path: Path) -> None:
    """torchrec's Ray README (``-cfg ...,working_dir=...,requirements=./requirements.txt``, run
    from the repository's root), through both commands: the example directory is the Ray
    job's working_dir and its requirements are installed (TorchX 0.7.0 dropped the key and
    uploaded the current directory); a dryrun needs no Ray head."""
    ex = tmp_path / "examples" / "ray"
    ex.mkdir(parents=True)
    (ex / "requirements.txt").write_text("torchrec\n")
    (ex / "test_installation.py").write_text("print('ok')\n")
    p = cli("run", "--dryrun", "-s", "ray", "-cfg",
            f"dashboard_address=localhost:6379,working_dir={ex},requirements=./requirements.txt",
            "dist.ddp", "-j", "1x2", "--script", "test_installation.py")
    assert p.returncode == 0, p.stderr
    assert "warning" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert "app_id: localhost:6379-test-installation-" in p.stdout, p.stdout
    assert f'"working_dir": "{ex}"' in p.stdout and '"torchrec"' in p.stdout, p.stdout
    bad = cli("run", "--dryrun", "-s", "ray", "-cfg", f"working_dir={tmp_path / 'nope'}", "utils.echo")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1, bad.stderr
    assert "run option 'working_dir'" in bad.stderr and "is not a directory" in bad.stderr, bad.stderr


def test_runner_uses_an_instance_put_in_scheduler_instances(tmp_path: Path) -> None:
    """What codeflare-sdk's DDPJobDefinition does (written here): its own ``RayScheduler`` in
    ``runner._scheduler_instances``, a static-rendezvous ``ddp`` and a ``file://`` workspace."""
    from torchx.components.dist import ddp
    from torchx.runner import get_runner
    from torchx.schedulers.ray_scheduler import RayScheduler

    (tmp_path / "train.py").write_text("print('x')\n")
    with get_runner(ray_client=None) as runner:
        mine = RayScheduler(session_name=runner._name, ray_client=None)
        runner._scheduler_instances["ray"] = mine
        app = ddp(script="train.py", name="mnist", cpu=1, memMB=1024, j="2x1", rdzv_backend="static")
        for workspace in (f"file://{tmp_path}", str(tmp_path)):
            info = runner.dryrun(app, "ray", cfg={"cluster_name": "c", "dashboard_address": "ray.example:8265"},
                                 workspace=workspace)
            assert info._scheduler == "ray" and runner._scheduler("ray") is mine
            assert info.request.app_id and "--node_rank" in app.roles[0].args[1]


@pytest.mark.parametrize("scheduler", ["local_cwd", "local_dir"])
def test_local_factory_refuses_cache_size_below_one(scheduler: str) -> None:
    """``get_runner(cache_size=0)`` fails on first use of a local scheduler, as in TorchX 0.7.0."""
    from torchx.runner import get_runner
    from torchx.specs import AppDef, Role

    app = AppDef("e", [Role("e", image=".", entrypoint="true")])
    with get_runner(cache_size=0) as runner, pytest.raises(ValueError, match="cache_size must be greater than zero"):
        runner.dryrun(app, scheduler)
    with get_runner(cache_size=5) as runner:
        assert runner.dryrun(app, scheduler).request is not None
