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

from portability_probes import (  # tests/portability_probes.py
    container_said, containers, gcp_capacity, k8s_capacity, local_capacity, lsf_capacity, ray_capacity, slurm_capacity)
from portability_matrix import (  # tests/portability_matrix.py (pytest.ini: pythonpath)
    APPS, ASPECTS, BACKENDS, REPO, check_and_record, describe_category, load_explained, why_category,
)

#: seconds every app of one backend may take, together, to end
TIMEOUT = 300.0
BIN = os.path.dirname(sys.executable)


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
#: the retried role: fails on its first attempt, succeeds on the next; the marker is a file in
#: $MARK_DIR (a place the replica can see on that backend) or the backend's own attempt counter
#: (GCP Batch: BATCH_TASK_RETRY_ATTEMPT; AWS Batch: AWS_BATCH_JOB_ATTEMPT, from 1). The first
#: attempt ends once tx's log archive holds its line (the test touches `<app_id>.archived` when
#: it does, :func:`_tell_when_archived`; at most 60 s): a backend that drops a retried
#: replica's log (Kubernetes replaces the pod) then shows what the archive guarantees, never a
#: race between the archive's copy (once a second) and a loaded machine (a 3 s attempt lost it
#: at load 10-40). Where $MARK_DIR is not the test's, or the log appears only at the end
#: (:data:`_LOG_AT_END`), it ends after 3 s.
RETRY_SCRIPT = ('if [ -e "$MARK_DIR/${app_id}" ] || [ "${BATCH_TASK_RETRY_ATTEMPT:-0}" -ge 1 ] '
                '|| [ "${AWS_BATCH_JOB_ATTEMPT:-1}" -ge 2 ]; then echo "attempt 2"; exit 0; fi; '
                'echo "attempt 1"; touch "$MARK_DIR/${app_id}" 2>/dev/null; '
                'if [ "$ARCHIVE_WAIT" = 1 ] && [ -e "$MARK_DIR/${app_id}" ]; then n=0; '
                'while [ ! -e "$MARK_DIR/${app_id}.archived" ] && [ "$n" -lt 120 ]; do sleep 0.5; n=$((n+1)); done; '
                'else sleep 3; fi; exit 3')
#: backends whose replica's log appears only when it ends (moto writes a container's log then):
#: the archive cannot hold the first attempt's line before it ends, so it does not wait for that
_LOG_AT_END = ("aws_batch",)


def _tell_when_archived(env: "Env", app_id: str, waited: Dict[str, Any]) -> None:
    """Touch ``<marker>.archived`` beside the retried role's marker once tx's log archive
    holds its first line (``attempt 1``), for :data:`RETRY_SCRIPT`'s first attempt, which
    waits for it; returns then, or when the retry app's wait has returned. The marker is
    the one the replica made: its ``${app_id}`` macro is the backend's id, which is not
    always tx's (Kubernetes: ``retry-x`` where tx's is ``default:retry-x``)."""
    archive, handle, marks = env.runner.log_archive, env.handles[app_id], env.ws / "marks"
    while "retry" not in waited:
        made = [m for m in marks.iterdir() if not m.name.endswith(".archived")]
        if made and archive.has(handle, "flaky", 0) \
                and b"attempt 1" in b"".join(archive.read_blocks(handle, "flaky", 0)):
            for m in made:
                m.with_name(m.name + ".archived").touch()
            return
        time.sleep(0.2)


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
        capacity = lambda: local_capacity(extra.get("app_ids", []))  # noqa: E731
    elif name == "local_docker":
        request.getfixturevalue("podman_engine")
        sched = factories[name]("txmatrix")
        image, mounts, mark = "localhost/busybox:tx", _python_mounts(), True
        cfg = {"quiet": True}
        capacity = containers
    elif name == "slurm":
        request.getfixturevalue("slurm_cluster")
        sched = factories[name]("txmatrix")
        cfg = {"job_dir": str(tmp_path / "job")}
        capacity = slurm_capacity
    elif name == "lsf":
        request.getfixturevalue("lsf_cluster")
        sched = factories[name]("txmatrix")
        cfg = {"jobdir": str(tmp_path / "job")}
        capacity = lsf_capacity
    elif name == "ray":
        request.getfixturevalue("ray_head")
        sched = factories[name]("txmatrix")
        image = str(tmp_path / "image")
        os.makedirs(image)
        capacity = ray_capacity
        # the head is the session's: an earlier Ray test's app may still be ending (x5: 1 live
        # actor, 1 CPU, released during this column, which then read "held" against a
        # "before" that was not the head's own); the column starts once the head is idle
        idle = {"CPUs in use": 0.0, "placement groups": 0, "live actors": 0}
        assert wait_until(lambda: ray_capacity() == idle, 120), \
            f"the session's Ray head still holds {ray_capacity()} of an earlier test after 120 s"
    elif name == "aws_batch":
        moto = request.getfixturevalue("moto_docker")
        _aws_env(monkeypatch, tmp_path, moto)
        sched = factories[name]("txmatrix", poll_interval=0.5)
        image, mounts, mark = "localhost/busybox:tx", _python_mounts(), True
        cfg = {"queue": moto.queue}
        capacity = containers
    elif name.startswith("kubernetes"):
        cluster = request.getfixturevalue("fake_cluster")
        if cluster["no_dns"]:  # DDP's replicas meet at rank 0's Service name
            backend_unavailable("kubernetes (pod DNS)", cluster["no_dns"])
        sched = factories[name]("txmatrix")
        image, mounts, mark = "busybox:1.36", _python_mounts(), True
        cfg = {"kubernetes": {"queue": "default"}, "kubernetes_jobset": {"queue": "user-queue"}}.get(name, {})
        capacity = lambda: k8s_capacity(cluster["kubeconfig"])  # noqa: E731
    elif name == "gcp_batch":
        server = request.getfixturevalue("fake_gcp")
        monkeypatch.setenv("PATH", BIN + os.pathsep + os.environ["PATH"])  # the tasks run on this host
        sched = factories[name]("txmatrix")
        image = "ghcr.io/pytorch/torchx:0.7.0"
        capacity = lambda: gcp_capacity(server)  # noqa: E731
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
                                          env={"MARK_DIR": str(marks),
                                               "ARCHIVE_WAIT": "0" if env.name in _LOG_AT_END else "1"})])
    if app == "cancel":
        return AppDef("cancel", roles=[_sh("sleeper", "echo started; exec sleep 600", env)])
    if app == "signal":
        # $$$$: the shell's $$ once tx's macro substitution turned "$$" into "$"
        return AppDef("signal", roles=[_sh("victim", 'echo "before the signal"; kill -9 $$$$', env)])
    raise AssertionError(app)


