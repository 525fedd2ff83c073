"""A host reboot under running containers, on the session's podman engine: its service,
the containers' conmon and processes SIGKILLed (the power goes), the engine's run state (a tmpfs at
a real boot) emptied and the service started again, which makes podman reset every container
that ran (libpod's resetContainerState; podman 4 reports them ``created``, podman 5
``exited`` with exit code 0, neither with an end). local_docker reports the app FAILED with
an ``infra`` attempt (so a run with ``--fallback`` moves on), never SUBMITTED or SUCCEEDED,
or, within ``infra_retries``, starts the lost replicas again."""
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx.specs import AppDef, AppState, BindMount, FailureKind, Role
from tx_scheduler_docker.scheduler import LABEL_APP_ID, DockerScheduler
from tx_scheduler_docker.testing import SCRIPTS

#: the engine this test restarts is the session's: run it after every other test (conftest.py)
pytestmark = pytest.mark.restarts_engine


def _parent(pid: Any) -> int:
    """The parent of a container's first process (its conmon, also while podman has not
    recorded ``ConmonPid`` yet); 0 where there is none."""
    try:
        with open(f"/proc/{int(pid)}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("PPid:")), 0)
    except (OSError, ValueError, TypeError):
        return 0


def _reboot(engine: Dict[str, str], client: Any) -> None:
    base = Path(engine["DOCKER_HOST"].split("unix://", 1)[1]).parent
    pids = []
    netns = []  # the containers' network namespaces, bind-mounted under the host's /run/netns
    ids = [c["Id"] for c in client.api.containers(all=True)]
    for cid in ids:  # every container with a process, whatever it is listed as
        info = client.api.inspect_container(cid)
        st = info["State"]
        pids += [p for p in (st.get("ConmonPid"), st.get("Pid"), _parent(st.get("Pid"))) if p]
        key = (info.get("NetworkSettings") or {}).get("SandboxKey") or ""
        if key.startswith("/run/netns/"):
            netns.append(os.path.basename(key))
    # the engine's network bridges: the kernel's, which a reboot takes away with the rest
    bridges = [n["Options"]["com.docker.network.bridge.name"] for n in client.api.networks()
               if (n.get("Options") or {}).get("com.docker.network.bridge.name")]
    service = int((base / "service.pid").read_text())
    for sig in (signal.SIGSTOP, signal.SIGKILL):  # all at once, none reacting to another's end
        for p in [service, *pids]:  # the power goes: the engine's service, conmons, containers
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    (base / "service.pid").unlink()  # so that the start script starts a new one
    for bridge in bridges:  # left behind, they would clash with the bridges the new engine names alike
        subprocess.run(["ip", "link", "delete", bridge], capture_output=True, timeout=30)
    for name in netns:  # /run is a tmpfs at a real boot; left behind, each keeps a veth pair on the host
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)
    # and the host-port DNAT rules of its containers: left behind, a later listener on the same
    # port of 127.0.0.1 (a DDP job's gloo) has its connections sent to a dead address
    subprocess.run(["bash", str(SCRIPTS / "drop-podman-dnat.sh"), *ids], capture_output=True, timeout=60)
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f if line.split()[1].startswith(f"{base}/")]
    for m in sorted(mounts, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True, timeout=30)
    # what a boot empties: the run root and podman's "alive" marker (tmpfs at a real boot)
    subprocess.run(["rm", "-rf", *[str(x) for x in (base / "run").glob("*")], str(base / "tmp" / "alive"),
                    str(base / "tmp" / "alive.lck"), str(base / "tmp" / "exits")], check=True, timeout=60)
    env = {**os.environ, "PODMAN_BASE": str(base), "PODMAN_INSECURE_REGISTRIES": engine["TX_TEST_REGISTRY"]}
    subprocess.run(["bash", str(SCRIPTS / "start-podman.sh")], env=env, check=True, capture_output=True, timeout=120)


def _running(scheduler: DockerScheduler, app_id: str, *markers: Path) -> None:
    deadline = time.monotonic() + 60
    while scheduler.describe(app_id).state != AppState.RUNNING or not all(m.exists() for m in markers):
        assert time.monotonic() < deadline, scheduler.describe(app_id)
        time.sleep(0.1)


def _succeeded(scheduler: DockerScheduler, app_id: str) -> Any:
    """The app's description once it SUCCEEDED (within 60 s), never passing through a terminal
    state on the way."""
    deadline = time.monotonic() + 60
    while (desc := scheduler.describe(app_id)).state != AppState.SUCCEEDED:
        assert desc.state in (AppState.PENDING, AppState.SUBMITTED, AppState.RUNNING), desc
        assert time.monotonic() < deadline, desc
        time.sleep(0.1)
    return desc


