"""local_docker against the session's podman engine, beyond the conformance kit: how
replicas fail (exit code, signal, out of memory), cancel, list by label, retries, resources,
mounts, env and run options, logs, and bad input."""
import os
import time
from pathlib import Path
from typing import Any, List

import pytest

from tx.schedulers import SchedulerError, Stream
from tx.specs import AppDef, AppState, BindMount, DeviceMount, Resource, Role, VolumeMount
from tx.testing import find_replica
from tx_scheduler_docker.scheduler import CANCELLED_SUFFIX, LABEL_APP_ID, DockerScheduler


def _app(image: str, name: str, roles: List[Role]) -> AppDef:
    return AppDef(name, roles=roles)


def _sh(name: str, image: str, script: str, n: int = 1, **kw: Any) -> Role:
    """A role running ``script`` with sh (tx macros apply: write ``$$$$`` for the shell's ``$$``)."""
    return Role(name, image=image, entrypoint="sh", args=["-c", script], num_replicas=n, **kw)


def _containers(client: Any, app_id: str) -> List[Any]:
    return client.containers.list(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})


@pytest.fixture
def submitted(scheduler: DockerScheduler) -> Any:
    apps: List[str] = []
    yield apps
    for app_id in apps:
        scheduler.cancel(app_id)


def _submit(scheduler: DockerScheduler, apps: List[str], app: AppDef, cfg: Any = None) -> str:
    app_id = scheduler.submit(app, cfg or {})
    apps.append(app_id)
    return app_id


def test_failing_replicas_exit_code_and_signal(scheduler: DockerScheduler, submitted: List[str], image: str) -> None:
    script = (
        'echo "starting ${replica_id}"; '
        'if [ "${replica_id}" = 1 ]; then echo "bad input in shard 1" >&2; exit 3; fi; '
        'if [ "${replica_id}" = 2 ]; then sleep 1; kill -KILL $$$$; fi; '
        'echo ok'
    )
    app_id = _submit(scheduler, submitted, _app(image, "failing", [_sh("worker", image, script, n=3)]))
    desc = scheduler.wait(app_id, timeout=120, poll_interval=0.3)
    assert desc is not None and desc.state == AppState.FAILED, desc
    assert find_replica(desc, "worker", 0).state == AppState.SUCCEEDED
    r1, r2 = find_replica(desc, "worker", 1), find_replica(desc, "worker", 2)
    assert (r1.state, r1.exit_code) == (AppState.FAILED, 3)
    assert (r2.state, r2.exit_code) == (AppState.FAILED, 137)
    err = desc.structured_error_msg
    assert "worker[1]" in err and "failed first" in err and "exit code 3" in err, err
    assert "bad input in shard 1" in err, err
    assert "\n" not in err
    assert "2 replicas failed" in err, err
    assert "worker[1]" in desc.msg and "worker[2]" in desc.msg, desc.msg


def test_signal_is_named(scheduler: DockerScheduler, submitted: List[str], image: str) -> None:
    app_id = _submit(scheduler, submitted, _app(image, "sig", [_sh("w", image, "echo before; kill -TERM $$$$; sleep 5")]))
    desc = scheduler.wait(app_id, timeout=60, poll_interval=0.3)
    assert desc is not None and desc.state == AppState.FAILED
    assert find_replica(desc, "w", 0).exit_code == 143
    assert "killed by SIGTERM (exit code 143)" in desc.structured_error_msg, desc.structured_error_msg


def test_out_of_memory(scheduler: DockerScheduler, submitted: List[str], docker_client: Any, image: str) -> None:
    """A replica over its memMB is killed by the kernel. podman 4.3 on this host's cgroup v1
    kills it (exit code 137) but does not report ``OOMKilled`` (conmon cannot see the cgroup
    v1 OOM event here), so tx names the signal and the limit and says the engine cannot
    see it; where the engine reports OOMKilled, tx says "out of memory" outright."""
    hog = 'echo allocating; x=aaaaaaaaaaaaaaaa; while true; do x="$x$x"; done'
    role = _sh("hog", image, hog, resource=Resource(cpu=1, gpu=0, memMB=16))
    app_id = _submit(scheduler, submitted, _app(image, "oom", [role]))
    desc = scheduler.wait(app_id, timeout=120, poll_interval=0.3)
    assert desc is not None and desc.state == AppState.FAILED, desc
    assert find_replica(desc, "hog", 0).exit_code == 137
    (ct,) = _containers(docker_client, app_id)
    assert ct.attrs["HostConfig"]["Memory"] == 16 * 2**20
    err = desc.structured_error_msg
    if ct.attrs["State"].get("OOMKilled"):
        assert "killed: out of memory (memory limit 16 MB, exit code 137)" in err, err
    else:
        assert docker_client.info().get("CgroupVersion") != "2", "cgroup v2 reports every OOM kill"
        assert ("killed by SIGKILL (exit code 137); the engine reports no out-of-memory kill but cannot see"
                " one on cgroup v1: the memory limit is 16 MB") in err, err


