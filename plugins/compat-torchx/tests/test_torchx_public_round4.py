"""TorchX 0.7.0 public names of the scheduler modules and ``torchx.util.types`` that TorchX's
own scheduler tests import: each returns what tx's scheduler builds (the same function), in
the shape TorchX's callers read."""
import datetime
import inspect
from typing import Dict, List, Optional

import pytest
from torchx.specs import AppDef, AppState, BindMount, Resource, Role, VolumeMount


def _role(**kw: object) -> Role:
    base = dict(name="trainer", image="img", entrypoint="python", args=["-c", "print(1)"], num_replicas=2,
                resource=Resource(cpu=2, gpu=1, memMB=2048), port_map={"foo": 1234})
    base.update(kw)
    return Role(**base)  # type: ignore[arg-type]


def test_util_types_decode_from_string_and_primitives() -> None:
    from torchx.util.types import decode_from_string, get_argparse_param_type, is_primitive

    assert decode_from_string("a=1,b=2", Dict[str, int]) == {"a": 1, "b": 2}
    assert decode_from_string("1,2", List[int]) == [1, 2]
    assert decode_from_string("", List[int]) is None
    with pytest.raises(ValueError):
        decode_from_string("1", int)
    assert [is_primitive(t) for t in (int, str, float, bool, List[str])] == [True, True, True, False, False]

    def fn(x: int, y: List[str], z: Optional[float] = None) -> None: ...

    params = inspect.signature(fn).parameters.values()
    assert [get_argparse_param_type(p) for p in params] == [int, str, str]


def test_kubernetes_role_to_pod_is_the_jobs_pod_template() -> None:
    from torchx.schedulers.kubernetes_scheduler import app_to_resource, role_to_pod

    role = _role(mounts=[BindMount("/src", "/dst", read_only=True)])
    pod = role_to_pod("trainer-0", role, service_account="sa")
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "sa" and spec["restartPolicy"] == "Never"
    (c,) = spec["containers"]
    assert c["name"] == "trainer-0" and c["command"] == ["python", "-c", "print(1)"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert {"name": "foo", "containerPort": 1234} in c["ports"]
    assert any(v.get("hostPath", {}).get("path") == "/src" for v in spec["volumes"])
    # the same template tx submits in the Volcano job
    job = app_to_resource(AppDef("trainer-0", roles=[role]), queue="default", service_account="sa")
    assert job["spec"]["tasks"][0]["template"]["spec"]["volumes"] == spec["volumes"]


def test_mcad_helpers_are_pieces_of_the_appwrapper(recwarn: pytest.WarningsRecorder) -> None:
    from torchx.schedulers import kubernetes_mcad_scheduler as m

    role = _role()
    app = AppDef("test", roles=[role])
    pod = m.role_to_pod("p0", "appid", "ns", role, "sa", "secret", "cosched", None, "net")
    assert pod["metadata"]["name"] == "p0" and pod["metadata"]["namespace"] == "ns"
    assert pod["spec"]["schedulerName"] == "cosched"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "secret"}]
    assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "net"

    pg = m.create_pod_group(app, role, 0, "ns", "appid")
    assert pg["replicas"] == 1
    assert pg["generictemplate"]["kind"] == "PodGroup"
    assert pg["generictemplate"]["metadata"]["name"] == "appid-pg0"
    assert pg["generictemplate"]["spec"]["minMember"] == 2

    svc = m.mcad_svc(app, "appid", "ns", "1111")
    assert svc["kind"] == "Service" and svc["spec"]["clusterIP"] == "None"
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(1111, 1111)]

    assert m.cleanup_str("-1aBc_d-E") == "abcd-e"
    app_id = m.get_unique_truncated_appid(AppDef("x" * 80, roles=[role]))
    assert len(app_id) + len("-pg0") <= 63 and app_id.startswith("xxx")
    assert m.get_port_for_service(app) == "1234"
    assert m.get_port_for_service(AppDef("a", roles=[_role(port_map={"bad": 70000})])) == "29500"
    assert any("70000" in str(w.message) for w in recwarn)

    items = m.app_to_resource(app, "ns", None, None, None, None, None)["spec"]["resources"]["GenericItems"]
    roles = m.get_role_information(items)
    assert list(roles) == ["trainer"]
    assert roles["trainer"].num_replicas == 2 and roles["trainer"].resource.gpu == 1

    assert m.get_appwrapper_status({}) == AppState.PENDING
    assert m.get_appwrapper_status({"status": {"state": "Failed"}}) == AppState.FAILED
    assert m.get_tasks_status_description({"running": 1, "Succeeded": 2, "other": 3}) == {"running": 1, "Succeeded": 2}
    assert isinstance(m.KubernetesMCADJob(resource={"metadata": {"name": "n"}}, namespace="ns"), m.KubernetesMCADJob)


