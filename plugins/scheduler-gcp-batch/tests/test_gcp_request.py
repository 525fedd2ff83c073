"""AppDef -> Batch Job, offline: the request round-trips through the library's ``Job``
message, the roles come back from it, and what Batch cannot run is a one-line error."""
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
from google.cloud import batch_v1

from tx.plugins import pip_install
from tx.schedulers import env as envc
from tx.specs import AppDef, InvalidRunConfigException, Resource, Role, VolumeMount, macros
from tx.testing import recording_workspace, tx_registry  # noqa: F401 - fixture
from tx.workspace import WorkspaceError
from tx_scheduler_gcp_batch.request import _JOB_ID_MAX, make_job_id, parse_role_script, role_script, roles_of, task_layout
from tx_scheduler_gcp_batch.scheduler import GcpBatchScheduler, create_scheduler

JOB_ID_RE = r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$"


@pytest.fixture
def sched(monkeypatch: pytest.MonkeyPatch) -> GcpBatchScheduler:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "offline-project")
    monkeypatch.delenv("CLOUDSDK_BATCH_LOCATION", raising=False)
    return create_scheduler("tx")


def big_app() -> AppDef:
    """Multi-role, multi-replica, GPU: what the round-trip tests submit."""
    return AppDef("Big_Train.v2", roles=[
        Role("trainer", image="gcr.io/p/trainer:1", entrypoint="torchrun",
             args=["--nnodes", "3", "--node_rank", macros.replica_id, "--rdzv_endpoint", f"${{{macros.rank0_env}}}:29500",
                   "train.py", "--name", "it's a \"test\" $HOME"],
             env={"LR": "0.1", "SHARD": f"shard-{macros.replica_id}"}, num_replicas=3, max_retries=2,
             resource=Resource(cpu=8, gpu=4, memMB=32768)),
        Role("reader", image="gcr.io/p/reader:2", entrypoint="python", args=["-m", "reader", macros.app_id],
             num_replicas=2, resource=Resource(cpu=2, gpu=0, memMB=4096)),
    ])


SPOT_CFG: Dict[str, Any] = {
    "provisioning_model": "SPOT", "location": "europe-west4", "service_account": "sa@p.iam.gserviceaccount.com",
    "network": "projects/p/global/networks/n", "subnetwork": "projects/p/regions/europe-west4/subnetworks/s",
}


def test_job_round_trips_through_the_proto_without_loss(sched: GcpBatchScheduler) -> None:
    info = sched.submit_dryrun(big_app(), SPOT_CFG)
    job = info.request.job
    assert isinstance(job, batch_v1.Job)
    wire = batch_v1.Job.serialize(job)
    assert batch_v1.Job.deserialize(wire) == job
    text = batch_v1.Job.to_json(job)
    assert batch_v1.Job.from_json(text, ignore_unknown_fields=False) == job
    # nothing was dropped on the way: the binary form holds no unknown fields
    assert batch_v1.Job.pb(batch_v1.Job.deserialize(wire)).ByteSize() == len(wire)


