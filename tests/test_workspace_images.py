"""``--workspace`` on the remote schedulers, for real: Kubernetes (``kubernetes``,
``kubernetes_jobset``, ``kubernetes_mcad``), AWS Batch (``aws_batch``) and GCP Batch
(``gcp_batch``) build their workspace image through the ``docker`` workspace kind that
tx-scheduler-docker registers in core's plugin registry (they never import that package),
on a private podman engine, and push it to ``image_repo``, a private registry this session
starts (the ``podman_engine`` and ``registry`` fixtures of ``tx_scheduler_docker.testing``,
``moto_docker`` of ``tx_scheduler_aws_batch.testing``, loaded by the root conftest.py).

For each scheduler: the image is built, is in the registry (its HTTP API lists the tag and
serves the manifest), holds the workspace file (a container of it prints the file), and
the request the scheduler would submit names it in the first role (the one a workspace
patches) while the second role keeps its image; an unchanged workspace reuses the image
without a build; a missing ``image_repo`` is a one-line error of ``tx run``. On AWS Batch,
moto's Docker mode over the same engine runs the job: the engine pulls the image from the
registry (the local copy is removed first) and the first role prints the workspace file.
The Kubernetes and GCP fakes run commands as local processes, not images, so for them the
request is what is checked.
"""
from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from tx.runner import Runner
from tx.specs import AppDef, AppState, Resource, Role
from tx.testing.backends import container_output

REPO = Path(__file__).resolve().parent.parent
#: the busybox image scripts/start-podman.sh imports into the session's engine
BASE_IMAGE = "localhost/busybox:tx"
#: the ``moto_docker`` fixture's type (tx_scheduler_aws_batch.testing.Moto; not imported, so
#: that this module is collected where that plugin is not installed)
Moto = Any
#: run options each scheduler needs for a dryrun (besides image_repo)
CFGS: Dict[str, Dict[str, Any]] = {
    "kubernetes": {"queue": "default", "namespace": "default"},
    "kubernetes_jobset": {"namespace": "default"},
    "kubernetes_mcad": {"namespace": "default"},
    "aws_batch": {"queue": "tx-wsimg-q"},
    "gcp_batch": {"project": "tx-test-project", "location": "us-central1"},
}
SCHEDULERS = list(CFGS)
FILE = "hello.txt"
READER_SCRIPT = f"if [ -e {FILE} ]; then echo has the workspace; else echo base image only; fi"


def app(replicas: int = 2) -> AppDef:
    """Two roles on the busybox image: ``trainer`` (first: the workspace goes into its image)
    prints the workspace file; ``reader`` says whether its image has it."""
    res = Resource(cpu=1, gpu=0, memMB=64)
    return AppDef("wsimg", roles=[
        Role("trainer", image=BASE_IMAGE, entrypoint="sh", args=["-c", f"cat {FILE}"], num_replicas=replicas,
             resource=res),
        Role("reader", image=BASE_IMAGE, entrypoint="sh", args=["-c", READER_SCRIPT], num_replicas=replicas,
             resource=res),
    ])


def _env_value(env: Any, name: str) -> Any:
    for e in env or []:
        if isinstance(e, dict) and e.get("name") == name and "value" in e:
            return e["value"]
    return None


def role_images(scheduler: str, request: Any) -> List[Tuple[str, str]]:
    """(role name, image) of every container of the request, in request order: Kubernetes
    objects (Volcano tasks, JobSet replicated jobs, AppWrapper items) and Batch node ranges
    by their container's ``TX_ROLE_NAME``; GCP Batch runnables by their display name."""
    if scheduler == "gcp_batch":
        return [(r.display_name, r.container.image_uri) for g in request.job.task_groups for r in g.task_spec.runnables]
    root = request.job_def if scheduler == "aws_batch" else request.resource
    out: List[Tuple[str, str]] = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            if isinstance(o.get("image"), str):
                out.append((_env_value(o.get("env") or o.get("environment"), "TX_ROLE_NAME"), o["image"]))
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(root)
    return out