def test_aws_batch_resource_requirements_round_trip() -> None:
    from torchx.schedulers import aws_batch_scheduler as a

    reqs = a.resource_requirements_from_resource(Resource(cpu=0, gpu=2, memMB=100))
    assert reqs == [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "100"},
                    {"type": "GPU", "value": "2"}]
    res = a.resource_from_resource_requirements(reqs)
    assert (res.cpu, res.gpu, res.memMB) == (1, 2, 100)
    with pytest.raises(ValueError, match="memMB"):
        a.resource_requirements_from_resource(Resource(cpu=1, gpu=0, memMB=0))
    ts = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    assert a.to_millis_since_epoch(ts) == 1577836800000
    assert a.to_datetime(1577836800000).timestamp() == ts.timestamp()
    assert a.ENV_TORCHX_ROLE_NAME == "TORCHX_ROLE_NAME"
    assert "job_role_arn" in a.AWSBatchOpts.__annotations__


def test_slurm_replica_request_from_role_and_batch_request() -> None:
    from torchx.schedulers.slurm_scheduler import SlurmBatchRequest, SlurmOpts, SlurmReplicaRequest

    rq = SlurmReplicaRequest.from_role("trainer-0", _role(), {"partition": "p"}, nomem=True)
    assert rq.name == "trainer-0" and rq.entrypoint == "python"
    sbatch, srun = rq.materialize()
    assert sbatch[0].startswith("--job-name=") and "--partition=p" in sbatch
    assert "--cpus-per-task=2" in sbatch and not any(s.startswith("--mem") for s in sbatch)
    assert srun[-3:] == ["python", "-c", "'print(1)'"]
    script = SlurmBatchRequest(cmd=["sbatch", "--parsable"], replicas={"trainer-0": rq}, job_dir=None,
                               max_retries=0).materialize()
    assert script.startswith("#!/bin/bash") and "--partition=p" in script
    assert "mail-user" in SlurmOpts.__annotations__


def test_ray_common_actor_and_has_ray() -> None:
    from torchx.schedulers.ray.ray_common import TORCHX_RANK0_HOST, RayActor
    from torchx.schedulers.ray_scheduler import has_ray
    from tx.schedulers import env

    actor = RayActor("trainer", ["python", "x.py"], num_gpus=1)
    assert (actor.env, actor.num_cpus, actor.num_gpus, actor.min_replicas) == ({}, 1, 1, None)
    assert env.torchx_name(env.RANK0_HOST) == TORCHX_RANK0_HOST
    assert isinstance(has_ray(), bool)


def test_kubernetes_validate_takes_torchx_signature() -> None:
    from torchx.schedulers import kubernetes_mcad_scheduler, kubernetes_scheduler

    for mod in (kubernetes_scheduler, kubernetes_mcad_scheduler):
        sched = mod.create_scheduler("test")
        sched._validate(AppDef("a", roles=[_role()]), "kubernetes")  # TorchX 0.7.0's call
        with pytest.raises(ValueError, match="no roles"):
            sched._validate(AppDef("a", roles=[]), "kubernetes", {})


def test_get_role_information_of_a_torchx_made_appwrapper_takes_the_fields_as_they_are() -> None:
    """Pods TorchX 0.7.0 put into an AppWrapper (its role label) come back as TorchX's
    function gives them: the container's fields as they are, read up to the first missing
    one; a pod without a role label is skipped."""
    from torchx.schedulers import kubernetes_mcad_scheduler as m

    def pod(container):
        return {"generictemplate": {"metadata": {"labels": {"torchx.pytorch.org/role-name": "w"}},
                                    "spec": {"containers": [container]}}}

    full = {"image": "img", "command": ["python", "t.py"], "env": [{"name": "A", "value": "1"}],
            "resources": {"requests": {"cpu": 2, "nvidia.com/gpu": 1, "memory": 100}},
            "ports": [{"name": "c10d", "containerPort": 29500}], "volumeMounts": [{"name": "v", "mountPath": "/v"}]}
    roles = m.get_role_information([pod(full), pod(full), {"generictemplate": {"metadata": {"labels": {}}}}])
    w = roles["w"]
    # Kubernetes' lists in the shapes tx's Role takes (a migration-guide row)
    assert (w.image, w.args, w.env, w.num_replicas) == ("img", ["python", "t.py"], {"A": "1"}, 2)
    assert (w.resource.cpu, w.resource.gpu, w.resource.memMB) == (2, 1, 100)
    assert w.port_map == {"c10d": 29500} and w.mounts == [VolumeMount(src="v", dst_path="/v", read_only=False)]
    # no command: TorchX stops reading there (no args, no env, no resource)
    short = m.get_role_information([pod({"image": "img", "env": {"A": "1"}})])["w"]
    assert (short.image, short.args, short.env, short.resource.cpu) == ("img", [], {}, -1)