def test_cancel_stops_marks_and_removes_network(
    scheduler: DockerScheduler, submitted: List[str], docker_client: Any, image: str
) -> None:
    app = _app(image, "cancelme", [_sh("a", image, "echo up ${replica_id}; sleep 600", n=2), _sh("b", image, "sleep 600")])
    app_id = _submit(scheduler, submitted, app)
    deadline = time.monotonic() + 60
    while scheduler.describe(app_id).state != AppState.RUNNING and time.monotonic() < deadline:  # type: ignore[union-attr]
        time.sleep(0.2)
    assert docker_client.networks.list(names=[f"tx-{app_id}"])
    t0 = time.monotonic()
    scheduler.cancel(app_id)
    took = time.monotonic() - t0
    desc = scheduler.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED, desc
    assert {r.state for rs in desc.roles_statuses for r in rs.replicas} == {AppState.CANCELLED}
    cts = _containers(docker_client, app_id)
    assert len(cts) == 3 and all(c.status in ("exited", "stopped") for c in cts), [(c.name, c.status) for c in cts]
    assert all(c.name.endswith(CANCELLED_SUFFIX) for c in cts)
    assert not docker_client.networks.list(names=[f"tx-{app_id}"]), "the app's network is still there"
    assert list(scheduler.log_iter(app_id, "a", 1)) == ["up 1\n"], "logs of a cancelled replica are gone"
    fresh = DockerScheduler("other")
    assert fresh.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]
    assert app_id in {a.app_id: a for a in fresh.list()} and {a.app_id: a for a in fresh.list()}[app_id].state == AppState.CANCELLED
    scheduler.cancel(app_id)
    assert scheduler.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]
    print(f"\ncancel of 3 running containers took {took:.2f} s")


def test_cancel_of_an_ended_app_keeps_its_state(scheduler: DockerScheduler, submitted: List[str], image: str) -> None:
    app_id = _submit(scheduler, submitted, _app(image, "done", [_sh("a", image, "echo done")]))
    assert scheduler.wait(app_id, timeout=60, poll_interval=0.2).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    scheduler.cancel(app_id)
    assert scheduler.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]


def test_list_by_label(scheduler: DockerScheduler, submitted: List[str], docker_client: Any, image: str) -> None:
    ok = _submit(scheduler, submitted, _app(image, "listok", [_sh("a", image, "true", n=2)]))
    bad = _submit(scheduler, submitted, _app(image, "listbad", [_sh("a", image, "exit 1")]))
    other = docker_client.containers.run(image, ["true"], detach=True, labels={"not.tx": "1"})
    try:
        for app_id in (ok, bad):
            scheduler.wait(app_id, timeout=60, poll_interval=0.2)
        listed = {a.app_id: a for a in scheduler.list()}
        assert listed[ok].state == AppState.SUCCEEDED and listed[ok].name == "listok"
        assert listed[bad].state == AppState.FAILED
        assert other.id not in str(listed)
    finally:
        other.remove(force=True)


def test_retries_restart_the_failed_replica(
    scheduler: DockerScheduler, submitted: List[str], image: str, tmp_path: Path
) -> None:
    """max_retries becomes Docker's on-failure restart policy: a replica that fails once and
    then succeeds ends SUCCEEDED with one restart."""
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(state, 0o777)
    script = 'if [ ! -e /state/ran ]; then touch /state/ran; echo "first try" >&2; exit 1; fi; echo "second try"'
    role = _sh("flaky", image, script, max_retries=2, mounts=[BindMount(str(state), "/state")])
    app_id = _submit(scheduler, submitted, _app(image, "retry", [role]))
    desc = scheduler.wait(app_id, timeout=120, poll_interval=0.3)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    assert desc.num_restarts == 1
    assert "second try\n" in list(scheduler.log_iter(app_id, "flaky", 0))


