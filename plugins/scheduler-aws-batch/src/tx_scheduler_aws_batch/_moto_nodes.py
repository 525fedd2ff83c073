"""The test server made to set what AWS documents: ``moto_server`` whose Batch, in Docker mode,
runs a multi-node parallel job's nodes as AWS Batch does in what tx relies on (the
``moto_docker`` fixture of :mod:`tx_scheduler_aws_batch.testing` starts it as
``python -m tx_scheduler_aws_batch._moto_nodes -H HOST -p PORT``; tests only).

moto 5 runs each node of a multi-node job as its own container (named
``{job_name}-{job_id}-{i}``) but, unlike AWS Batch, sets none of the node variables and has
no node jobs. This launcher wraps moto's container start for multi-node jobs (the job's
Docker client) and its ``DescribeJobs``, and then runs moto's own server:

* every node's container gets ``AWS_BATCH_JOB_NODE_INDEX`` (``i``),
  ``AWS_BATCH_JOB_NUM_NODES`` and ``AWS_BATCH_JOB_MAIN_NODE_INDEX``, as AWS documents for
  multi-node parallel jobs (https://docs.aws.amazon.com/batch/latest/userguide/mnp-env-vars.html;
  moto itself sets ``AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS`` on nodes 1.. from node
  0's container, so the main node must be node 0, as in tx's job definitions);
* every node writes its own CloudWatch log stream (``<moto's job stream>/node<i>``; moto's
  job stream still gets every node's lines), as each node job has its own on AWS;
* ``DescribeJobs`` of ``<jobId>#<i>`` answers node ``i``'s node job: ``status`` (RUNNING
  while its container runs, then SUCCEEDED or FAILED by its exit code; the job's status
  before its container started, or when moto stopped it without waiting for it), its
  ``container`` (``exitCode``, ``logStreamName``, ``networkInterfaces`` with the
  container's address), ``attempts`` and ``nodeDetails``.

It also asks the engine for its API version once per server, not once per job: moto makes
each job's Docker client with ``docker.from_env()``, whose version negotiation
(``GET /version``, which podman answers from its whole ``info``: it runs conmon and the OCI
runtime for their versions) took 1.9-3.8 s on the test engine of a loaded 2-core machine,
before each job's first container; every later job's client speaks the version the engine
gave the first (tx's docker scheduler likewise pins one, ``DOCKER_API_VERSION``).

Where moto's internals no longer match what this wraps (a container name of another form, a
node started twice, a main node other than 0, moto's ``Job.docker_client`` or
``BatchBackend.describe_jobs`` gone, ``Job.run`` no longer starting nodes through them), the
server refuses to start or the job fails with the reason in the server's log: never a job
that runs without the variables.
"""
from __future__ import annotations

import inspect
import re
import sys
import threading
from typing import Any, Dict, List, Optional

__all__ = ["install", "main"]

#: the attribute of a moto job that holds its nodes (index -> :class:`_Node`)
_NODES = "_tx_nodes"
#: moto's own attribute of a job that holds its Docker client (``DockerModel.__docker_client``)
_CLIENT = "_DockerModel__docker_client"


class MotoChanged(RuntimeError):
    """moto's internals no longer match what this launcher wraps."""


class _Node:
    """What the launcher knows of one node of a multi-node job."""

    def __init__(self, index: int, container: Any, stream: str, started_ms: int) -> None:
        self.index = index
        self.container = container
        self.stream = stream
        self.started_ms = started_ms
        self.exit_code: Optional[int] = None  # set when moto waited for the container
        self.stopped_ms: Optional[int] = None
        self.address = _address(container)  # while it runs: a stopped container has none


def _address(container: Any) -> str:
    """The running container's address (as moto reads the main node's)."""
    container.reload()
    net = (getattr(container, "attrs", None) or {}).get("NetworkSettings") or {}
    for n in (net.get("Networks") or {}).values():
        if n.get("IPAddress"):
            return str(n["IPAddress"])
    return str(net.get("IPAddress") or "")


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