@pytest.mark.parametrize("cfg", [SPOT_CFG, {"machine_type": "g2-standard-48", "infra_retries": 0}, {}])
def test_the_job_message_is_the_one_proto_plus_makes(sched: GcpBatchScheduler, cfg: Dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """job_message builds the Job with the protobuf runtime (3 times as fast as proto-plus's
    marshal, one a sweep's trial): byte for byte (maps in key order) the message proto-plus makes of the same
    fields, for apps of one and several roles, GPUs, Spot, user options and retries."""
    from tx_scheduler_gcp_batch import _client, request

    fields: list = []
    monkeypatch.setattr(request, "make_job_id", lambda name: "fixed-id")
    apps = [big_app(), AppDef("one", [Role("w", image="busybox", entrypoint="sh", args=["-c", "echo $HOME"],
                                           env={"A": "1"}, max_retries=3)])]
    for app in apps:
        job = request.build_job(app, sched.run_opts().resolve(cfg), "p", "l", "1.0",
                                lambda f: fields.append(f) or _client.job_message(f))
        assert type(job.job) is batch_v1.Job
        batch_v1.Job.pb()(**fields[-1])  # the runtime takes these fields: job_message did not fall back
        made, marshalled = batch_v1.Job.pb(job.job), batch_v1.Job.pb(batch_v1.Job(fields[-1]))
        assert made.SerializeToString(deterministic=True) == marshalled.SerializeToString(deterministic=True)
    assert len(fields) == 2


def test_roles_come_back_from_the_job(sched: GcpBatchScheduler) -> None:
    app = big_app()
    job = sched.submit_dryrun(app, SPOT_CFG).request.job
    job_id = sched.submit_dryrun(app, SPOT_CFG).request.job_id
    back = {r.name: r for r in roles_of(batch_v1.Job.deserialize(batch_v1.Job.serialize(job)))}
    assert list(back) == ["trainer", "reader"]
    for role in app.roles:
        got = back[role.name]
        assert (got.image, got.entrypoint, got.num_replicas, got.max_retries) == (
            role.image, role.entrypoint, role.num_replicas, role.max_retries)
        assert (got.resource.cpu, got.resource.gpu, got.resource.memMB) == (
            role.resource.cpu, role.resource.gpu, role.resource.memMB)
    # ${replica_id} comes back as the macro; ${rank0_env} resolves to the contract variable
    assert back["trainer"].args[3] == macros.replica_id
    assert back["trainer"].args[5] == "${TX_RANK0_HOST}:29500"
    assert back["trainer"].args[-1] == "it's a \"test\" $HOME"
    assert back["trainer"].env == {"LR": "0.1", "SHARD": "shard-0"}
    assert back["reader"].args[-1].startswith("offline-project:europe-west4:big-train-v2-")  # ${app_id}
    assert job_id.startswith("big-train-v2-")


def test_one_task_group_holds_every_replica(sched: GcpBatchScheduler) -> None:
    info = sched.submit_dryrun(big_app(), SPOT_CFG)
    job = info.request.job
    (group,) = job.task_groups  # Batch runs one task group per job
    assert group.task_count_per_node == 1 and group.require_hosts_file and group.permissive_ssh
    layout = [(t.role, t.replica_id) for t in task_layout(job)]
    assert layout == [("trainer", 0), ("trainer", 1), ("trainer", 2), ("reader", 0), ("reader", 1)]
    for i, env in enumerate(group.task_environments):
        v = env.variables
        role, k = layout[i]
        assert v[envc.ROLE_NAME] == v["TORCHX_ROLE_NAME"] == role
        assert v[envc.REPLICA_ID] == v["TORCHX_REPLICA_IDX"] == str(k)
        assert v[envc.APP_ID] == v["TORCHX_APP_ID"] == info.request.app_id
        assert v[envc.NUM_REPLICAS] == ("3" if role == "trainer" else "2")
        if role == "trainer":
            assert v["SHARD"] == f"shard-{k}"
    spec = group.task_spec
    assert [r.display_name for r in spec.runnables] == ["trainer", "reader"]
    assert spec.compute_resource.cpu_milli == 8000 and spec.compute_resource.memory_mib == 32768
    assert job.labels["tx_app_name"] == "big_train-v2"
    assert job.labels["tx_version"] and "." not in job.labels["tx_version"]
    assert job.logs_policy.destination == batch_v1.LogsPolicy.Destination.CLOUD_LOGGING


def test_gpu_spot_allocation_and_user_options(sched: GcpBatchScheduler) -> None:
    req = sched.submit_dryrun(big_app(), SPOT_CFG).request
    assert (req.project, req.location, req.parent) == ("offline-project", "europe-west4",
                                                       "projects/offline-project/locations/europe-west4")
    assert req.app_id == f"offline-project:europe-west4:{req.job_id}"
    alloc = req.job.allocation_policy
    (inst,) = alloc.instances
    assert inst.install_gpu_drivers
    assert inst.policy.machine_type == "a2-highgpu-4g"
    assert inst.policy.provisioning_model == batch_v1.AllocationPolicy.ProvisioningModel.SPOT
    assert alloc.service_account.email == SPOT_CFG["service_account"]
    (nic,) = alloc.network.network_interfaces
    assert (nic.network, nic.subnetwork) == (SPOT_CFG["network"], SPOT_CFG["subnetwork"])
    override = sched.submit_dryrun(big_app(), {**SPOT_CFG, "machine_type": "g2-standard-48"}).request
    assert override.job.allocation_policy.instances[0].policy.machine_type == "g2-standard-48"


@pytest.mark.parametrize("model,user,spot,count,policy", [
    ("STANDARD", 0, 3, 3, True),  # a VM rebooted, recreated or silent: on any VM
    ("STANDARD", 2, 3, 5, False),
    ("SPOT", 0, 3, 3, True),    # only a VM lost (exit 50001-50003, 50006) is retried
    ("SPOT", 2, 3, 5, False),   # a VM lost does not spend the user's 2 retries
    ("SPOT", 9, 3, 10, False),  # Batch's maximum
    ("SPOT", 0, 0, 0, False),
])
def test_retries_and_vms_lost(sched: GcpBatchScheduler, model: str, user: int, spot: int, count: int,
                              policy: bool) -> None:
    app = AppDef("r", roles=[Role("w", image="i", entrypoint="true", max_retries=user)])
    job = sched.submit_dryrun(app, {"provisioning_model": model, "spot_retries": spot}).request.job
    assert batch_v1.Job.from_json(batch_v1.Job.to_json(job), ignore_unknown_fields=False) == job  # the API's schema
    spec = job.task_groups[0].task_spec
    assert spec.max_retry_count == count
    if policy:
        (lp,) = spec.lifecycle_policies
        assert lp.action == batch_v1.LifecyclePolicy.Action.RETRY_TASK
        # Batch's reserved codes for a VM lost; not 50004/50005 (the task hung or ran too long)
        assert list(lp.action_condition.exit_codes) == [50001, 50002, 50003, 50006]
    else:
        assert not spec.lifecycle_policies
    back = roles_of(sched.submit_dryrun(app, {"provisioning_model": model, "spot_retries": spot}).request.job)
    assert back[0].max_retries == user
    # infra_retries, the same option on every backend, is spot_retries' new name
    spec = sched.submit_dryrun(app, {"provisioning_model": model, "infra_retries": spot}).request.job.task_groups[0].task_spec
    assert spec.max_retry_count == count


def test_unsupported_apps_are_one_line_errors(sched: GcpBatchScheduler) -> None:
    def role(**kw: Any) -> AppDef:
        return AppDef("x", roles=[Role("w", image="i", entrypoint="true", **kw)])

    with pytest.raises(ValueError, match=r"3 GPUs .* 1, 2, 4, 8, 16: .* machine_type") as e:
        sched.submit_dryrun(role(resource=Resource(cpu=1, gpu=3, memMB=1024)), {})
    assert "\n" not in str(e.value)
    sched.submit_dryrun(role(resource=Resource(cpu=1, gpu=3, memMB=1024)), {"machine_type": "custom-gpu"})
    with pytest.raises(ValueError, match="max_retries must be between 0 and 10"):
        sched.submit_dryrun(role(max_retries=11), {})
    with pytest.raises(ValueError, match="mounts"):
        sched.submit_dryrun(role(mounts=[VolumeMount(src="v", dst_path="/d")]), {})
    with pytest.raises(InvalidRunConfigException, match="STANDARD or SPOT"):
        sched.submit_dryrun(role(), {"provisioning_model": "CHEAP"})
    with pytest.raises(InvalidRunConfigException, match="spot_retries"):
        sched.submit_dryrun(role(), {"spot_retries": -1})
    with pytest.raises(InvalidRunConfigException, match="infra_retries must be an integer >= 0"):
        sched.submit_dryrun(role(), {"infra_retries": -1})


@pytest.mark.parametrize("name", ["Big_Train.v2", "9lives", "---", "a" * 100, "ÄÖÜ trainer"])
def test_job_ids_are_valid_batch_ids(name: str) -> None:
    import re

    job_id = make_job_id(name)
    assert re.match(JOB_ID_RE, job_id), job_id
    assert len(job_id) <= _JOB_ID_MAX
    assert make_job_id(name) != job_id


def test_role_script_runs_the_exact_argv(tmp_path: Path) -> None:
    """The runnable's shell script execs the role's argv unchanged (quotes, spaces, ``$``,
    newlines), with ``${replica_id}`` from TX_REPLICA_ID and TX_RANK0_HOST exported."""
    args = ["%s|", "a b", "it's", "$HOME", "${replica_id}x", "line\nbreak", "", "*"]
    role = Role("w", image="i", entrypoint="printf", args=args)
    script = role_script(role, 0, False, "app-1")
    hosts = tmp_path / "hosts"
    hosts.write_text("node-a\nnode-b\n")
    env = {"PATH": os.environ["PATH"], "TX_REPLICA_ID": "5", "BATCH_HOSTS_FILE": str(hosts)}
    out = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert out == "a b|it's|$HOME|5x|line\nbreak||*|"
    assert parse_role_script(script) == ("printf", args)
    rank0 = role_script(Role("w", image="i", entrypoint="sh", args=["-c", 'echo "$TX_RANK0_HOST $TORCHX_RANK0_HOST"']),
                        0, True, "app-1")
    got = subprocess.run(["/bin/sh", "-c", rank0], env={**env, "TX_ROLE_IDX": "0"}, capture_output=True, text=True)
    assert got.stdout == "node-a node-a\n"  # no BATCH_MAIN_NODE_HOSTNAME: the hosts file's first VM
    got = subprocess.run(["/bin/sh", "-c", rank0], env={**env, "TX_ROLE_IDX": "0", "BATCH_MAIN_NODE_HOSTNAME": "main"},
                         capture_output=True, text=True)
    assert got.stdout == "main main\n"
    other = subprocess.run(["/bin/sh", "-c", rank0], env={**env, "TX_ROLE_IDX": "1"}, capture_output=True, text=True)
    assert (other.returncode, other.stdout) == (0, "")  # a task of another role skips this runnable


def test_hooks_import_no_google_sdk() -> None:
    code = (
        "import sys, tx_scheduler_gcp_batch.hooks, tx_scheduler_gcp_batch;"
        "from tx.plugins import get_registry;"
        "reg = get_registry().get('schedulers', 'gcp_batch');"
        "print(reg is not None, sorted(m for m in sys.modules if m.startswith('google.cloud') or m.startswith('google.auth')))"
    )
    env = {**os.environ, "TX_NO_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == "True []", out


def test_workspace_goes_through_the_docker_kind(tx_registry: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "offline-project")
    sched = create_scheduler("tx")
    assert GcpBatchScheduler.workspace_kind == "docker"
    role = Role("w", image="base:1", entrypoint="true")
    with pytest.raises(WorkspaceError, match=re.escape(pip_install("tx-scheduler-docker"))):
        sched.build_workspace(role, str(tmp_path), {})
    with recording_workspace("docker") as calls:
        built = sched.build_workspace(role, str(tmp_path), {"image_repo": "gcr.io/p/ws"})
    assert built is not None and built.image == "gcr.io/p/ws:ws" and role.image == "base:1"
    ws, cfg = calls[-1]
    assert ws == str(tmp_path) and cfg["image_repo_required"] is True  # Batch VMs pull from a registry