def registry_tags(addr: str, repo: str) -> List[str]:
    """The tags of ``repo`` in the registry (Distribution's HTTP API: GET /v2/<name>/tags/list)."""
    with urllib.request.urlopen(f"http://{addr}/v2/{repo}/tags/list", timeout=10) as r:
        return list(json.load(r).get("tags") or [])


def registry_manifest(addr: str, repo: str, tag: str) -> Dict[str, Any]:
    """The manifest the registry serves for ``repo:tag`` (GET /v2/<name>/manifests/<tag>)."""
    req = urllib.request.Request(f"http://{addr}/v2/{repo}/manifests/{tag}", headers={"Accept": ", ".join([
        "application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"])})
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(json.load(r))


@pytest.fixture
def workspace(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[str], Path]:
    """``make(text)``: a workspace directory whose ``hello.txt`` holds ``text`` (each
    scheduler's own text, so each builds its own image), plus an ignored file."""

    def make(text: str) -> Path:
        ws = tmp_path / "ws"
        ws.mkdir(exist_ok=True)
        (ws / FILE).write_text(text)
        (ws / ".txignore").write_text("*.log\n")
        (ws / "build.log").write_text("not in the image\n")
        return ws

    return make


@pytest.fixture
def engine(podman_engine: Dict[str, str]) -> Iterator[Any]:
    """A ``docker.DockerClient`` on the session's engine."""
    import docker

    client = docker.DockerClient(base_url=podman_engine["DOCKER_HOST"], timeout=120)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No user .txconfig, AWS config or kubeconfig leaks into the dryruns; no run option
    comes from the environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for var in ("TXCONFIG", "TX_IMAGE_REPO", "TORCHX_IMAGE_REPO", "TX_QUIET", "TORCHX_QUIET"):
        monkeypatch.delenv(var, raising=False)