class _NodeContainer:
    """moto's container of node ``node``: reading its logs marks it as the node whose lines
    moto puts next; waiting for it records its exit code."""

    def __init__(self, job: Any, node: _Node) -> None:
        self._job, self._node = job, node

    def logs(self, *a: Any, **kw: Any) -> Any:
        self._job._tx_logging_node = self._node.index
        return self._node.container.logs(*a, **kw)

    def wait(self, *a: Any, **kw: Any) -> Any:
        result = self._node.container.wait(*a, **kw)
        self._node.exit_code = int((result or {}).get("StatusCode", 0))
        self._node.stopped_ms = _now_ms()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node.container, name)


class _NodeLogs:
    """The job's CloudWatch Logs backend: what moto puts in the job's stream goes to the
    stream of the node whose logs it just read too."""

    def __init__(self, job: Any, logs: Any) -> None:
        self._job, self._logs = job, logs

    def put_log_events(self, group: str, stream: str, events: Any) -> Any:
        index = getattr(self._job, "_tx_logging_node", None)
        node = getattr(self._job, _NODES).get(index)
        if node is None:
            raise MotoChanged(f"moto put log events of job {self._job.job_id} before reading a node's logs")
        self._logs.ensure_log_stream(group, node.stream)
        self._logs.put_log_events(group, node.stream, events)
        return self._logs.put_log_events(group, stream, events)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logs, name)


class _NodeContainers:
    """``docker_client.containers`` of a multi-node job: ``run`` adds the node variables."""

    def __init__(self, job: Any, containers: Any) -> None:
        self._job, self._containers = job, containers

    def run(self, **kw: Any) -> Any:
        job = self._job
        props = job.job_definition.node_properties
        name = str(kw.get("name", ""))
        m = re.fullmatch(re.escape(f"{job.job_name}-{job.job_id}-") + r"(\d+)", name)
        if m is None:
            raise MotoChanged(f"moto started a node container named {name!r}, not '{job.job_name}-{job.job_id}-<i>'")
        index, num = int(m.group(1)), int(props["numNodes"])
        main = int(props.get("mainNode", 0))
        nodes: Dict[int, _Node] = getattr(job, _NODES)
        if index in nodes or not 0 <= index < num:
            raise MotoChanged(f"moto started node {index} of job {job.job_id} ({num} nodes) again or out of range")
        if main != 0:
            raise MotoChanged(f"job {job.job_id} has main node {main}: moto gives every node node 0's address")
        env = kw.get("environment")
        if not isinstance(env, dict):
            raise MotoChanged(f"moto's node container environment is {type(env).__name__}, not a dict")
        env.update(AWS_BATCH_JOB_NODE_INDEX=str(index), AWS_BATCH_JOB_NUM_NODES=str(num),
                   AWS_BATCH_JOB_MAIN_NODE_INDEX=str(main))
        stream = f"{job._stream_name}/node{index}"
        logs = job._log_backend
        if not isinstance(logs, _NodeLogs):
            logs.ensure_log_group(job._log_group)
            job._log_backend = _NodeLogs(job, logs)
        job._log_backend.ensure_log_stream(job._log_group, stream)
        node = _Node(index, self._containers.run(**kw), stream, _now_ms())
        nodes[index] = node
        return _NodeContainer(job, node)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._containers, name)


class _NodeDocker:
    """A multi-node job's Docker client (see :class:`_NodeContainers`)."""

    def __init__(self, job: Any, client: Any) -> None:
        self.containers = _NodeContainers(job, client.containers)
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _status(job: Any) -> str:
    return str(getattr(job.status, "value", job.status))


def node_record(job: Any, index: int) -> Dict[str, Any]:
    """The ``DescribeJobs`` record of node ``index`` of multi-node ``job`` (JobDetail of a
    node job: https://docs.aws.amazon.com/batch/latest/APIReference/API_JobDetail.html)."""
    node: Optional[_Node] = getattr(job, _NODES, {}).get(index)
    parent = _status(job)
    rec: Dict[str, Any] = {
        "jobArn": f"{job.arn}#{index}", "jobName": job.job_name, "jobId": f"{job.job_id}#{index}",
        "jobQueue": job.job_queue.arn, "jobDefinition": job.job_definition.arn, "status": parent,
        "nodeDetails": {"nodeIndex": index, "isMainNode": index == int(job.job_definition.node_properties.get("mainNode", 0))},
    }
    if node is None:
        return rec
    container: Dict[str, Any] = {"logStreamName": node.stream,
                                 "networkInterfaces": [{"privateIpv4Address": node.address}]}
    attempt: Dict[str, Any] = {"container": container, "startedAt": node.started_ms}
    rec["startedAt"] = node.started_ms
    if node.exit_code is not None:
        rec["status"] = "SUCCEEDED" if node.exit_code == 0 else "FAILED"
        container["exitCode"] = node.exit_code
        attempt["stoppedAt"] = rec["stoppedAt"] = node.stopped_ms
    elif parent not in ("SUCCEEDED", "FAILED"):
        rec["status"] = "RUNNING"
    rec["container"] = dict(container)
    rec["attempts"] = [attempt]
    return rec