def test_resources_mounts_ports_and_dryrun(
    scheduler: DockerScheduler, submitted: List[str], docker_client: Any, image: str, tmp_path: Path
) -> None:
    host = tmp_path / "in"
    host.mkdir()
    (host / "f.txt").write_text("from the host\n")
    vol = docker_client.volumes.create(f"txvol-{os.getpid()}")
    try:
        role = _sh(
            "res", image, "cat /in/f.txt; echo vol > /vol/x && cat /vol/x; touch /in/ro 2>/dev/null || echo read-only; "
                          "[ -c /dev/txnull ] && echo device",
            resource=Resource(cpu=1, gpu=0, memMB=64), port_map={"http": 8080},
            mounts=[BindMount(str(host), "/in", read_only=True), VolumeMount(vol.name, "/vol"),
                    DeviceMount("/dev/null", "/dev/txnull", "rw")],
        )
        app = _app(image, "res", [role])
        info = scheduler.submit_dryrun(app, {})
        text = str(info)
        assert "mem_limit: 64m" in text and "nano_cpus: 1000000000" in text and "8080/tcp" in text, text
        app_id = _submit(scheduler, submitted, app)
        desc = scheduler.wait(app_id, timeout=60, poll_interval=0.2)
        assert desc is not None and desc.state == AppState.SUCCEEDED, desc.structured_error_msg
        assert list(scheduler.log_iter(app_id, "res", 0)) == ["from the host\n", "vol\n", "read-only\n", "device\n"]
        (ct,) = _containers(docker_client, app_id)
        hc = ct.attrs["HostConfig"]
        assert hc["Privileged"] is False
        assert hc["Memory"] == 64 * 2**20 and hc["ShmSize"] == 64 * 2**20
        assert hc["NanoCpus"] == 10**9 or hc.get("CpuQuota") == 100000, hc
        assert "8080/tcp" in (ct.attrs["NetworkSettings"]["Ports"] or {})
        assert desc.roles[0].image == image and desc.roles[0].entrypoint == "sh"
    finally:
        docker_client.containers.prune(filters={"label": "tx.app-name=res"})
        vol.remove(force=True)


def test_env_copy_env_privileged_and_macros(scheduler: DockerScheduler, submitted: List[str], image: str,
                                            docker_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXTEST_COPY_ME", "copied")
    monkeypatch.setenv("TXTEST_OTHER", "not-copied")
    role = _sh("e", image, 'echo "$TXTEST_COPY_ME $TXTEST_OTHER $FROM_CFG $FROM_ROLE $TX_RANK0_HOST $(hostname)"',
               n=2, env={"FROM_ROLE": "role-${replica_id}-${app_id}"})
    cfg = {"copy_env": ["TXTEST_COPY_*"], "env": {"FROM_CFG": "cfg", "TXTEST_OTHER": "cfg-wins"}, "privileged": True}
    app_id = _submit(scheduler, submitted, _app(image, "env", [role]), cfg)
    desc = scheduler.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    assert all(c.attrs["HostConfig"]["Privileged"] is True for c in _containers(docker_client, app_id))
    rank0 = f"{app_id}-e-0"
    for k in (0, 1):
        assert list(scheduler.log_iter(app_id, "e", k)) == [
            f"copied cfg-wins cfg role-{k}-{app_id} {rank0} {app_id}-e-{k}\n"
        ]


def test_replicas_reach_each_other_by_name(scheduler: DockerScheduler, submitted: List[str], image: str) -> None:
    server = 'if [ "${replica_id}" = 0 ]; then echo pong | nc -l -p 7777; else sleep 1; ' \
             'for i in 1 2 3 4 5 6 7 8 9 10; do nc $TX_RANK0_HOST 7777 </dev/null && break; sleep 0.5; done; fi'
    app_id = _submit(scheduler, submitted, _app(image, "net", [_sh("n", image, server, n=2)]))
    desc = scheduler.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    assert "pong\n" in list(scheduler.log_iter(app_id, "n", 1))


def test_logs_streams_regex_window_and_follow(scheduler: DockerScheduler, submitted: List[str], image: str) -> None:
    script = "echo o1; echo e1 >&2; sleep 2; echo o2; echo e2 >&2"
    app_id = _submit(scheduler, submitted, _app(image, "logs", [_sh("l", image, script)]))
    followed = list(scheduler.log_iter(app_id, "l", 0, should_tail=True, streams=Stream.STDOUT))
    assert followed == ["o1\n", "o2\n"], followed
    scheduler.wait(app_id, timeout=60, poll_interval=0.2)
    assert list(scheduler.log_iter(app_id, "l", 0, streams=Stream.STDERR)) == ["e1\n", "e2\n"]
    assert sorted(scheduler.log_iter(app_id, "l", 0, streams="combined")) == ["e1\n", "e2\n", "o1\n", "o2\n"]
    assert list(scheduler.log_iter(app_id, "l", 0, regex="2$")) in (["o2\n", "e2\n"], ["e2\n", "o2\n"])
    from datetime import datetime, timedelta, timezone

    future = datetime.now(timezone.utc) + timedelta(hours=1)
    assert list(scheduler.log_iter(app_id, "l", 0, since=future)) == []
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    assert list(scheduler.log_iter(app_id, "l", 0, until=past)) == []
    assert len(list(scheduler.log_iter(app_id, "l", 0, since=past))) == 4
    with pytest.raises(ValueError):
        list(scheduler.log_iter(app_id, "l", 5))
    with pytest.raises(ValueError):
        list(scheduler.log_iter(app_id, "l", 0, streams="nope"))


def test_missing_image_leaves_nothing(scheduler: DockerScheduler, docker_client: Any, image: str) -> None:
    before = (len(docker_client.containers.list(all=True)), len(docker_client.networks.list()))
    app = _app(image, "noimg", [_sh("a", image, "true"), Role("b", image="localhost/no-such-image:tx", entrypoint="true")])
    with pytest.raises(SchedulerError, match="no-such-image.*cannot be pulled"):
        scheduler.submit(app, {})
    assert (len(docker_client.containers.list(all=True)), len(docker_client.networks.list())) == before


def test_no_engine_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, image: str) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    sched = DockerScheduler("t")
    with pytest.raises(SchedulerError) as e:
        sched.submit(_app(image, "x", [_sh("a", image, "true")]), {})
    msg = str(e.value)
    assert "\n" not in msg and f"unix://{tmp_path}/none.sock" in msg and "start-podman.sh" in msg, msg


