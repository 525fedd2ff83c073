"""The portability matrix: one set of apps, run unchanged on every scheduler that can run
here, and what tx says about each, compared with the reference (``local_cwd``).

Backends (each started once per session by its plugin's fixture): local_cwd, local_dir,
local_docker (the private podman engine), slurm (the private cluster), lsf (the private
OpenLava cluster), ray (the private
head), aws_batch (moto in Docker mode over that engine), kubernetes, kubernetes_jobset,
kubernetes_mcad (the fake API server) and gcp_batch (the local Batch server).

Apps (:data:`APPS`): a 2-replica gloo DDP run of examples/train.py; a DDP run whose rank 1
raises; two roles x two replicas writing to stdout and stderr; a retried role (fails once,
then succeeds); an app cancelled while running; a replica killed by a signal. What differs
between backends is only where the program comes from (the image; for containers, this
interpreter mounted read-only) and where the retried role keeps its marker (a place that
replica can see on that backend: a declared bind mount, the cluster's shared file system, or
the backend's attempt counter).

Each column names what ran it (:data:`BACKEND_KINDS`): a real backend, an emulator (moto), or
tx's own test server (the Kubernetes and GCP Batch columns); the page says so, and marks every
cell that no real cluster has confirmed.

The apps are run as users run them: submitted with :meth:`tx.runner.Runner.run`, each waited
for by its own :meth:`tx.runner.Runner.wait` (as ``tx run`` waits, copying the logs into tx's log
archive once a second, ``[tx:logs] interval``), and their logs read with
:meth:`tx.runner.Runner.log_lines`, what ``tx log`` prints, the archive included. A stream the
backend does not keep (``ValueError``) and an app the backend no longer knows are answers;
any other exception while measuring fails the test.

Per backend and app each aspect (:data:`ASPECTS`) is measured as a category, never a timing:
the final state, ``structured_error_msg`` (does it name the root cause), the per-replica
logs (order, streams, only that replica's lines), ``describe`` (the whole AppDef back),
``list`` (the app appears, in the same state). Per backend: cancel (CANCELLED, a second
cancel is a no-op) and whether the backend's free capacity is back where it was once every
app ended (:data:`RELEASE`). Some backends and apps are checked beyond their cells
(:data:`CHECKS`: the failed rank's cause field by field; local_docker's DDP in two containers).

The matrix is rendered to docs/portability.md. Each backend's test fails when the rows it
measured differ from the checked-in document (regenerate with ``TX_UPDATE_PORTABILITY=1``,
the command is in the document's header), or when a cell differs from local_cwd's without
an explanation in tests/portability_explained.json (``differences``), or when an app is
not run on a backend without a reason there (``not_run``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import attrs
import pytest

from tx.components.dist import ddp
from tx.runner import get_runner
from tx.schedulers import get_scheduler_factories
from tx.specs import AppDef, AppState, BindMount, Resource, Role, is_terminal, parse_app_handle
from tx.testing.backends import backend_unavailable, free_port

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "portability.md"
EXPLAINED = Path(__file__).with_name("portability_explained.json")
UPDATE = os.environ.get("TX_UPDATE_PORTABILITY") == "1"
REFERENCE = "local_cwd"
BACKENDS = ("local_cwd", "local_dir", "local_docker", "slurm", "lsf", "ray", "aws_batch", "kubernetes",
            "kubernetes_jobset", "kubernetes_mcad", "gcp_batch")
APPS = ("ddp", "ddp_fail", "logs", "retry", "cancel", "signal")
ASPECTS = ("state", "why failed", "logs", "describe", "list")
#: per backend: cancel and the capacity it gives back
BACKEND_ASPECTS = ("cancel", "capacity back")
#: seconds every app of one backend may take, together, to end
TIMEOUT = 300.0
#: what ran each column: (kind, what exactly); a kind other than "real" marks its cells as
#: confirmed by no real cluster
REAL, EMULATOR, TEST_SERVER = "real", "emulator", "tx's own test server"
BACKEND_KINDS: Dict[str, Tuple[str, str]] = {
    "local_cwd": (REAL, "local processes (tx's supervisor)"),
    "local_dir": (REAL, "local processes (tx's supervisor)"),
    "local_docker": (REAL, "podman's Docker-compatible API (a private engine)"),
    "slurm": (REAL, "Slurm from Debian's packages (a private slurmctld with slurmd nodes)"),
    "lsf": (REAL, "OpenLava 4, an LSF-compatible batch system built from source (a private one-host cluster)"),
    "ray": (REAL, "a private Ray head (pinned ray[default])"),
    "aws_batch": (EMULATOR, "moto's Batch and CloudWatch Logs in Docker mode over the podman engine"),
    "kubernetes": (TEST_SERVER, "fakekube: an API server that validates Volcano Jobs against their CRD "
                   "schema and runs pods as local processes"),
    "kubernetes_jobset": (TEST_SERVER, "fakekube with the JobSet and Kueue CRDs"),
    "kubernetes_mcad": (TEST_SERVER, "fakekube with the MCAD AppWrapper CRD"),
    "gcp_batch": (TEST_SERVER, "fake_gcp: the Batch v1 and Cloud Logging REST APIs, tasks run as local processes"),
}
#: the mark on a cell measured against an emulator or tx's own test server
UNCONFIRMED = " †"
BIN = os.path.dirname(sys.executable)

APP_TITLES = {
    "ddp": "2-replica gloo DDP (examples/train.py, 1 epoch, no per-epoch checkpoint)",
    "ddp_fail": "DDP whose rank 1 raises",
    "logs": "two roles x two replicas writing to stdout and stderr",
    "retry": "a role that fails once, then succeeds (max_retries=1)",
    "cancel": "cancelled while running",
    "signal": "a replica killed by SIGKILL",
}

FAIL_SCRIPT = '''\
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise RuntimeError("matrix rank 1 fails on purpose")
dist.barrier()
'''
FAIL_LINE = FAIL_SCRIPT.splitlines().index('    raise RuntimeError("matrix rank 1 fails on purpose")') + 1

#: each replica of the logs app: 3 lines to stdout and 3 to stderr, alternating
LOG_SCRIPT = ('for i in 1 2 3; do echo "out ${TX_ROLE_NAME} ${replica_id} $i"; '
              'echo "err ${TX_ROLE_NAME} ${replica_id} $i" >&2; done')
#: the retried role: fails on its first attempt (3 s after its line: tx's log archive, copying
#: once a second, has it before the backend may drop it), succeeds on the next; the marker is a file
#: in $MARK_DIR (a place the replica can see on that backend) or the backend's own attempt
#: counter (GCP Batch: BATCH_TASK_RETRY_ATTEMPT; AWS Batch: AWS_BATCH_JOB_ATTEMPT, from 1)
RETRY_SCRIPT = ('if [ -e "$MARK_DIR/${app_id}" ] || [ "${BATCH_TASK_RETRY_ATTEMPT:-0}" -ge 1 ] '
                '|| [ "${AWS_BATCH_JOB_ATTEMPT:-1}" -ge 2 ]; then echo "attempt 2"; exit 0; fi; '
                'touch "$MARK_DIR/${app_id}" 2>/dev/null; echo "attempt 1"; sleep 3; exit 3')


# -- backends ------------------------------------------------------------------------------------
@attrs.define
class Env:
    """How one backend runs the apps: its scheduler, run options, the image, the mounts that
    make this interpreter usable in its containers (empty where replicas run on the host),
    whether the retried role's marker directory is mounted, and how to read its free
    capacity (:data:`RELEASE`)."""

    name: str
    scheduler: Any
    cfg: Dict[str, Any]
    image: str
    python_mounts: List[str]
    mount_marker: bool
    ws: Path
    capacity: Callable[[], Any]
    extra: Dict[str, Any] = attrs.field(factory=dict)
    #: the Runner the apps are run, waited for and read with (its scheduler is ``scheduler``)
    runner: Any = None
    #: app id -> app handle
    handles: Dict[str, str] = attrs.field(factory=dict)


def _python_mounts() -> List[str]:
    """/usr, the base prefix and this environment, read-only at the same paths."""
    out = []
    for p in dict.fromkeys(os.path.realpath(x) for x in ("/usr", sys.base_prefix, sys.prefix)):
        if p == "/usr" or not p.startswith("/usr/"):
            out.append(f"type=bind,src={p},dst={p},readonly")
    return out


def _local_capacity(app_ids: List[str]) -> Any:
    from tx_scheduler_local import _procs

    live = [p for a in app_ids for p in _procs.pids_with_env([f"TX_APP_ID={a}".encode()]) if _procs.is_alive(p)]
    return {"live replica processes": len(live)}


def _containers() -> Any:
    import docker

    client = docker.DockerClient(base_url=os.environ["DOCKER_HOST"], timeout=60)
    try:
        return {"running containers": len(client.containers.list())}
    finally:
        client.close()


def _slurm_capacity() -> Any:
    import subprocess

    # partition debug's nodes: down1 (partition down) turns down* when a ping fails, at any time
    p = subprocess.run(["sinfo", "--noheader", "--Node", "--partition=debug", "--format=%N %t"], capture_output=True,
                       text=True, timeout=30)
    states = sorted(set(p.stdout.split("\n")) - {""})
    q = subprocess.run(["squeue", "--noheader", "--format=%i"], capture_output=True, text=True, timeout=30)
    return {"nodes": states, "jobs in queue": len(q.stdout.split())}


def _lsf_capacity() -> Any:
    import subprocess

    q = subprocess.run(["bjobs", "-u", "all", "-noheader", "-w"], capture_output=True, text=True, timeout=30)
    h = subprocess.run(["bhosts", "-w"], capture_output=True, text=True, timeout=30)
    return {"unfinished jobs": len(q.stdout.splitlines()),
            "hosts": sorted(" ".join(ln.split()[:2]) for ln in h.stdout.splitlines()[1:] if ln.strip())}


def _ray_capacity() -> Any:
    from ray.util.state import list_actors, list_placement_groups

    address = os.environ["RAY_ADDRESS"]
    import requests

    status = requests.get(f"{address}/api/cluster_status", timeout=10).json()
    usage = (status.get("data", {}).get("clusterStatus", {}).get("loadMetricsReport", {}) or {}).get("usage", {})
    used_cpu = (usage.get("CPU") or [0, 0])[0]
    pgs = [p for p in list_placement_groups(address=address, limit=1000) if p.state != "REMOVED"]
    actors = [a for a in list_actors(address=address, limit=1000) if a.state == "ALIVE"]
    return {"CPUs in use": used_cpu, "placement groups": len(pgs), "live actors": len(actors)}


def _k8s_capacity(kubeconfig: str) -> Any:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    pods = api.list_namespaced_pod("default").items  # the namespace tx submits to
    return {"pods not ended": len([p for p in pods if p.status.phase not in ("Succeeded", "Failed")])}


def _gcp_capacity(server: Any) -> Any:
    return {"running task processes": len(server.running_tasks())} if hasattr(server, "running_tasks") else {}


def _aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, moto: Any) -> None:
    for var in ("AWS_PROFILE", "AWS_REGION", "AWS_ENDPOINT_URL_BATCH", "AWS_ENDPOINT_URL_LOGS",
                "AWS_SESSION_TOKEN", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for k, v in moto.env().items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    """The backend named by the test's parameter, started by its plugin's session fixture."""
    name: str = request.param
    factories = get_scheduler_factories()
    if name not in factories:
        backend_unavailable(name, "its plugin is not installed: pip install -e plugins/<its plugin>")
    ws = tmp_path / "ws"
    (ws / "marks").mkdir(parents=True)
    shutil.copy(REPO / "examples" / "train.py", ws / "train.py")
    (ws / "fail.py").write_text(FAIL_SCRIPT)
    image, mounts, cfg, mark = "", [], {}, False
    capacity: Callable[[], Any] = dict
    monkeypatch.chdir(tmp_path)  # local_cwd's working directory; Ray's uploaded working_dir
    extra: Dict[str, Any] = {}
    # tx's state (the log archive among it) is the test's own; the archive copies a waited-for
    # app's logs once a second (the retried role's first attempt outlives that: RETRY_SCRIPT)
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "txconfig").write_text("[tx:logs]\ninterval = 1s\n")
    monkeypatch.setenv("TXCONFIG", str(tmp_path / "txconfig"))
    if name in ("local_cwd", "local_dir"):
        cfg = {"log_dir": str(tmp_path / "logs")}
        if name == "local_dir":
            image = str(tmp_path / "image")
            os.makedirs(image)
        sched = factories[name]("txmatrix")
        capacity = lambda: _local_capacity(extra.get("app_ids", []))  # noqa: E731
    elif name == "local_docker":
        request.getfixturevalue("podman_engine")
        sched = factories[name]("txmatrix")
        image, mounts, mark = "localhost/busybox:tx", _python_mounts(), True
        cfg = {"quiet": True}
        capacity = _containers
    elif name == "slurm":
        request.getfixturevalue("slurm_cluster")
        sched = factories[name]("txmatrix")
        cfg = {"job_dir": str(tmp_path / "job")}
        capacity = _slurm_capacity
    elif name == "lsf":
        request.getfixturevalue("lsf_cluster")
        sched = factories[name]("txmatrix")
        cfg = {"jobdir": str(tmp_path / "job")}
        capacity = _lsf_capacity
    elif name == "ray":
        request.getfixturevalue("ray_head")
        sched = factories[name]("txmatrix")
        image = str(tmp_path / "image")
        os.makedirs(image)
        capacity = _ray_capacity
    elif name == "aws_batch":
        moto = request.getfixturevalue("moto_docker")
        _aws_env(monkeypatch, tmp_path, moto)
        sched = factories[name]("txmatrix", poll_interval=0.5)
        image, mounts, mark = "localhost/busybox:tx", _python_mounts(), True
        cfg = {"queue": moto.queue}
        capacity = _containers
    elif name.startswith("kubernetes"):
        cluster = request.getfixturevalue("fake_cluster")
        if cluster["no_dns"]:  # DDP's replicas meet at rank 0's Service name
            backend_unavailable("kubernetes (pod DNS)", cluster["no_dns"])
        sched = factories[name]("txmatrix")
        image, mounts, mark = "busybox:1.36", _python_mounts(), True
        cfg = {"kubernetes": {"queue": "default"}, "kubernetes_jobset": {"queue": "user-queue"}}.get(name, {})
        capacity = lambda: _k8s_capacity(cluster["kubeconfig"])  # noqa: E731
    elif name == "gcp_batch":
        server = request.getfixturevalue("fake_gcp")
        monkeypatch.setenv("PATH", BIN + os.pathsep + os.environ["PATH"])  # the tasks run on this host
        sched = factories[name]("txmatrix")
        image = "ghcr.io/pytorch/torchx:0.7.0"
        capacity = lambda: _gcp_capacity(server)  # noqa: E731
    else:  # pragma: no cover - BACKENDS and this function list the same names
        raise AssertionError(name)
    runner = get_runner("txmatrix")
    runner._scheduler_instances[name] = sched  # TorchX's way to hand a Runner a scheduler
    env = Env(name, sched, cfg, image, mounts, mark, ws, capacity, extra, runner)
    try:
        yield env
    finally:
        runner.close()  # closes the scheduler


# -- apps ------------------------------------------------------------------------------------------
def _sh(name: str, script: str, be: Env, replicas: int = 1, **kw: Any) -> Role:
    kw.setdefault("resource", Resource(cpu=1, gpu=0, memMB=64))
    return Role(name, image=be.image, entrypoint="sh", args=["-c", script], num_replicas=replicas, **kw)


def make_app(app: str, env: Env) -> AppDef:
    """The app ``app`` as ``env``'s backend runs it (only the image and mounts differ)."""
    py_env = {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"}
    ws = [f"type=bind,src={env.ws},dst={env.ws}"] if env.python_mounts else []
    if app in ("ddp", "ddp_fail"):
        script, args = (("train.py", ["--epochs", "1", "--checkpoint-dir", "", "--output-dir", str(env.ws / "out")]) if app == "ddp"
                        else ("fail.py", []))
        a = ddp(*args, script=str(env.ws / script), image=env.image, j="2x1", cpu=1, memMB=1024, env=py_env,
                mounts=env.python_mounts + ws, rdzv_port=free_port(), rdzv_conf="join_timeout=120")
        a.name = app.replace("_", "")
        return a
    if app == "logs":
        return AppDef("logs", roles=[_sh("alpha", LOG_SCRIPT, env, 2), _sh("beta", LOG_SCRIPT, env, 2)])
    if app == "retry":
        marks = env.ws / "marks"
        mounts = [BindMount(str(marks), str(marks))] if env.mount_marker else []
        return AppDef("retry", roles=[_sh("flaky", RETRY_SCRIPT, env, max_retries=1, mounts=mounts,
                                          env={"MARK_DIR": str(marks)})])
    if app == "cancel":
        return AppDef("cancel", roles=[_sh("sleeper", "echo started; exec sleep 600", env)])
    if app == "signal":
        # $$$$: the shell's $$ once tx's macro substitution turned "$$" into "$"
        return AppDef("signal", roles=[_sh("victim", 'echo "before the signal"; kill -9 $$$$', env)])
    raise AssertionError(app)


# -- measuring -------------------------------------------------------------------------------------
def _said(text: Optional[str]) -> bool:
    return bool(text and text.strip() and text != "<NONE>")


def why_category(app: str, desc: Any) -> str:
    """What ``structured_error_msg`` says, as a category."""
    msg = desc.structured_error_msg if _said(desc.structured_error_msg) else ""
    if not msg:
        return "none"
    if app == "ddp_fail":
        if "RuntimeError" in msg and "matrix rank 1 fails on purpose" in msg:
            return "names rank 1's exception" if re.search(r"rank 1\b", msg) else "names the exception"
        if "=====" in msg:
            return "torchrun's banner"
        if re.search(r"exit(ed)? (with )?code|exit status", msg):
            return "exit code only"
        return "other text"
    if app == "signal":
        if "SIGKILL" in msg or re.search(r"signal 9\b", msg):
            return "names SIGKILL"
        if "137" in msg:
            return "exit code 137"
        if re.search(r"code -9\b", msg):
            return "exit code -9"
        return "other text"
    if app == "cancel":
        return "says cancelled" if "cancel" in msg.lower() else "other text"
    return "a message"


def read(env: Env, app_id: str, role: str, k: int, stream: Optional[str]) -> Optional[List[str]]:
    """The replica's lines as ``tx log HANDLE/role/k [--streams stream]`` prints them
    (:meth:`tx.runner.Runner.log_lines`: the backend's log, else tx's log archive; ``stream``
    None: the default stream); None where the backend keeps no such stream, ``[]`` where
    neither the backend nor the archive knows the app any more. Any other exception is raised:
    a crash is never a cell."""
    from tx.specs import UnknownAppException

    handle = env.handles.get(app_id) or f"{env.name}://txmatrix/{app_id}"
    try:
        return [ln.rstrip("\n") for ln in env.runner.log_lines(handle, role, k, streams=stream)]
    except ValueError as e:
        if "stream" not in str(e):
            raise
        return None  # a stream the backend does not keep: an answer (tx log says so in one line)
    except UnknownAppException:
        return []


def _subseq(want: List[str], got: List[str]) -> bool:
    it = iter(got)
    return all(any(g == w for g in it) for w in want)


def logs_category(app: str, env: Env, app_id: str, desc: Any) -> str:
    """What the replicas' logs show, as a category."""
    if app == "logs":
        cats = set()
        for role in ("alpha", "beta"):
            for k in (0, 1):
                out = [f"out {role} {k} {i}" for i in (1, 2, 3)]
                err = [f"err {role} {k} {i}" for i in (1, 2, 3)]
                so, se = read(env, app_id, role, k, "stdout"), read(env, app_id, role, k, "stderr")
                comb = read(env, app_id, role, k, "combined")
                apart = so is not None and se is not None and [x for x in so if x.startswith(("out ", "err "))] == out \
                    and [x for x in se if x.startswith(("out ", "err "))] == err
                if comb is None:
                    c = "no combined log"
                else:
                    mine = [x for x in comb if x.startswith(("out ", "err "))]
                    if any(not x.split()[1:3] == [role, str(k)] for x in mine):
                        c = "combined holds other replicas' lines"
                    elif _subseq(out, mine) and _subseq(err, mine) and len(mine) == 6:
                        c = "combined: each stream in order"
                    else:
                        c = "combined: lines missing or out of order"
                cats.add(("stdout and stderr apart; " if apart else "no separate streams; ") + c)
                print(f"{env.name} logs {role}/{k}: stdout {so!r} stderr {se!r} combined {comb!r}")
        return " / ".join(sorted(cats))
    # torchrun's c10d rendezvous picks the node ranks: rank 0 (1) may be either replica
    want = {
        "ddp": ("train", (0, 1), "world_size=2 test_accuracy="),
        "ddp_fail": ("fail", (0, 1), "RuntimeError: matrix rank 1 fails on purpose"),
        "retry": ("flaky", (0,), None),
        "cancel": ("sleeper", (0,), "started"),
        "signal": ("victim", (0,), "before the signal"),
    }[app]
    role, replicas, needle = want
    lines: Optional[List[str]] = None
    for k in replicas:
        got = read(env, app_id, role, k, None)  # `tx log HANDLE/role/k`, as typed
        if got is not None:
            lines = (lines or []) + got
    if lines is None:  # neither the backend nor tx's log archive has any replica's log
        return "no log"
    if not lines:  # `tx log` printed nothing: the default stream is empty
        return "empty log"
    if app == "retry":
        got = [ln for ln in lines if ln.startswith("attempt ")]
        return {("attempt 1", "attempt 2"): "both attempts", ("attempt 2",): "last attempt only"}.get(
            tuple(got), f"attempts: {', '.join(got) or 'none'}")
    return "has the line" if any(needle in ln for ln in lines) else "the line is missing"


def describe_category(submitted: AppDef, desc: Any) -> str:
    """Whether ``describe`` gives the whole AppDef back; else which fields differ."""
    back = getattr(desc, "app", None)
    if back is None:
        return "no AppDef (roles only)" if desc.roles else "no AppDef"
    a, b = attrs.asdict(submitted, recurse=True), attrs.asdict(back, recurse=True)
    diff: List[str] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for key in sorted(set(x) | set(y), key=str):
                walk(x.get(key), y.get(key), f"{path}.{key}" if path else str(key))
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (p, q) in enumerate(zip(x, y)):
                walk(p, q, f"{path}[]")
        elif x != y:
            diff.append(path)

    walk(a, b, "")
    diff = sorted(set(re.sub(r"^roles\[\]\.(env|metadata)\..*$", r"roles[].\1", d) for d in diff))
    return "whole AppDef" if not diff else "differs: " + ", ".join(diff)


def list_category(env: Env, app_id: str, desc: Any) -> str:
    listed = {a.app_id: a.state for a in env.scheduler.list()}
    if app_id not in listed:
        return "not listed"
    if desc is None:
        return f"listed as {listed[app_id].name}"
    return "listed, same state" if listed[app_id] == desc.state else f"listed as {listed[app_id].name}"


def check_cause(env: Env, app_id: str, desc: Any) -> None:
    """ddp_fail, beyond its cell: the cause tx read, field by field (rank, exception, where it
    was raised, exit code), the one line made from it, and the failed replica's status carrying
    the same line and cause.

    Raises:
        AssertionError: where any of them differs.
    """
    c = desc.root_cause
    assert c is not None, f"{env.name} {app_id}: no root_cause ({desc.structured_error_msg!r})"
    got = (c.rank, c.exception_type, c.message, os.path.basename(c.file), c.line, c.exit_code)
    assert got == (1, "RuntimeError", "matrix rank 1 fails on purpose", "fail.py", FAIL_LINE, 1), (env.name, c)
    line = f"fail/{c.replica} rank 1: RuntimeError: matrix rank 1 fails on purpose at fail.py:{FAIL_LINE} (exit code 1)"
    assert desc.structured_error_msg == c.text == line, (env.name, desc.structured_error_msg, c)
    rep = [r for rs in desc.roles_statuses if rs.role == c.role for r in rs.replicas if r.id == c.replica]
    assert len(rep) == 1 and rep[0].structured_error_msg == line and rep[0].root_cause == c, (env.name, rep)


def check_containers(env: Env, app_id: str, desc: Any) -> None:
    """ddp on local_docker, beyond its cell: the two replicas ran in two containers, each
    told the name of replica 0's (``TX_RANK0_HOST``, where torchrun's store runs), and an
    all-reduce across them carried both ranks' test samples (225 each: 450).

    Raises:
        AssertionError: where any of them differs.
    """
    import docker
    from tx_scheduler_docker.request import LABEL_APP_ID

    hosts = {r.id: r.hostname for rs in desc.roles_statuses for r in rs.replicas}
    assert len(hosts) == 2 and len(set(hosts.values())) == 2 and all(hosts.values()), hosts
    client = docker.DockerClient(base_url=os.environ["DOCKER_HOST"], timeout=60)
    try:
        containers = client.containers.list(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
        envs = [dict(e.split("=", 1) for e in c.attrs["Config"]["Env"]) for c in containers]
    finally:
        client.close()
    assert len(envs) == 2 and all(e.get("TX_RANK0_HOST") == hosts[0] for e in envs), (hosts, envs)
    lines = [ln for k in (0, 1) for ln in read(env, app_id, "train", k, "combined") or []]
    assert any(re.search(r"world_size=2 test_accuracy=\S+ test_samples=450 ", ln) for ln in lines), lines


#: checks beyond the cells, per (backend, app): what local_docker's own DDP tests checked before
#: the matrix ran these apps there (two containers; the failed rank named field by field), and
#: the same cause on the local schedulers; the other backends' plugins check the cause in their
#: own DDP tests
CHECKS: Dict[Tuple[str, str], Callable[[Env, str, Any], None]] = {
    **{(b, "ddp_fail"): check_cause for b in ("local_cwd", "local_dir", "local_docker", "slurm", "lsf", "ray", "kubernetes",
                                              "kubernetes_jobset", "kubernetes_mcad", "gcp_batch")},
    ("local_docker", "ddp"): check_containers,
}


def wait_until(pred: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(interval)


def run_matrix(env: Env, not_run: Dict[str, str]) -> Tuple[Dict[str, Dict[str, str]], Dict[str, str]]:
    """Run every app on ``env`` at once, as users run them (:meth:`tx.runner.Runner.run`, one
    :meth:`tx.runner.Runner.wait` each, in threads, as ``tx run`` waits); returns
    ({app: {aspect: cell}}, {backend aspect: cell})."""
    import threading

    before = env.capacity()
    infos = {a: env.runner.dryrun(make_app(a, env), env.name, env.cfg) for a in APPS if a not in not_run}
    apps = {a: info._app for a, info in infos.items()}  # what was submitted, tx's env included
    ids = {}
    for a, info in infos.items():
        handle = env.runner.schedule(info)
        ids[a] = parse_app_handle(handle)[2]
        env.handles[ids[a]] = handle
    env.extra["app_ids"] = list(ids.values())
    assert env.runner.log_archive is not None  # made once, before the threads use it
    waited: Dict[str, Any] = {}

    def wait(a: str) -> None:
        try:
            waited[a] = env.runner.wait(env.handles[ids[a]], wait_interval=0.5, timeout=TIMEOUT)
        except BaseException as e:  # noqa: BLE001 - raised in the test's thread below
            waited[a] = e

    waiters = [threading.Thread(target=wait, args=(a,), name=f"wait-{a}") for a in ids]
    for t in waiters:
        t.start()
    cells: Dict[str, Dict[str, str]] = {}
    # cancel: once running
    started = "cancel" not in ids or wait_until(lambda: (d := env.scheduler.describe(ids["cancel"])) is not None
                         and d.state in (AppState.RUNNING, *[s for s in AppState if is_terminal(s)]), TIMEOUT / 2)
    assert started, f"{env.name}: the cancel app never ran"
    if "cancel" in ids and env.name != "aws_batch":  # moto writes a container's log when it ends
        # RUNNING may come before the replica's program does (Slurm: the batch script runs, the
        # step not yet): cancel once its first line is there, so the app was really running
        wait_until(lambda: any("started" in ln for ln in read(env, ids["cancel"], "sleeper", 0, "combined")
                               or read(env, ids["cancel"], "sleeper", 0, "stdout") or []), 60)
    if "cancel" in ids:
        env.runner.cancel(env.handles[ids["cancel"]])
    for t in waiters:
        t.join()
    for a, w in waited.items():
        if isinstance(w, BaseException):
            raise AssertionError(f"{env.name} {a}: Runner.wait raised {w!r}") from w
    descs = {a: env.scheduler.describe(i) for a, i in ids.items()}
    for a, d in descs.items():
        assert (d is None and a == "cancel") or (d is not None and is_terminal(d.state)), f"{env.name} {a} {ids[a]}: {d}"
    try:
        env.scheduler.cancel(ids["cancel"])
        again = env.scheduler.describe(ids["cancel"])
        first = descs["cancel"].state.name if descs["cancel"] is not None else "gone (describe: None)"
        cancel = ("CANCELLED; cancelling again is a no-op" if again is not None and again.state == AppState.CANCELLED
                  else f"{first}; after a second cancel: {again.state.name if again is not None else 'gone'}")
    except Exception as e:  # noqa: BLE001 - the cell says what cancel did
        cancel = f"second cancel raised {type(e).__name__}"
    for a, d in descs.items():
        if d is None:  # cancel deleted the app
            cells[a] = {"state": "gone (describe: None)", "why failed": "none", "logs": logs_category(a, env, ids[a], d),
                        "describe": "None", "list": list_category(env, ids[a], d)}
            continue
        print(f"{env.name} {a} {ids[a]}: {d.state.name}; structured_error_msg: {d.structured_error_msg!r}")
        cells[a] = {
            "state": d.state.name,
            "why failed": why_category(a, d),
            "logs": logs_category(a, env, ids[a], d),
            "describe": describe_category(apps[a], d),
            "list": list_category(env, ids[a], d),
        }
        check = CHECKS.get((env.name, a))
        if check is not None:
            check(env, ids[a], d)
    released = wait_until(lambda: env.capacity() == before, 60)
    after = env.capacity()
    capacity = "back to where it was" if released else f"held: {after} (before: {before})"
    return cells, {"cancel": cancel, "capacity back": capacity}


# -- the document ----------------------------------------------------------------------------------
HEADER = """\
# Portability matrix

<!-- Generated by tests/test_portability.py from what the run measured; do not edit by hand.
Regenerate (every backend that can run here; a run of some backends, -k NAME, rewrites their rows):
    TX_UPDATE_PORTABILITY=1 hatch run test:all tests/test_portability.py
Differences from local_cwd are explained in tests/portability_explained.json. -->

One set of apps, run unchanged by `tests/test_portability.py` on every scheduler that can run
on the test machine, and what tx says about each, the apps run, waited for and read as users
do (`Runner.run`, `Runner.wait` as `tx run` waits, logs as `tx log` prints them, tx's log
archive included). Every cell is a category, not a timing; a cell that differs from the
reference (`local_cwd`) is marked with `*` and explained below, and a cell measured against
an emulator or tx's own test server rather than the real backend is marked with `†`.
Regenerate with `TX_UPDATE_PORTABILITY=1 hatch run test:all tests/test_portability.py`: the
test fails where what it measured differs from this page, or where a difference has no
explanation (it then lists them; write each in tests/portability_explained.json and run it
again). Regenerating drops the explanations of cells that no longer differ.

What differs between backends is only where the program comes from (the image; for
containers, this interpreter mounted read-only at its own path) and where the retried role
keeps its marker: a place that replica can see on that backend (a declared bind mount or
hostPath volume, the file system that local processes, Slurm's nodes and the one-node Ray
head share) or the backend's own attempt counter (GCP Batch's BATCH_TASK_RETRY_ATTEMPT).
"""


def render(rows: Dict[str, Dict[str, Dict[str, str]]], explained: Dict[str, Any]) -> str:
    """The document for ``rows`` ({backend: {app or "backend": {aspect: cell}}})."""
    ref = rows.get(REFERENCE, {})
    notes: List[str] = []
    out = [HEADER]

    def cell(b: str, group: str, aspect: str) -> str:
        v = rows.get(b, {}).get(group, {}).get(aspect, "not measured")
        mark = "" if b == REFERENCE or v in ("not measured", ref.get(group, {}).get(aspect)) else " *"
        if BACKEND_KINDS[b][0] != REAL and v != "not measured":
            mark += UNCONFIRMED
        return v.replace("|", "\\|") + mark

    out.append("\n## What ran each column\n")
    out.append("Cells of a column that did not run on the real backend are marked †: what they say was "
               "measured against an emulator or tx's own test server, and no real cluster has confirmed it.\n")
    out.append("| backend | ran on | kind |")
    out.append("|---|---|---|")
    for b in BACKENDS:
        kind, what = BACKEND_KINDS[b]
        out.append(f"| {b} | {what} | {kind} |")

    for app in APPS:
        out.append(f"\n## {app}: {APP_TITLES[app]}\n")
        out.append("| backend | " + " | ".join(ASPECTS) + " |")
        out.append("|---" * (len(ASPECTS) + 1) + "|")
        for b in BACKENDS:
            out.append(f"| {b} | " + " | ".join(cell(b, app, asp) for asp in ASPECTS) + " |")
    out.append("\n## Cancel, and what each backend gives back\n")
    out.append("After every app above ended or was cancelled, the backend's free capacity is compared with "
               "what it was before they started (local: replica processes; podman: running containers; Slurm: "
               "node states and queue; Ray: CPUs in use, placement groups, live actors; Kubernetes: pods not "
               "ended; GCP Batch: task processes).\n")
    out.append("| backend | " + " | ".join(BACKEND_ASPECTS) + " |")
    out.append("|---" * (len(BACKEND_ASPECTS) + 1) + "|")
    for b in BACKENDS:
        out.append(f"| {b} | " + " | ".join(cell(b, "backend", asp) for asp in BACKEND_ASPECTS) + " |")
    out.append("\n## Why the cells marked * differ\n")
    for b in BACKENDS:
        for app, why in sorted(explained.get("not_run", {}).get(b, {}).items()):
            notes.append(f"- **{b}, {app}**: not run here: {why}")
        for group, aspects in sorted(explained.get("differences", {}).get(b, {}).items()):
            for aspect, e in sorted(aspects.items()):
                notes.append(f"- **{b}, {group}, {aspect}** (`{e['cell']}`): {e['why']}")
    out.extend(notes or ["(none)"])
    return "\n".join(out) + "\n"


def parse(text: str) -> Dict[str, Dict[str, Dict[str, str]]]:
    """The rows of a document :func:`render` wrote."""
    rows: Dict[str, Dict[str, Dict[str, str]]] = {}
    group, aspects = None, ASPECTS
    for line in text.splitlines():
        m = re.match(r"## (\w+): ", line)
        if m and m.group(1) in APPS:
            group, aspects = m.group(1), ASPECTS
        elif line.startswith("## Cancel"):
            group, aspects = "backend", BACKEND_ASPECTS
        elif line.startswith("## "):
            group = None
        elif group and line.startswith("| ") and not line.startswith("| backend"):
            parts = [p.strip() for p in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            b, vals = parts[0], [re.sub(r"( \*)?( †)?$", "", v).replace("\\|", "|") for v in parts[1:]]
            got = {k: v for k, v in zip(aspects, vals) if v != "not measured"}
            if b in BACKENDS and len(vals) == len(aspects) and got:
                rows.setdefault(b, {})[group] = got
    return rows


def load_explained() -> Dict[str, Any]:
    return json.loads(EXPLAINED.read_text())


def check_and_record(name: str, measured: Dict[str, Dict[str, str]]) -> None:
    """Compare ``name``'s measured rows with docs/portability.md and the explanations; with
    TX_UPDATE_PORTABILITY=1 write them (and drop explanations no longer needed) instead."""
    explained = load_explained()
    old = DOC.read_text() if DOC.exists() else ""
    rows = parse(old)
    rows[name] = measured
    ref = rows.get(REFERENCE, {})
    diffs = explained.setdefault("differences", {})
    mine = diffs.get(name, {})
    unexplained, stale = [], []
    not_run = explained.get("not_run", {}).get(name, {})
    for group, aspects in measured.items():
        if group in not_run:
            continue
        for aspect, v in aspects.items():
            e = mine.get(group, {}).get(aspect)
            differs = name != REFERENCE and v != ref.get(group, {}).get(aspect)
            if differs and (e is None or e.get("cell") != v):
                unexplained.append(f"{name}, {group}, {aspect}: {v!r} (local_cwd: {ref.get(group, {}).get(aspect)!r})")
            elif not differs and e is not None:
                stale.append((group, aspect))
    if UPDATE:
        for group, aspect in stale:
            del mine[group][aspect]
            if not mine[group]:
                del mine[group]
        if name in diffs and not diffs[name]:
            del diffs[name]
        EXPLAINED.write_text(json.dumps(explained, indent=2, sort_keys=True) + "\n")
        DOC.write_text(render(rows, explained))
    else:
        assert not unexplained, ("cells that differ from local_cwd without an explanation in "
                                 f"{EXPLAINED.name} ('differences'):\n" + "\n".join(unexplained))
        new = render(rows, explained)
        if new != old:
            changed = [f"{name}, {g}, {a}: doc {parse(old).get(name, {}).get(g, {}).get(a)!r}, measured {v!r}"
                       for g, asp in measured.items() for a, v in asp.items()
                       if parse(old).get(name, {}).get(g, {}).get(a) != v]
            pytest.fail("docs/portability.md differs from what this run measured (regenerate with "
                        "TX_UPDATE_PORTABILITY=1 hatch run test:all tests/test_portability.py):\n" + "\n".join(changed or ["(text)"]),
                        pytrace=False)
        assert not stale, f"explanations for cells that no longer differ: {stale} (TX_UPDATE_PORTABILITY=1 drops them)"
    assert not unexplained, ("cells that differ from local_cwd without an explanation in "
                             f"{EXPLAINED.name} ('differences'):\n" + "\n".join(unexplained))


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_portability(backend: Env) -> None:
    """Every app on this backend, measured and compared with docs/portability.md."""
    not_run = load_explained().get("not_run", {}).get(backend.name, {})
    cells, per_backend = run_matrix(backend, not_run)
    for app in not_run:
        cells[app] = {aspect: "not run (see below)" for aspect in ASPECTS}
    cells["backend"] = per_backend
    check_and_record(backend.name, cells)


def test_explanations_name_real_cells() -> None:
    """Every explanation names a backend, an app (or ``backend``) and an aspect that exist,
    and says something."""
    explained = load_explained()
    for b, apps in explained.get("not_run", {}).items():
        assert b in BACKENDS and set(apps) <= set(APPS) and all(len(w) > 20 for w in apps.values()), (b, apps)
    for b, groups in explained.get("differences", {}).items():
        assert b in BACKENDS and b != REFERENCE, b
        for g, aspects in groups.items():
            assert g in (*APPS, "backend"), g
            for a, e in aspects.items():
                assert a in (*ASPECTS, *BACKEND_ASPECTS) and e["cell"] and len(e["why"]) > 20, (b, g, a, e)


def test_parse_reads_back_what_render_writes() -> None:
    rows = {"local_cwd": {"ddp": {a: f"v {a} |x" for a in ASPECTS}, "backend": {a: "ok" for a in BACKEND_ASPECTS}},
            "ray": {"logs": {a: "w" for a in ASPECTS}}, "gcp_batch": {"retry": {a: "g" for a in ASPECTS}}}
    text = render(rows, {})
    assert parse(text) == rows
    # a column measured against tx's own test server is marked in every cell it has, and named
    assert "| gcp_batch | g * † | g * † |" in text  # differs from local_cwd (*), not a real backend (†)
    assert "| gcp_batch | fake_gcp:" in text and "| ray | a private Ray head (pinned ray[default]) | real |" in text
