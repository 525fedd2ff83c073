"""The KFP adapter (TorchX's names on the KFP v2 SDK): pipelines of AppDefs compiled with
kfp's own compiler, their IR read back (image, command, env, resources, retries, the chain
of tasks); what one container cannot hold is refused in one line.

The container components are not run: kfp.local's SubprocessRunner refuses container
components, and its DockerRunner reports a failing container as SUCCESS where the engine
removes it before wait() answers (its auto_remove=True, then exit 0 assumed: podman 4.3;
the plugin's README); tests/test_step.py runs apps through kfp.local with the run_app step."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tx.testing.backends import require_module

require_module("kfp", "the KFP v2 SDK; these tests run in hatch's kfp environment: hatch run kfp:test")

from kfp import compiler, dsl  # noqa: E402

from tx.specs import AppDef, BindMount, Resource, Role  # noqa: E402
from tx_pipelines_kfp.adapter import (  # noqa: E402
    KfpAdapterError,
    component_from_app,
    component_spec_from_app,
    container_from_app,
    resource_from_app,
)
from tx_pipelines_kfp.step import run_app  # noqa: E402


def _app(name: str = "trainer", **role_kw) -> AppDef:
    kw = dict(name="worker", image="ghcr.io/acme/train:1", entrypoint="python",
              args=["-m", "train", "--out", "/tmp/${app_id}/${replica_id}"],
              env={"LR": "0.1"}, resource=Resource(cpu=4, gpu=2, memMB=2048), max_retries=3)
    kw.update(role_kw)
    return AppDef(name=name, roles=[Role(**kw)])


def _compile(pipeline, tmp_path: Path) -> dict:
    out = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(pipeline, str(out))
    return yaml.safe_load(out.read_text())


def test_component_spec_is_the_roles_container():
    spec, role = component_spec_from_app(_app())
    data = yaml.safe_load(spec)
    assert data["name"] == "trainer-worker"
    assert data["implementation"]["container"] == {
        "image": "ghcr.io/acme/train:1",
        "command": ["python", "-m", "train", "--out", "/tmp/{{$.pipeline_task_uuid}}/0"],
    }
    assert role.name == "worker" and role.env == {"LR": "0.1"}


def test_compiled_ir_has_image_command_env_resources_retries_and_the_chain(tmp_path):
    train = component_from_app(_app())
    evaluate = _app("evaluate", resource=Resource(cpu=1, gpu=0, memMB=512), max_retries=0, env={})
    assert train.component_spec.name == "trainer-worker"

    @dsl.pipeline(name="train-then-evaluate")
    def pipeline():
        t = train()
        container_from_app(evaluate).after(t)

    ir = _compile(pipeline, tmp_path)
    executors = ir["deploymentSpec"]["executors"]
    c = executors["exec-trainer-worker"]["container"]
    assert c["image"] == "ghcr.io/acme/train:1"
    assert c["command"] == ["python", "-m", "train", "--out", "/tmp/{{$.pipeline_task_uuid}}/0"]
    assert c["env"] == [{"name": "LR", "value": "0.1"}]
    r = c["resources"]
    assert (r["resourceCpuRequest"], r["resourceCpuLimit"]) == ("4", "4")
    assert (r["resourceMemoryRequest"], r["resourceMemoryLimit"]) == ("2048Mi", "2048Mi")
    assert (r["accelerator"]["resourceType"], r["accelerator"]["resourceCount"]) == ("nvidia.com/gpu", "2")
    e = executors["exec-evaluate-worker"]["container"]
    assert "env" not in e and "accelerator" not in e["resources"]
    assert e["resources"]["resourceMemoryLimit"] == "512Mi"
    tasks = ir["root"]["dag"]["tasks"]
    assert tasks["trainer-worker"]["retryPolicy"]["maxRetryCount"] == 3
    assert "retryPolicy" not in tasks["evaluate-worker"]
    assert tasks["evaluate-worker"]["dependentTasks"] == ["trainer-worker"]
    assert not tasks["trainer-worker"]["cachingOptions"].get("enableCache", False)


def test_unset_resources_are_left_to_the_cluster(tmp_path):
    app = AppDef(name="plain", roles=[Role(name="r", image="python:3.11", entrypoint="echo", args=["hi"])])

    @dsl.pipeline(name="plain")
    def pipeline():
        container_from_app(app)

    c = _compile(pipeline, tmp_path)["deploymentSpec"]["executors"]["exec-plain-r"]["container"]
    assert c["command"] == ["echo", "hi"] and "resources" not in c


@pytest.mark.parametrize("change, words", [
    (dict(num_replicas=2), "has 2 replicas"),
    (dict(resource=Resource(cpu=1, gpu=0, memMB=64, capabilities={"node.kubernetes.io/instance-type": "p4d"})),
     "no resource capabilities"),
    (dict(resource=Resource(cpu=1, gpu=0, memMB=64, devices={"vpc.amazonaws.com/efa": 1})), "take no devices"),
    (dict(mounts=[BindMount(src_path="/data", dst_path="/data")]), "1 mount(s)"),
])
def test_what_one_container_cannot_hold_is_one_line(change, words):
    with pytest.raises(KfpAdapterError) as e:
        component_from_app(_app(**change))
    assert words in str(e.value) and "run_app" in str(e.value) and "\n" not in str(e.value)


def test_two_roles_and_ui_metadata_are_refused_in_one_line():
    app = _app()
    two = AppDef(name="two", roles=[app.roles[0], Role(name="ps", image="x", entrypoint="y")])
    with pytest.raises(KfpAdapterError, match="has 2 roles"):
        component_spec_from_app(two)
    with pytest.raises(KfpAdapterError, match="ui_metadata is KFP v1") as e:
        component_from_app(app, ui_metadata={"outputs": []})
    assert "\n" not in str(e.value)


def test_resource_from_app_is_a_run_app_step_on_kubernetes(tmp_path):
    app = _app(num_replicas=3)

    @dsl.pipeline(name="volcano")
    def pipeline():
        resource_from_app(app, queue="research", service_account="trainer", base_image="ghcr.io/acme/tx:1")

    ir = _compile(pipeline, tmp_path)
    (task,) = ir["root"]["dag"]["tasks"].values()
    params = task["inputs"]["parameters"]
    assert params["scheduler"]["runtimeValue"]["constant"] == "kubernetes"
    assert yaml.safe_load(params["cfg"]["runtimeValue"]["constant"]) == {"queue": "research",
                                                                        "service_account": "trainer"}
    assert yaml.safe_load(params["app"]["runtimeValue"]["constant"])["roles"][0]["num_replicas"] == 3
    (executor,) = ir["deploymentSpec"]["executors"].values()
    assert executor["container"]["image"] == "ghcr.io/acme/tx:1"
    assert "pip install" not in " ".join(executor["container"]["command"])  # the image has kfp and tx


def test_run_app_refuses_a_missing_scheduler_and_cfg_that_is_not_json():
    with pytest.raises(ValueError, match="needs a scheduler name"):
        run_app(_app(), "")
    with pytest.raises(ValueError, match="JSON values"):
        run_app(_app(), "local_cwd", {"x": object()})


def test_torchx_paths_resolve_to_the_plugin():
    """``torchx.pipelines.kfp.adapter`` (tx-torchx-compat, installed in the kfp environment)
    is the plugin's adapter: the same objects under TorchX's path."""
    import tx_pipelines_kfp.adapter as adapter

    require_module("tx_torchx_compat", "tx-torchx-compat maps torchx.* paths: pip install -e plugins/compat-torchx")
    from torchx.pipelines.kfp import adapter as torchx_adapter

    assert torchx_adapter.component_from_app is adapter.component_from_app
    assert torchx_adapter.container_from_app is adapter.container_from_app
    assert torchx_adapter.component_spec_from_app is adapter.component_spec_from_app
    assert torchx_adapter.resource_from_app is adapter.resource_from_app
