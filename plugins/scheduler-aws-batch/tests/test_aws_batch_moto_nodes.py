"""The test server made to set what AWS documents (tx_scheduler_aws_batch._moto_nodes) fails
loudly where moto's internals no longer match what it wraps, never running a node without
its variables; its end-to-end behaviour is proven by the kit in Docker mode
(test_aws_batch_conformance.py)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict, List

import pytest

from tx.testing import require_module
from tx_scheduler_aws_batch import _moto_nodes

require_module("moto", "the test server wraps moto: pip install 'moto[server,batch,logs]'")


class _Containers:
    def __init__(self) -> None:
        self.started: List[Dict[str, Any]] = []

    def run(self, **kw: Any) -> Any:
        self.started.append(kw)
        n = len(self.started)
        return SimpleNamespace(attrs={"NetworkSettings": {"Networks": {"podman": {"IPAddress": f"10.88.0.{n}"}}}},
                               reload=lambda: None)


class _Logs:
    def ensure_log_group(self, group: str) -> None:
        pass

    def ensure_log_stream(self, group: str, stream: str) -> None:
        pass


def _job(main: int = 0) -> Any:
    props = {"numNodes": 2, "mainNode": main, "nodeRangeProperties": []}
    return SimpleNamespace(job_name="app", job_id="1234", _stream_name="def/default/1234", _log_group="/aws/batch/job",
                           _log_backend=_Logs(), job_definition=SimpleNamespace(node_properties=props),
                           _tx_nodes={})


def test_each_node_gets_the_documented_variables() -> None:
    job, containers = _job(), _Containers()
    for i in (0, 1):
        _moto_nodes._NodeContainers(job, containers).run(name=f"app-1234-{i}", environment={"A": "1"})
    for i in (0, 1):
        assert containers.started[i]["environment"] == {"A": "1", "AWS_BATCH_JOB_NODE_INDEX": str(i),
                                                        "AWS_BATCH_JOB_NUM_NODES": "2", "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0"}
    assert job._tx_nodes[1].address == "10.88.0.2" and job._tx_nodes[1].stream == "def/default/1234/node1"


@pytest.mark.parametrize("name, main, why", [
    ("app-1234", 0, "not 'app-1234-<i>'"),           # moto names its containers otherwise
    ("app-1234-2", 0, "out of range"),               # a node the job does not have
    ("app-1234-0", 1, "main node 1"),                # moto's main-node address is node 0's
])
def test_a_container_start_it_cannot_place_fails_the_job_loudly(name: str, main: int, why: str) -> None:
    job, containers = _job(main), _Containers()
    with pytest.raises(_moto_nodes.MotoChanged, match=why):
        _moto_nodes._NodeContainers(job, containers).run(name=name, environment={})
    assert containers.started == [], "a node started without its variables"


def test_a_node_started_twice_fails_loudly() -> None:
    job, containers = _job(), _Containers()
    _moto_nodes._NodeContainers(job, containers).run(name="app-1234-0", environment={})
    with pytest.raises(_moto_nodes.MotoChanged, match="again"):
        _moto_nodes._NodeContainers(job, containers).run(name="app-1234-0", environment={})


def test_install_refuses_a_moto_without_the_seams(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.batch import models

    monkeypatch.setattr(models.Job, "docker_client", models.Job.docker_client)
    monkeypatch.setattr(models.BatchBackend, "describe_jobs", models.BatchBackend.describe_jobs)
    _moto_nodes.install()  # this environment's moto has them
    assert isinstance(models.Job.docker_client, property)
    monkeypatch.delattr(models.BatchBackend, "describe_jobs")
    with pytest.raises(_moto_nodes.MotoChanged, match="update tx_scheduler_aws_batch._moto_nodes"):
        _moto_nodes.install()


def test_install_refuses_a_moto_that_starts_nodes_another_way(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.batch import models

    def run(self: Any) -> None:
        for i in range(2):
            self.some_client.start(name=f"node-{i}")

    monkeypatch.setattr(models.Job, "run", run)
    with pytest.raises(_moto_nodes.MotoChanged, match="would start without the node variables"):
        _moto_nodes.install()


def test_the_engine_is_asked_its_api_version_once_per_server(
        monkeypatch: pytest.MonkeyPatch, podman_engine: Dict[str, str]) -> None:
    """moto makes each job's Docker client with ``docker.from_env()``, which asks the engine
    its API version (``GET /version``: seconds on podman under load); the test server asks
    once, and every later job's client speaks that version, against the session's real
    engine."""
    import docker
    from moto.batch import models
    from moto.utilities.docker_utilities import DockerModel

    monkeypatch.setattr(models.Job, "docker_client", models.Job.docker_client)
    monkeypatch.setattr(models.BatchBackend, "describe_jobs", models.BatchBackend.describe_jobs)
    asked: List[str] = []
    retrieve = docker.api.client.APIClient._retrieve_server_version

    def counting(self: Any) -> Any:
        asked.append(self.base_url)
        return retrieve(self)

    monkeypatch.setattr(docker.api.client.APIClient, "_retrieve_server_version", counting)
    _moto_nodes.install()
    jobs = []
    for _ in range(3):
        job = models.Job.__new__(models.Job)  # what moto's client property reads of a job
        DockerModel.__init__(job)
        job.job_definition = SimpleNamespace(node_properties=None)
        jobs.append(job)
    clients = [job.docker_client for job in jobs]
    try:
        assert len(asked) == 1, asked
        assert len({id(c) for c in clients}) == 3, "each job keeps a client of its own, as in moto"
        engine = docker.from_env(version="auto")
        try:
            assert {c.api.api_version for c in clients} == {engine.api.api_version}
            assert all(c.ping() for c in clients)
        finally:
            engine.close()
    finally:
        for c in clients:
            c.close()
