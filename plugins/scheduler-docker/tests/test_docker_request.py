"""local_docker's request, built offline: no engine, no ``docker`` SDK imported."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tx.specs import AppDef, BindMount, DeviceMount, Resource, Role, VolumeMount
from tx_scheduler_docker.request import (
    LABEL_APP_ID, LABEL_MEM_MB, LABEL_REPLICA_ID, LABEL_ROLE_IDX, LABEL_SESSION, build_request, container_name,
)


def _role(name: str = "trainer", **kw: object) -> Role:
    return Role(name, image="busybox", entrypoint="sh", args=["-c", "echo ${replica_id} ${app_id}"], **kw)  # type: ignore[arg-type]


def test_one_container_per_replica_named_labelled_and_on_the_app_network() -> None:
    app = AppDef("My App!", roles=[_role(num_replicas=2), _role("ps")])
    job = build_request(app, {}, "sess")
    assert job.app_id.startswith("my-app-") and job.network == f"tx-{job.app_id}"
    names = [c.kwargs["name"] for c in job.containers]
    assert names == [f"{job.app_id}-trainer-0", f"{job.app_id}-trainer-1", f"{job.app_id}-ps-0"]
    second = job.containers[1]
    assert second.image == "busybox"
    assert second.command == ["sh", "-c", f"echo 1 {job.app_id}"]  # macros substituted per replica
    assert second.kwargs["network"] == job.network and second.kwargs["hostname"] == names[1]
    labels = second.kwargs["labels"]
    assert (labels[LABEL_APP_ID], labels[LABEL_SESSION], labels[LABEL_ROLE_IDX], labels[LABEL_REPLICA_ID]) == (
        job.app_id, "sess", "0", "1")
    env = job.containers[2].kwargs["environment"]
    assert env["TX_RANK0_HOST"] == names[0] and env["TX_ROLE_NAME"] == "ps" and env["TX_REPLICA_ID"] == "0"
    assert "restart_policy" not in second.kwargs and "mem_limit" not in second.kwargs


def test_resources_mounts_devices_ports_and_retries() -> None:
    role = _role(
        resource=Resource(cpu=2, gpu=2, memMB=512, devices={"vpc.amazonaws.com/efa": 2}),
        mounts=[BindMount("/data", "/in", read_only=True), VolumeMount("cache", "/cache"),
                DeviceMount("/dev/fuse", "/dev/fuse", "rwm")],
        port_map={"http": 8080}, max_retries=3,
    )
    (c,) = build_request(AppDef("r", roles=[role]), {}, "s").containers
    kw = c.kwargs
    assert (kw["mem_limit"], kw["memswap_limit"], kw["shm_size"]) == ("512m", "512m", "512m")
    assert kw["nano_cpus"] == 2_000_000_000
    assert kw["device_requests"] == [{"Driver": "", "Count": 2, "Capabilities": [["gpu"]]}]
    assert kw["devices"] == ["/dev/infiniband/uverbs0:/dev/infiniband/uverbs0:rwm",
                             "/dev/infiniband/uverbs1:/dev/infiniband/uverbs1:rwm", "/dev/fuse:/dev/fuse:rwm"]
    assert kw["volumes"] == {"/data": {"bind": "/in", "mode": "ro"}, "cache": {"bind": "/cache", "mode": "rw"}}
    assert kw["ports"] == {"8080/tcp": None}
    assert kw["restart_policy"] == {"Name": "on-failure", "MaximumRetryCount": 3}
    assert kw["labels"][LABEL_MEM_MB] == "512"


def test_env_from_copy_env_then_cfg_then_role_and_privileged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXREQ_A", "a")
    monkeypatch.setenv("TXREQ_B", "b")
    monkeypatch.setenv("OTHER_C", "c")
    role = _role(env={"TXREQ_B": "role"})
    cfg = {"copy_env": ["TXREQ_*"], "env": {"TXREQ_A": "cfg", "X": "1"}, "privileged": True}
    (c,) = build_request(AppDef("e", roles=[role]), cfg, "s").containers
    env = c.kwargs["environment"]
    assert (env["TXREQ_A"], env["TXREQ_B"], env["X"]) == ("cfg", "role", "1") and "OTHER_C" not in env
    assert c.kwargs["privileged"] is True and c.kwargs["init"] is True


def test_volumes_option_and_the_checkpoint_location_mounted_at_its_path() -> None:
    role = _role(env={"TX_CHECKPOINT_DIR": "/home/u/.local/state/tx/checkpoints/tx/train"},
                 mounts=[BindMount("/data", "/in", read_only=True)])
    job = build_request(AppDef("c", roles=[role]), {"volumes": ["/shared:/shared", "cache:/cache:ro"]}, "s")
    assert job.containers[0].kwargs["volumes"] == {
        "/shared": {"bind": "/shared", "mode": "rw"}, "cache": {"bind": "/cache", "mode": "ro"},
        "/data": {"bind": "/in", "mode": "ro"},
        "/home/u/.local/state/tx/checkpoints/tx/train": {"bind": "/home/u/.local/state/tx/checkpoints/tx/train",
                                                         "mode": "rw"}}
    assert job.host_dirs == ["/home/u/.local/state/tx/checkpoints/tx/train"]  # created before the containers
    for url in ("s3://b/ckpt", "ckpt"):  # not a host path
        job = build_request(AppDef("c", roles=[_role(env={"TX_CHECKPOINT_DIR": url})]), {"volumes": ["/shared:/shared"]},
                            "s")
        assert list(job.containers[0].kwargs["volumes"]) == ["/shared"] and job.host_dirs == [], url
    # under a bind mount already: not mounted again, but made before the containers (the
    # preemption note is written there before the job's first save), at its host path
    for vol, want in (("/shared:/shared", ["/shared/ckpt/tx/train"]), ("/data/x:/shared", ["/data/x/ckpt/tx/train"]),
                      ("cache:/shared", [])):
        job = build_request(AppDef("c", roles=[_role(env={"TX_CHECKPOINT_DIR": "/shared/ckpt/tx/train"})]),
                            {"volumes": [vol]}, "s")
        assert list(job.containers[0].kwargs["volumes"]) == [vol.split(":")[0]] and job.host_dirs == want, vol
    with pytest.raises(ValueError, match=r"run option 'volumes': 'data' is not SRC:DST\[:ro\|rw\]"):
        build_request(AppDef("c", roles=[_role()]), {"volumes": ["data"]}, "s")


def test_container_name_fits_a_dns_label() -> None:
    name = container_name("a" * 40, "Role_With.Odd*Chars" * 5, 12)
    assert len(name) <= 63 and name.endswith("-12") and name.startswith("a" * 40 + "-role-with-odd")


def test_str_is_yaml_of_the_whole_request() -> None:
    job = build_request(AppDef("y", roles=[_role()]), {}, "s")
    data = yaml.safe_load(str(job))
    assert data["app_id"] == job.app_id and data["containers"][0]["command"][0] == "sh"


def test_building_a_request_imports_no_docker_sdk() -> None:
    code = ("import sys\nfrom tx.specs import AppDef, Role\nfrom tx_scheduler_docker.request import build_request\n"
            "build_request(AppDef('a', roles=[Role('r', image='i', entrypoint='true')]), {}, 's')\n"
            "print(sorted(m for m in sys.modules if m == 'docker' or m.startswith(('docker.', 'requests'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_preempt_grace_is_the_stop_timeout_and_the_jobs_grace_with_a_note_beside_its_checkpoints() -> None:
    """``preempt_grace`` (default 30 s, rounded up to whole seconds) is every container's
    StopTimeout (the engine's stop: SIGTERM, SIGKILL after it) and its TX_PREEMPT_GRACE; a
    host checkpoint location gets each container's preemption note, per attempt."""
    ckpt = "/home/u/.local/state/tx/checkpoints/tx/train"
    job = build_request(AppDef("g", roles=[_role(num_replicas=2, env={"TX_CHECKPOINT_DIR": ckpt})]),
                        {"preempt_grace": 12.5}, "s")
    for k, c in enumerate(job.containers):
        assert c.kwargs["stop_timeout"] == 13 and c.kwargs["stop_signal"] == "SIGTERM"
        env = c.kwargs["environment"]
        assert env["TX_PREEMPT_GRACE"] == "13"
        assert env["TX_PREEMPT_NOTE"] == f"{ckpt}/.tx-preempt-{job.app_id}-trainer-{k}.0"
    default = build_request(AppDef("g", roles=[_role(env={"TX_CHECKPOINT_DIR": "s3://b/ckpt"})]), {}, "s")
    kw = default.containers[0].kwargs
    assert kw["stop_timeout"] == 30 and kw["environment"]["TX_PREEMPT_GRACE"] == "30"
    assert "TX_PREEMPT_NOTE" not in kw["environment"]  # tx could not read it
    for bad in (-1, "soon", float("inf")):
        with pytest.raises(ValueError, match=r"run option 'preempt_grace' must be seconds >= 0"):
            build_request(AppDef("g", roles=[_role()]), {"preempt_grace": bad}, "s")