def test_engine_lost_later_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A scheduler whose engine goes away after it was made: describe, list, cancel and logs
    raise a one-line SchedulerError, not the HTTP library's exception."""
    import docker

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/gone.sock")
    sched = DockerScheduler("t", client=docker.DockerClient(base_url=f"unix://{tmp_path}/gone.sock", version="1.41"))
    for call in (lambda: sched.describe("a-1"), sched.list, lambda: sched.cancel("a-1"),
                 lambda: list(sched.log_iter("a-1", "r", 0))):
        with pytest.raises(SchedulerError, match="no Docker engine answers") as e:
            call()
        assert "\n" not in str(e.value)


def test_role_without_image(scheduler: DockerScheduler) -> None:
    with pytest.raises(ValueError, match="has no image"):
        scheduler.submit_dryrun(AppDef("x", roles=[Role("a", entrypoint="true")]), {})


def test_networks_of_ended_apps_are_collected(
    scheduler: DockerScheduler, submitted: List[str], docker_client: Any, image: str
) -> None:
    """Each app makes a network; once its containers have ended, the next submit removes it
    (the containers and their logs stay)."""
    first = _submit(scheduler, submitted, _app(image, "gc", [_sh("a", image, "echo one", n=2)]))
    assert scheduler.wait(first, timeout=60, poll_interval=0.2).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert docker_client.networks.list(names=[f"tx-{first}"])
    second = _submit(scheduler, submitted, _app(image, "gc", [_sh("a", image, "sleep 30")]))
    assert not docker_client.networks.list(names=[f"tx-{first}"]), "the ended app's network is still there"
    assert docker_client.networks.list(names=[f"tx-{second}"]), "the running app lost its network"
    assert list(scheduler.log_iter(first, "a", 1)) == ["one\n"]
    assert scheduler.describe(first).state == AppState.SUCCEEDED  # type: ignore[union-attr]


def test_a_network_another_submit_is_filling_is_not_collected(
    scheduler: DockerScheduler, submitted: List[str], docker_client: Any, image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two submits at once: one has made its app's network and not yet its containers when
    the other collects networks. That network is left alone (it was removed, and the first
    submit failed with "network not found"); one left with no container for longer than
    NETWORK_GRACE (a submit that died in between) is collected."""
    import tx_scheduler_docker.scheduler as mod

    filling = docker_client.networks.create("tx-filling-0", driver="bridge", labels={LABEL_APP_ID: "filling-0"})
    try:
        _submit(scheduler, submitted, _app(image, "gc", [_sh("a", image, "true")]))
        assert docker_client.networks.list(names=["tx-filling-0"]), "a submit removed another submit's new network"
        monkeypatch.setattr(mod, "NETWORK_GRACE", 0)  # now it is a dead submit's
        _submit(scheduler, submitted, _app(image, "gc", [_sh("a", image, "true")]))
        assert not docker_client.networks.list(names=["tx-filling-0"])
    finally:
        try:
            filling.remove()
        except Exception:  # noqa: BLE001 - collected
            pass
