"""The request aws_batch builds (offline: no AWS call), the wrapper command run by a real
shell, the named resources, and the plugin's registrations."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any, Dict

import pytest

from tx.plugins import PluginRegistry, pip_install
from tx.specs import (
    AppDef, AppState, Attempt, BindMount, DeviceMount, FailureKind, InvalidRunConfigException, Resource, Role, VolumeMount,
)
from tx_scheduler_aws_batch import resources
from tx_scheduler_aws_batch.request import MAX_NODE_RANGES, REPLICA_ID_TOKEN, parse_app_id, unwrap_command
from tx_scheduler_aws_batch.scheduler import batch_attempts, create_scheduler


def role(name: str = "r", n: int = 1, **kw: Any) -> Role:
    kw.setdefault("resource", Resource(cpu=1, gpu=0, memMB=128))
    return Role(name, image="img", entrypoint="sh", num_replicas=n, **kw)


def dryrun(app: AppDef, **cfg: Any) -> Any:
    return create_scheduler("tx").submit_dryrun(app, {"queue": "q", **cfg}).request


def test_run_opts_have_torchx_names() -> None:
    names = [k for k, _ in create_scheduler("tx").run_opts()]
    for key in ("queue", "user", "privileged", "share_id", "priority", "job_role_arn", "execution_role_arn", "image_repo"):
        assert key in names
    with pytest.raises(InvalidRunConfigException):
        create_scheduler("tx").submit_dryrun(AppDef("a", roles=[role()]), {})


def test_at_most_five_roles() -> None:
    app = AppDef("many", roles=[role(f"r{i}") for i in range(MAX_NODE_RANGES + 1)])
    with pytest.raises(ValueError, match="at most 5 node ranges"):
        dryrun(app)


def test_memory_is_required() -> None:
    with pytest.raises(ValueError, match="AWS Batch needs a memory size"):
        dryrun(AppDef("a", roles=[role(resource=Resource(cpu=1, gpu=0, memMB=0))]))
    with pytest.raises(ValueError, match="has no resource"):
        dryrun(AppDef("a", roles=[Role("r", image="i", entrypoint="sh")]))


def test_mounts_devices_roles_and_privileged() -> None:
    r = role(mounts=[BindMount("/data", "/mnt/data", read_only=True), VolumeMount("fs-123", "/efs"),
                     DeviceMount("/dev/fuse", "/dev/fuse", "rw")],
             resource=resources.aws_p4d_24xlarge())
    req = dryrun(AppDef("a", roles=[r]), privileged=True, job_role_arn="arn:job", execution_role_arn="arn:exec")
    c = req.job_def["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert c["volumes"] == [{"name": "mount_0", "host": {"sourcePath": "/data"}},
                            {"name": "mount_1", "efsVolumeConfiguration": {"fileSystemId": "fs-123"}}]
    assert c["mountPoints"] == [{"containerPath": "/mnt/data", "readOnly": True, "sourceVolume": "mount_0"},
                                {"containerPath": "/efs", "readOnly": False, "sourceVolume": "mount_1"}]
    devs = c["linuxParameters"]["devices"]
    assert [d["hostPath"] for d in devs] == [f"/dev/infiniband/uverbs{i}" for i in range(4)] + ["/dev/fuse"]
    assert devs[-1]["permissions"] == ["READ", "WRITE"]
    assert c["privileged"] is True and c["jobRoleArn"] == "arn:job" and c["executionRoleArn"] == "arn:exec"
    assert c["instanceType"] == "p4d.24xlarge"
    assert {"type": "GPU", "value": "8"} in c["resourceRequirements"]


def test_retry_strategy_without_retries_exits_on_program_failures() -> None:
    req = dryrun(AppDef("a", roles=[role()]))
    assert req.job_def["retryStrategy"] == {
        "attempts": 4,  # 1 + infra_retries (default 3) spares for host failures
        "evaluateOnExit": [{"onStatusReason": "Host EC2*", "action": "RETRY"}, {"onReason": "*", "action": "EXIT"}],
    }
    assert dryrun(AppDef("a", roles=[role(max_retries=20)])).job_def["retryStrategy"]["attempts"] == 10


def test_infra_retries_are_the_spare_attempts_for_host_failures() -> None:
    assert dryrun(AppDef("a", roles=[role(max_retries=1)]), infra_retries=0).job_def["retryStrategy"]["attempts"] == 2
    assert dryrun(AppDef("a", roles=[role()]), infra_retries=5).job_def["retryStrategy"]["attempts"] == 6
    with pytest.raises(InvalidRunConfigException, match="infra_retries must be an integer >= 0"):
        dryrun(AppDef("a", roles=[role()]), infra_retries=-1)


def test_attempts_tell_spot_reclaims_from_program_failures() -> None:
    """describe_jobs' attempts (AttemptDetail): a ``Host EC2`` status reason is the
    infrastructure's; an exit code the user's."""
    reclaimed = {"statusReason": "Host EC2 (instance i-0abc) terminated.", "container": {}}
    crashed = {"statusReason": "Essential container in task exited", "container": {"exitCode": 3}}
    done = {"statusReason": "Essential container in task exited", "container": {"exitCode": 0}}
    assert batch_attempts([reclaimed, crashed, done], AppState.SUCCEEDED) == [
        Attempt(0, AppState.FAILED, FailureKind.INFRA, "Host EC2 (instance i-0abc) terminated.", retried=True),
        Attempt(1, AppState.FAILED, FailureKind.USER, "exit code 3", retried=True),
        Attempt(2, AppState.SUCCEEDED, None, "Essential container in task exited"),
    ]
    assert batch_attempts([reclaimed], AppState.RUNNING) == [
        Attempt(0, AppState.FAILED, FailureKind.INFRA, "Host EC2 (instance i-0abc) terminated.", retried=True),
        Attempt(1, AppState.RUNNING),
    ]
    assert batch_attempts([reclaimed], AppState.FAILED)[-1] == Attempt(
        0, AppState.FAILED, FailureKind.INFRA, "Host EC2 (instance i-0abc) terminated.")
    assert batch_attempts([], AppState.PENDING) == [Attempt(0, AppState.PENDING)]


def test_app_ids() -> None:
    assert parse_app_id("q:name-1") == ("q", "name-1")
    arn = "arn:aws:batch:us-east-1:123456789012:job-queue/q"
    assert parse_app_id(f"{arn}:name-1") == (arn, "name-1")
    assert parse_app_id("no-colon") is None and parse_app_id("q:bad name") is None


def _run_node(command: list, env: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, timeout=30)


def test_wrapper_computes_the_replica_environment_in_a_real_shell() -> None:
    script = 'printf "%s|" "$TX_REPLICA_ID" "$TORCHX_REPLICA_IDX" "$TX_RANK0_HOST" "$TORCHX_RANK0_HOST" "$TAG" "$1" "$2"'
    app = AppDef("a", roles=[
        role("first", 2, args=["-c", "true"]),
        role("second", 3, args=["-c", script, "x", "k=${replica_id};${replica_id}", "it's\n"], env={"TAG": "t${replica_id}"}),
    ])
    req = dryrun(app)
    c = req.job_def["nodeProperties"]["nodeRangeProperties"][1]["container"]
    env = {e["name"]: e["value"] for e in c["environment"]}
    assert REPLICA_ID_TOKEN in env["TAG"]
    # node 4 of 5 = replica 2 of the second role (which starts at node 2)
    p = _run_node(c["command"], {**env, "AWS_BATCH_JOB_NODE_INDEX": "4", "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "10.0.0.7"})
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout == "2|2|10.0.0.7|10.0.0.7|t2|k=2;2|it's\n|"
    # the main node has no main-node address; without a node index (moto) a warning says so
    p = _run_node(c["command"], env)
    assert p.stdout == "0|0|localhost|localhost|t0|k=0;0|it's\n|"
    assert "AWS_BATCH_JOB_NODE_INDEX is not set" in p.stderr
    assert unwrap_command(c["command"]) == ("sh", ["-c", script, "x", "k=${replica_id};${replica_id}", "it's\n"])


def test_wrapper_passes_the_exit_code() -> None:
    c = dryrun(AppDef("a", roles=[role(args=["-c", "exit 7"])])).job_def["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert _run_node(c["command"], {}).returncode == 7


def test_named_resources_through_the_registry(tx_registry: PluginRegistry) -> None:
    from tx.specs import named_resources
    from tx.testing import register_plugin
    from tx_scheduler_aws_batch import hooks

    with register_plugin(hooks, name="aws_batch"):
        r = named_resources["aws_p4d.24xlarge"]
        assert (r.cpu, r.gpu, r.memMB) == (96, 8, 1152 * int(1024 * 0.96))
        assert r.capabilities == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
        assert r.devices == {"vpc.amazonaws.com/efa": 4}
        assert named_resources["aws_trn1.32xlarge"].devices == {"aws.amazon.com/neurondevice": 16, "vpc.amazonaws.com/efa": 8}
        assert named_resources["aws_t3.medium"].memMB == 4 * 983
        assert len([n for n in named_resources.keys() if n.startswith("aws_")]) == len(resources.INSTANCES) == 26
        assert "aws_batch" in tx_registry.names("schedulers")


def test_hooks_do_not_import_boto3() -> None:
    code = ("import sys, tx_scheduler_aws_batch.hooks, tx_scheduler_aws_batch.resources; "
            "print('boto3' in sys.modules, 'botocore' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["False", "False"], p.stderr


def test_workspace_needs_the_docker_kind(tx_registry: PluginRegistry, tmp_path: Any) -> None:
    """``--workspace`` goes through the ``docker`` workspace kind of the registry; where no
    plugin provides it, one line says what to install."""
    from tx.workspace import WorkspaceError

    sched = create_scheduler("tx")
    assert sched.workspace_kind == "docker"
    with pytest.raises(WorkspaceError, match=re.escape("workspace kind 'docker' is not installed: " + pip_install("tx-scheduler-docker"))):
        sched.submit(AppDef("a", roles=[role()]), {"queue": "q"}, workspace=str(tmp_path))


def test_app_id_macro_is_the_whole_app_id() -> None:
    req = dryrun(AppDef("a", roles=[role(args=["-c", "echo ${app_id}"], env={"OUT": "s3://b/${app_id}"})]))
    c = req.job_def["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert c["command"][-1] == f"echo {req.app_id}"
    assert {"name": "OUT", "value": f"s3://b/{req.app_id}"} in c["environment"]


def test_workspace_kind_is_told_that_nodes_pull_from_a_registry(tx_registry: PluginRegistry, tmp_path: Any) -> None:
    """The ``docker`` kind gets ``image_repo_required=True`` (Batch instances pull images from
    a registry), with the user's ``image_repo``; only the first role is patched."""
    from tx.testing import recording_workspace

    sched = create_scheduler("tx")
    with recording_workspace("docker") as calls:
        built = sched.build_workspace(role(), str(tmp_path), {"queue": "q", "image_repo": "1.dkr.ecr/x"})
    assert built is not None and built.image == "1.dkr.ecr/x:ws"
    ws, cfg = calls[-1]
    assert ws == str(tmp_path) and cfg["image_repo_required"] is True and cfg["image_repo"] == "1.dkr.ecr/x"