def install() -> None:
    """Wrap moto's Batch (see the module's doc) in this process.

    Raises:
        MotoChanged: moto has no ``Job.docker_client`` or ``BatchBackend.describe_jobs``.
    """
    from moto.batch import models

    job_cls, backend_cls = getattr(models, "Job", None), getattr(models, "BatchBackend", None)
    docker_prop = getattr(job_cls, "docker_client", None)
    describe = getattr(backend_cls, "describe_jobs", None)
    if not isinstance(docker_prop, property) or describe is None or not hasattr(backend_cls, "get_job_by_id"):
        raise MotoChanged("moto.batch.models has no Job.docker_client property or BatchBackend.describe_jobs: "
                          "update tx_scheduler_aws_batch._moto_nodes for this moto")
    # the seam itself: Job.run starts every node through the job's Docker client, named by index
    run_src = inspect.getsource(job_cls.run)  # type: ignore[union-attr]
    for needed in ("self.docker_client.containers.run(", "-{self.job_id}-{i}", "self._log_backend.put_log_events("):
        if needed not in run_src:
            raise MotoChanged(f"moto's Batch Job.run no longer has {needed!r}: the node containers would start "
                              "without the node variables; update tx_scheduler_aws_batch._moto_nodes for this moto")
    from moto.utilities.docker_utilities import DockerModel

    if not (issubclass(job_cls, DockerModel) and "self.__docker_client = docker.from_env()" in  # type: ignore[arg-type]
            inspect.getsource(DockerModel)):
        raise MotoChanged("moto's Batch jobs no longer make their Docker client in DockerModel.docker_client "
                          "with docker.from_env(): update tx_scheduler_aws_batch._moto_nodes for this moto")
    lock = threading.Lock()
    versions: List[str] = []  # the engine's API version, asked for by the first job's client

    def engine_client() -> Any:
        import docker

        if versions:
            return docker.from_env(version=versions[0])
        client = docker.from_env()
        versions.append(str(client.api.api_version))
        return client

    def docker_client(self: Any) -> Any:
        with lock:
            if getattr(self, _CLIENT, None) is None:
                setattr(self, _CLIENT, engine_client())
        client = docker_prop.fget(self)  # type: ignore[misc]
        if getattr(self.job_definition, "node_properties", None) is None:
            return client
        with lock:
            if not hasattr(self, _NODES):
                setattr(self, _NODES, {})
        return _NodeDocker(self, client)

    def describe_jobs(self: Any, jobs: Optional[List[str]]) -> List[Dict[str, Any]]:
        plain = [j for j in jobs or [] if "#" not in j]
        # moto answers every job to an empty list: ask it only when jobs of its own are wanted
        out = describe(self, plain or None) if plain or not jobs else []
        for wanted in jobs or []:
            parent_id, sep, index = wanted.rpartition("#")
            if not sep or not index.isdigit():
                continue
            job = self.get_job_by_id(parent_id)
            props = getattr(getattr(job, "job_definition", None), "node_properties", None)
            if job is not None and props is not None and int(index) < int(props["numNodes"]):
                out.append(node_record(job, int(index)))
        return out

    job_cls.docker_client = property(docker_client)  # type: ignore[union-attr]
    backend_cls.describe_jobs = describe_jobs  # type: ignore[union-attr]


def main(argv: Optional[List[str]] = None) -> None:
    """``moto_server``'s command line (its arguments), with :func:`install` done first."""
    install()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
