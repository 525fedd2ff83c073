"""Every module path of TorchX 0.7.0 (its package layout as the project's TorchX inventory
lists it, and the paths its ``torchx.specs`` and Local pages name) imports under
``torchx.`` (tx-torchx-compat), or fails in one line that docs/migrating-from-torchx.md and
the compat README explain; and each has a home under tx that imports: the same path under
``tx.`` where tx keeps TorchX's layout (``tx.specs.file_linter`` included, which lives in
``tx.components.system`` and resolves there lazily), else the module that holds it."""
from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest

#: TorchX 0.7.0's module paths -> their home in tx ("=": the same path under ``tx.``)
TORCHX_MODULES = {
    "torchx": "=",
    "torchx.version": "=",
    # the torchx.specs page
    "torchx.specs": "=",
    "torchx.specs.api": "=",
    "torchx.specs.builders": "=",
    "torchx.specs.finder": "=",
    "torchx.specs.file_linter": "=",
    "torchx.specs.named_resources_generic": "tx.specs.named_resources",
    "torchx.specs.named_resources_aws": "tx_scheduler_aws_batch.resources",
    "torchx.runner": "=",
    "torchx.runner.api": "=",
    "torchx.runner.events": "=",
    "torchx.runner.config": "tx.config.files",
    "torchx.schedulers": "=",
    "torchx.schedulers.api": "=",
    "torchx.schedulers.ids": "=",
    "torchx.schedulers.streams": "=",
    "torchx.schedulers.devices": "tx.specs.mounts",
    # the Local page
    "torchx.schedulers.local_scheduler": "tx_scheduler_local.scheduler",
    "torchx.schedulers.docker_scheduler": "tx_scheduler_docker.scheduler",
    "torchx.schedulers.kubernetes_scheduler": "tx_scheduler_k8s.kubernetes_scheduler",
    "torchx.schedulers.kubernetes_mcad_scheduler": "tx_scheduler_k8s.kubernetes_mcad_scheduler",
    "torchx.schedulers.slurm_scheduler": "tx_scheduler_slurm.scheduler",
    "torchx.schedulers.aws_batch_scheduler": "tx_scheduler_aws_batch.scheduler",
    "torchx.schedulers.gcp_batch_scheduler": "tx_scheduler_gcp_batch.scheduler",
    "torchx.schedulers.ray_scheduler": "tx_scheduler_ray.scheduler",
    "torchx.schedulers.ray": "tx_scheduler_ray",
    "torchx.schedulers.ray.ray_common": "tx_scheduler_ray",
    "torchx.workspace": "=",
    "torchx.workspace.api": "=",
    "torchx.workspace.dir_workspace": "=",
    "torchx.workspace.docker_workspace": "tx_scheduler_docker.workspace",
    "torchx.tracker": "=",
    "torchx.tracker.api": "=",
    "torchx.tracker.backend": "=",
    "torchx.tracker.backend.fsspec": "=",
    "torchx.tracker.mlflow": "tx_tracker_mlflow",
    "torchx.notebook": "tx_notebook",
    "torchx.distributed": "=",
    "torchx.components": "=",
    "torchx.components.dist": "=",
    "torchx.components.utils": "=",
    "torchx.components.serve": "=",
    "torchx.components.metrics": "=",
    "torchx.components.structured_arg": "=",
    "torchx.components.interpret": "tx.components",  # TorchX's page of advice; no components
    "torchx.components.train": "tx.components",  # likewise
    "torchx.components.component_test_base": "tx.testing",
    "torchx.apps": "=",
    "torchx.apps.serve": "tx.apps.serve",
    "torchx.apps.serve.serve": "tx.apps.serve",
    "torchx.apps.utils": "tx.apps",
    "torchx.apps.utils.booth_main": "tx.apps.booth_main",
    "torchx.apps.utils.copy_main": "tx.apps.copy_main",
    "torchx.apps.utils.process_monitor": "tx.apps.process_monitor",
    "torchx.runtime": "tx.tracker",
    "torchx.runtime.tracking": "tx.tracker",
    "torchx.runtime.tracking.api": "tx.tracker",
    "torchx.cli": "=",
    "torchx.cli.main": "=",
    "torchx.util": "tx.components.system.decode",
    "torchx.util.entrypoints": "tx.plugins",
    "torchx.util.types": "tx.components.system.decode",
    "torchx.util.cuda": "tx.distributed",
    "torchx.util.strings": "tx.schedulers.ids",
    "torchx.util.shlex": "tx.components.utils",
    "torchx.util.io": "tx.config.files",
    "torchx.util.datetime": "tx.durations",
}

