"""What each backend of the portability matrix (tests/test_portability.py) holds, read from the
backend itself rather than through tx: the capacity compared before and after the apps ran
(processes, containers, Slurm and LSF queues and hosts, Ray's CPUs, placement groups and
actors, pods, GCP task processes), and a container's own log (moto's Docker mode)."""
from __future__ import annotations

import os
from typing import Any, List


def local_capacity(app_ids: List[str]) -> Any:
    from tx_scheduler_local import _procs

    live = [p for a in app_ids for p in _procs.pids_with_env([f"TX_APP_ID={a}".encode()]) if _procs.is_alive(p)]
    return {"live replica processes": len(live)}


def containers() -> Any:
    import docker

    client = docker.DockerClient(base_url=os.environ["DOCKER_HOST"], timeout=60)
    try:
        return {"running containers": len(client.containers.list())}
    finally:
        client.close()


def container_said(prefix: str, text: str) -> bool:
    """Whether a container of the engine whose name starts with ``prefix`` (moto names a job's
    containers ``<job name>-<job id>-<node>``) has ``text`` in its log."""
    import docker

    client = docker.APIClient(base_url=os.environ["DOCKER_HOST"], timeout=60)
    try:
        for c in client.containers(all=True, filters={"name": prefix}):  # a summary each: no inspect
            try:
                if text in client.logs(c["Id"]).decode(errors="replace"):
                    return True
            except docker.errors.NotFound:  # the other apps' containers end and go meanwhile
                pass
        return False
    finally:
        client.close()


def slurm_capacity() -> Any:
    import subprocess

    # partition debug's nodes: down1 (partition down) turns down* when a ping fails, at any time
    p = subprocess.run(["sinfo", "--noheader", "--Node", "--partition=debug", "--format=%N %t"], capture_output=True,
                       text=True, timeout=30)
    states = sorted(set(p.stdout.split("\n")) - {""})
    q = subprocess.run(["squeue", "--noheader", "--format=%i"], capture_output=True, text=True, timeout=30)
    return {"nodes": states, "jobs in queue": len(q.stdout.split())}


def lsf_capacity() -> Any:
    import subprocess

    q = subprocess.run(["bjobs", "-u", "all", "-noheader", "-w"], capture_output=True, text=True, timeout=30)
    h = subprocess.run(["bhosts", "-w"], capture_output=True, text=True, timeout=30)
    return {"unfinished jobs": len(q.stdout.splitlines()),
            "hosts": sorted(" ".join(ln.split()[:2]) for ln in h.stdout.splitlines()[1:] if ln.strip())}


def ray_capacity() -> Any:
    from ray.util.state import list_actors, list_placement_groups

    address = os.environ["RAY_ADDRESS"]
    import requests

    status = requests.get(f"{address}/api/cluster_status", timeout=10).json()
    usage = (status.get("data", {}).get("clusterStatus", {}).get("loadMetricsReport", {}) or {}).get("usage", {})
    used_cpu = (usage.get("CPU") or [0, 0])[0]
    pgs = [p for p in list_placement_groups(address=address, limit=1000) if p.state != "REMOVED"]
    actors = [a for a in list_actors(address=address, limit=1000) if a.state == "ALIVE"]
    return {"CPUs in use": used_cpu, "placement groups": len(pgs), "live actors": len(actors)}


def k8s_capacity(kubeconfig: str) -> Any:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    pods = api.list_namespaced_pod("default").items  # the namespace tx submits to
    return {"pods not ended": len([p for p in pods if p.status.phase not in ("Succeeded", "Failed")])}


def gcp_capacity(server: Any) -> Any:
    return {"running task processes": len(server.running_tasks())} if hasattr(server, "running_tasks") else {}
