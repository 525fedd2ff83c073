"""AppDefs that the dryrun tests of every Kubernetes scheduler validate against the
published schemas: one role, many roles, elastic, each retry policy, each kind of mount,
GPUs, devices, named resources (node selectors), ports and long names."""
from pathlib import Path
from typing import Any, Dict

from fakekube.schemas import KUBE_VERSION  # beside this file
from tx.specs import AppDef, BindMount, DeviceMount, Resource, RetryPolicy, Role, VolumeMount, macros

HERE = Path(__file__).resolve().parent
SCHEMAS = HERE / "data" / "schemas"

K8S_VERSION = KUBE_VERSION  # the version the fake API server validates against, too


def need(module: str) -> Any:
    """Import a schema validator the tests need, or skip (fail under
    TX_TEST_REQUIRE_BACKENDS=1) saying what to install."""
    import importlib

    from tx.testing.backends import backend_unavailable

    try:
        return importlib.import_module(module)
    except ImportError:
        backend_unavailable("schema validation", f"{module} is not installed: pip install jsonschema kubernetes-validate")


def role(name: str = "trainer", replicas: int = 2, **kw: Any) -> Role:
    kw.setdefault("resource", Resource(cpu=2, gpu=0, memMB=2048))
    return Role(name, image="ghcr.io/example/train:1", entrypoint="python",
                args=["-m", "train", "--rank", macros.replica_id, "--app", macros.app_id],
                num_replicas=replicas, env={"LR": "0.1", "ID": macros.app_id}, **kw)


def apps() -> Dict[str, AppDef]:
    p4d = Resource(cpu=96, gpu=8, memMB=1_100_000, capabilities={"node.kubernetes.io/instance-type": "p4d.24xlarge"},
                   devices={"vpc.amazonaws.com/efa": 4})
    return {
        "one_role": AppDef("one", roles=[role(replicas=1)]),
        "many_roles": AppDef("many", roles=[role(f"r{i}", replicas=i + 1) for i in range(5)]),
        "elastic": AppDef("elastic", roles=[role(replicas=4, min_replicas=2), role("ps", replicas=1)]),
        "retries_app": AppDef("retry", roles=[role(max_retries=3)]),
        "retries_replica": AppDef("retry", roles=[role(max_retries=2, retry_policy=RetryPolicy.REPLICA)]),
        "retries_mixed": AppDef("retry", roles=[role("a", max_retries=5), role("b", max_retries=1, retry_policy="ROLE")]),
        "bind_mount": AppDef("mnt", roles=[role(mounts=[BindMount("/data", "/mnt/data", read_only=True)])]),
        "volume_mount": AppDef("mnt", roles=[role(mounts=[VolumeMount("my-pvc", "/mnt/pvc")])]),
        "device_mount": AppDef("mnt", roles=[role(mounts=[DeviceMount("/dev/fuse", "/dev/fuse", "rw")])]),
        "all_mounts": AppDef("mnt", roles=[role(mounts=[BindMount("/a", "/a"), VolumeMount("v", "/v", True),
                                                      DeviceMount("/dev/infiniband", "/dev/infiniband")])]),
        "gpus": AppDef("gpu", roles=[role(resource=Resource(cpu=8, gpu=4, memMB=64_000))]),
        "named_resource": AppDef("p4d", roles=[role(resource=p4d)]),
        "no_resource": AppDef("nores", roles=[Role("x", image="busybox", entrypoint="echo", args=["hi"])]),
        "ports": AppDef("serve", roles=[role(port_map={"http": 8080, "Metrics_Port": 9090, "123": 7000})]),
        "long_app_name": AppDef("a" * 120 + "_Training.Run", roles=[role("worker", replicas=12)]),
        "long_role_name": AppDef("x", roles=[role("r" * 40, replicas=3)]),
        "odd_names": AppDef("My App!", roles=[role("Trainer_Main"), role("eval.step")]),
    }


def shared(directory: Any) -> list:
    """The mounts of a retry test's replicas that keep a marker file across attempts: a
    hostPath volume at the same path, as pods on one node of a real cluster share it (the
    fake kubelet gives pods nothing else in common on the host)."""
    return [BindMount(str(directory), str(directory))]