#: TorchX 0.7.0 modules tx does not provide, and the words of the one-line error (the
#: compat README's "Not provided" and docs/migrating-from-torchx.md say why)
NOT_PROVIDED = {
    "torchx.schedulers.lsf_scheduler": "tx has no lsf scheduler",
    "torchx.schedulers.aws_sagemaker_scheduler": "tx has no aws_sagemaker scheduler",
    "torchx.schedulers.ray.ray_driver": "No module named 'torchx.schedulers.ray.ray_driver'",
    "torchx.components.integration_tests": "No module named 'torchx.components.integration_tests'",
}

#: TorchX 0.7.0's KFP adapter -> tx-pipelines-kfp (the KFP v2 SDK), which the shared test
#: environment does not install (kfp 2.x pins protobuf<7: hatch's kfp environment has it)
KFP_MODULES = {
    "torchx.pipelines.kfp": "tx_pipelines_kfp",
    "torchx.pipelines.kfp.adapter": "tx_pipelines_kfp.adapter",
    "torchx.pipelines.kfp.version": "tx_pipelines_kfp.version",
}


def _tx_home(path: str) -> str:
    home = TORCHX_MODULES[path]
    return "tx" + path[len("torchx"):] if home == "=" else home


@pytest.mark.parametrize("path", sorted(TORCHX_MODULES))
def test_torchx_module_path_imports_and_so_does_its_tx_home(path):
    importlib.import_module(path)
    importlib.import_module(_tx_home(path))


@pytest.mark.parametrize("path", sorted(NOT_PROVIDED))
def test_a_module_tx_does_not_provide_fails_in_one_line(path):
    with pytest.raises(ModuleNotFoundError) as e:
        importlib.import_module(path)
    assert NOT_PROVIDED[path] in str(e.value) and "\n" not in str(e.value)


def test_torchx_pipelines_imports_without_kfp():
    importlib.import_module("torchx.pipelines")


@pytest.mark.parametrize("path", sorted(KFP_MODULES))
def test_torchx_kfp_paths_are_the_plugin_where_kfp_2_is_installed_else_one_line(path):
    """With tx-pipelines-kfp and kfp 2.x: the plugin's module under TorchX's path; without
    either: ModuleNotFoundError in one line naming what to pip install (TorchX's package
    failed likewise without kfp 1.x)."""
    if importlib.util.find_spec("kfp") is not None and importlib.util.find_spec("tx_pipelines_kfp") is not None:
        mod = importlib.import_module(path)
        home = importlib.import_module(KFP_MODULES[path])
        assert all(getattr(mod, n) is getattr(home, n) for n in getattr(home, "__all__", []))
        return
    with pytest.raises(ModuleNotFoundError) as e:
        importlib.import_module(path)
    assert "pip install" in str(e.value) and "\n" not in str(e.value)
    assert "kfp" in str(e.value)


@pytest.mark.parametrize("name", ["file_linter", "finder", "builders"])
def test_tx_specs_keeps_torchx_paths_of_the_component_system_with_the_same_objects(name):
    alias = importlib.import_module(f"tx.specs.{name}")
    target = importlib.import_module(f"tx.components.system.{name}")
    assert alias.__all__ == target.__all__
    assert all(getattr(alias, n) is getattr(target, n) for n in target.__all__)
    with pytest.raises(AttributeError, match="nosuch"):
        alias.nosuch  # noqa: B018


def test_importing_the_model_or_an_alias_loads_no_component_system():
    """tx.specs is floor 1: neither it nor a TorchX path kept in it loads tx.components
    until a name is used."""
    code = ("import sys, tx.specs, tx.specs.file_linter, tx.specs.finder, tx.specs.builders\n"
            "before = sorted(m for m in sys.modules if m.startswith('tx.components'))\n"
            "from tx.specs.file_linter import validate\n"
            "from tx.specs.file_linter import *\n"
            "print(before, 'tx.components.system.file_linter' in sys.modules, LinterMessage.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "True", "tx.components.system.file_linter"]


def test_torchx_util_io_and_datetime(tmp_path):
    import time

    from torchx.util.datetime import get_past_epoch_time
    from torchx.util.io import read_conf_file

    (tmp_path / "c.ini").write_text("[a]\nb = 1\n")
    assert read_conf_file(str(tmp_path / "c.ini")) == "[a]\nb = 1\n"
    with pytest.raises(FileNotFoundError, match="nope does not exist"):
        read_conf_file(str(tmp_path / "nope"))
    assert abs(get_past_epoch_time(2) - (time.time() - 2 * 86400)) < 5