def test_the_schedulers_reach_the_docker_kind_only_through_the_registry() -> None:
    """``get_workspace("docker")`` is tx-scheduler-docker's kind, registered through the
    plugin registry; the three scheduler plugins name the kind and never import that package."""
    from tx.plugins import get_registry
    from tx.schedulers import get_scheduler_factories
    from tx.workspace import get_workspace

    kind = get_workspace("docker")
    assert type(kind).__module__ == "tx_scheduler_docker.workspace" and kind.kind == "docker"
    reg = get_registry().get("workspaces", "docker")
    assert reg is not None
    factories = get_scheduler_factories()
    for name in SCHEDULERS:
        assert factories[name]("wsimg").workspace_kind == "docker", name
        assert "image_repo" in dict(iter(factories[name]("wsimg").run_opts())), name
    imports = re.compile(r"^\s*(from|import)\s+tx_scheduler_docker\b", re.M)
    for plugin in ("scheduler-k8s", "scheduler-aws-batch", "scheduler-gcp-batch"):
        for src in (REPO / "plugins" / plugin / "src").rglob("*.py"):
            assert not imports.search(src.read_text()), f"{src} imports tx_scheduler_docker"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_workspace_image_is_built_pushed_and_named_by_the_request(
    scheduler: str, registry: str, engine: Any, workspace: Callable[[str], Path], no_user_config: None,
    capfd: pytest.CaptureFixture[str],
) -> None:
    ws = workspace(f"hello from the {scheduler} workspace\n")
    repo = f"{registry}/tx"
    cfg = {**CFGS[scheduler], "image_repo": repo}
    with Runner("wsimg") as runner:
        first = runner.dryrun(app(), scheduler, cfg, workspace=str(ws))
        err = capfd.readouterr().err
        images = role_images(scheduler, first.request)
        built = {img for role, img in images if role == "trainer"}
        assert len(built) == 1, images
        tag = built.pop()
        assert re.fullmatch(re.escape(repo) + r":[0-9a-f]{20}", tag), tag
        # the first role runs the workspace image (every replica); the second keeps its own
        assert {role for role, _ in images} == {"trainer", "reader"}, images
        assert all(img == (tag if role == "trainer" else BASE_IMAGE) for role, img in images), images
        assert f"building workspace image {tag} from {BASE_IMAGE}" in err and f"pushing {tag}" in err, err
        assert "Traceback" not in err
        # the image holds the workspace on top of the base image, without the ignored file
        out = container_output(engine, tag, ["sh", "-c", f"cat {FILE}; ls build.log 2>&1 || true"])
        assert out.decode().startswith(f"hello from the {scheduler} workspace\n"), out
        assert b"No such file" in out, out
        # ... and is in the registry
        version = tag.rsplit(":", 1)[1]
        assert version in registry_tags(registry, "tx")
        manifest = registry_manifest(registry, "tx", version)
        assert manifest.get("layers"), manifest
        image_id = engine.images.get(tag).id

        # unchanged workspace: the same image, no build
        second = runner.dryrun(app(), scheduler, cfg, workspace=str(ws))
        err2 = capfd.readouterr().err
        assert role_images(scheduler, second.request) == images
        assert f"workspace unchanged: reusing image {tag}" in err2 and "building" not in err2, err2
        assert engine.images.get(tag).id == image_id


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_cli_dryrun_builds_and_pushes_through_the_engine_of_docker_host(
    scheduler: str, registry: str, tx: Any, tmp_path: Path,
) -> None:
    """``tx run --dryrun --workspace`` as a fresh process finds the engine as users point
    at it (``DOCKER_HOST``), pushes to ``-cfg image_repo`` and prints a request naming the image."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / FILE).write_text(f"from the {scheduler} command line\n")
    cfg = ",".join(f"{k}={v}" for k, v in {**CFGS[scheduler], "image_repo": f"{registry}/tx"}.items())
    proc = tx("run", "--dryrun", "-s", scheduler, "-cfg", cfg, "--workspace", str(ws),
              "utils.echo", "--image", BASE_IMAGE, "--msg", "hi")
    assert proc.returncode == 0, proc.stderr
    tags = set(re.findall(re.escape(registry) + r"/tx:[0-9a-f]{20}", proc.stdout))
    assert len(tags) == 1, proc.stdout
    tag = tags.pop()
    assert f"pushing {tag}" in proc.stderr, proc.stderr
    assert tag.rsplit(":", 1)[1] in registry_tags(registry, "tx")


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_missing_image_repo_is_one_line_error(scheduler: str, tx: Any, one_line_error: Any, tmp_path: Path) -> None:
    """These schedulers' nodes pull images from a registry: ``--workspace`` without
    ``image_repo`` fails in one line before anything is built."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / FILE).write_text("hi\n")
    cfg = ",".join(f"{k}={v}" for k, v in CFGS[scheduler].items())
    proc = tx("run", "--dryrun", "-s", scheduler, "-cfg", cfg, "--workspace", str(ws),
              "utils.echo", "--image", BASE_IMAGE, "--msg", "hi")
    one_line_error(proc, "image_repo is missing")
    assert "set -cfg image_repo=" in proc.stderr


@pytest.mark.timeout(400)
def test_aws_batch_job_runs_the_pushed_workspace_image(
    moto_docker: Moto, registry: str, engine: Any, workspace: Callable[[str], Path], no_user_config: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moto's Batch in Docker mode runs the job's containers on the same engine: with the
    local copy of the workspace image removed, the engine pulls it from the registry; the
    first role prints the workspace file, the second role's image does not have it."""
    for k, v in moto_docker.env().items():
        monkeypatch.setenv(k, v)
    ws = workspace("hello from the aws_batch job\n")
    with Runner("wsimg") as runner:
        info = runner.dryrun(app(replicas=1), "aws_batch", {"queue": moto_docker.queue, "image_repo": f"{registry}/tx"},
                             workspace=str(ws))
        tag = dict(role_images("aws_batch", info.request))["trainer"]
        engine.images.remove(tag)  # so that the job's container must pull it from the registry
        assert not engine.images.list(name=tag)
        handle = runner.schedule(info)
        status = runner.wait(handle, wait_interval=0.5, timeout=240)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        # each node's own log stream (the test server gives every node job one, as AWS does):
        # the trainer's `cat` (which would fail the job without the file), the reader's image
        # has no workspace
        got = {role: [ln.rstrip("\n") for ln in runner.log_lines(handle, role, 0)] for role in ("trainer", "reader")}
        assert got == {"trainer": ["hello from the aws_batch job"], "reader": ["base image only"]}, got
        assert engine.images.list(name=tag), "the engine pulled the image from the registry"