def test_containers_lost_to_a_host_reboot_are_an_infrastructure_failure(
        scheduler: DockerScheduler, docker_client: Any, podman_engine: Dict[str, str], image: str,
        tmp_path: Path) -> None:
    """One reboot, three apps: with infra_retries=0 the app FAILS as infra (a run with
    --fallback moves on); with infra_retries=1 each lost replica runs again in a new
    container (two tx processes describing it at once start one), the app SUCCEEDS without
    spending max_retries, and its attempts are listed; so does a replica the engine had
    restarted on failure (max_retries=2) before the reboot, whose end recorded is then its
    earlier run's."""
    role = Role("w", image=image, entrypoint="sh", args=["-c", "echo up; exec sleep 300"], num_replicas=2)
    app_id = scheduler.submit(AppDef("reboot", roles=[role]), {"infra_retries": 0})
    # the second run of a replica finds its marker (written by the first) and exits 0
    again = Role("w", image=image, entrypoint="sh", num_replicas=2, mounts=[BindMount(str(tmp_path), "/m")],
                 args=["-c", 'echo "up $TX_REPLICA_ID"; [ -e /m/$TX_REPLICA_ID ] && exit 0; '
                             'touch /m/$TX_REPLICA_ID; exec sleep 300'])
    retried = scheduler.submit(AppDef("reboot", roles=[again]), {"infra_retries": 1})
    # run 1 fails (the engine restarts it), run 2 is lost to the reboot, run 3 succeeds
    (tmp_path / "r").mkdir()
    twice = Role("w", image=image, entrypoint="sh", max_retries=2, mounts=[BindMount(str(tmp_path / "r"), "/m")],
                 args=["-c", 'echo run; [ -e /m/lost ] && exit 0; [ -e /m/failed ] || { touch /m/failed; exit 3; }; '
                             'touch /m/lost; exec sleep 300'])
    restarted = scheduler.submit(AppDef("reboot", roles=[twice]), {"infra_retries": 1})
    _running(scheduler, app_id)
    _running(scheduler, retried, tmp_path / "0", tmp_path / "1")
    _running(scheduler, restarted, tmp_path / "r" / "lost")
    assert docker_client.api.inspect_container(f"{restarted}-w-0")["RestartCount"] == 1
    _reboot(podman_engine, docker_client)
    desc = scheduler.describe(app_id)
    assert desc.state == AppState.FAILED, desc
    assert [(a.kind, a.state) for a in desc.attempts] == [(FailureKind.INFRA, AppState.FAILED)], desc.attempts
    assert "w[0]: the engine lost the container while it ran: started at " in desc.attempts[0].reason
    assert all(r.exit_code is None for r in desc.roles_statuses[0].replicas), desc.roles_statuses
    cs: List[Any] = docker_client.api.containers(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
    assert all(c["State"] in ("created", "configured", "exited") for c in cs), cs
    scheduler.cancel(app_id)

    other = DockerScheduler("txtest")  # a second tx process looking at the same app at once
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda s: s.describe(retried), [scheduler, other]))
    other.close()
    desc = _succeeded(scheduler, retried)
    assert [a.text.split(" (")[0] for a in desc.attempts] == ["#0 FAILED", "#1 SUCCEEDED"], desc.attempts
    assert desc.attempts[0].text.startswith("#0 FAILED (infra: w[0]: the engine lost the container while it ran")
    assert desc.attempts[0].text.endswith(", retried"), desc.attempts
    assert desc.num_restarts == 1 and desc.roles_statuses[0].replicas[1].exit_code == 0, desc
    names = sorted(c["Names"][0].lstrip("/") for c in docker_client.api.containers(
        all=True, filters={"label": f"{LABEL_APP_ID}={retried}"}))
    assert names == [f"{retried}-w-0", f"{retried}-w-0.infra0", f"{retried}-w-1", f"{retried}-w-1.infra0"], names
    assert "".join(scheduler.log_iter(retried, "w", 1)) == "up 1\nup 1\n"  # the lost container's, the new one's
    assert [a.app_id for a in scheduler.list() if a.app_id == retried and a.state == AppState.SUCCEEDED] == [retried]

    desc = _succeeded(scheduler, restarted)
    assert [a.text.split(" (")[0] for a in desc.attempts] == ["#0 FAILED", "#1 SUCCEEDED"], desc.attempts
    assert "(infra: w[0]: the engine lost the container while it ran" in desc.attempts[0].text, desc.attempts
    assert "no end recorded after it was restarted" in desc.attempts[0].text, desc.attempts
    # the loss spent none of max_retries=2: the new container keeps the one its failed run left
    new = docker_client.api.inspect_container(f"{restarted}-w-0")
    assert new["HostConfig"]["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 1}, new["HostConfig"]
    assert new["RestartCount"] == 0
    assert "".join(scheduler.log_iter(restarted, "w", 0)) == "run\nrun\nrun\n"  # the lost container's two, the new one's