# -- measuring (the pure categories: portability_matrix) --------------------------------------------
def read(env: Env, app_id: str, role: str, k: int, stream: Optional[str]) -> Optional[List[str]]:
    """The replica's lines as ``tx log HANDLE/role/k [--streams stream]`` prints them
    (:meth:`tx.runner.Runner.log_lines`: the backend's log, else tx's log archive; ``stream``
    None: the default stream); None where the backend keeps no such stream, ``[]`` where
    neither the backend nor the archive knows the app any more. Any other exception is raised:
    a crash is never a cell."""
    from tx.schedulers import SchedulerError
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
    except SchedulerError as e:
        # Volcano's TerminateJob (a pod failed, no retry left), like a JobSet's or an
        # AppWrapper's failure, deletes the pods still running: a DDP peer whose pod the
        # controller stopped before it failed on its own is gone with its log, before tx's
        # archive copies the app's logs at its end. tx log says so in one line (an answer);
        # any other scheduler error is raised
        if not (env.name.startswith("kubernetes") and "is gone although the app ran" in str(e)):
            raise
        print(f"{env.name} {app_id} {role}/{k}: {e}")
        return None


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
    if "retry" in ids:
        waiters.append(threading.Thread(target=_tell_when_archived, args=(env, ids["retry"], waited),
                                        name="archived-retry"))
    for t in waiters:
        t.start()
    cells: Dict[str, Dict[str, str]] = {}
    # cancel: once running
    started = "cancel" not in ids or wait_until(lambda: (d := env.scheduler.describe(ids["cancel"])) is not None
                         and d.state in (AppState.RUNNING, *[s for s in AppState if is_terminal(s)]), TIMEOUT / 2)
    assert started, f"{env.name}: the cancel app never ran"
    # RUNNING may come before the replica's program does (Slurm: the batch script runs, the
    # step not yet; moto says RUNNING before it starts the container): cancel once its first
    # line is there, so the app was really running
    if "cancel" in ids and env.name == "aws_batch":  # moto writes a container's log when it ends
        wait_until(lambda: container_said(ids["cancel"].split(":")[-1] + "-", "started"), 60)
    elif "cancel" in ids:
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


#: the session backend each column starts at run time (conftest.py's XDIST_GROUPS)
_STARTS = {"local_docker": "podman", "aws_batch": "podman", "slurm": "slurm", "lsf": "lsf", "ray": "ray",
           "kubernetes": "k8s", "kubernetes_jobset": "k8s", "kubernetes_mcad": "k8s"}


@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.backend(_STARTS[b])) if b in _STARTS else b
                                     for b in BACKENDS], indirect=True)
def test_portability(backend: Env) -> None:
    """Every app on this backend, measured and compared with docs/portability.md."""
    not_run = load_explained().get("not_run", {}).get(backend.name, {})
    cells, per_backend = run_matrix(backend, not_run)
    for app in not_run:
        cells[app] = {aspect: "not run (see below)" for aspect in ASPECTS}
    cells["backend"] = per_backend
    check_and_record(backend.name, cells)
