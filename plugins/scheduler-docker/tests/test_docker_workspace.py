"""The ``docker`` workspace kind on the session's podman engine: a build adds files the job
reads, an unchanged workspace reuses its image without a build, ``.txignore`` and
``Dockerfile.tx`` are honoured, ``image_repo`` is pushed to and its absence is explained."""
import time
from pathlib import Path
from typing import Any, Dict

import pytest

from tx.runner import get_runner
from tx.specs import AppDef, AppState, Role
from tx.workspace import WorkspaceError, get_workspace
from tx_scheduler_docker.workspace import LABEL_HASH, REQUIRE_REPO_KEY, DockerWorkspace


def _cat_app(image: str, *paths: str) -> AppDef:
    script = "; ".join(f"if [ -e {p} ]; then echo \"{p}: $(cat {p})\"; else echo \"{p}: absent\"; fi" for p in paths)
    return AppDef("wscat", roles=[Role("reader", image=image, entrypoint="sh", args=["-c", script])])


def _run(app: AppDef, workspace: Path, cfg: Dict[str, Any]) -> Dict[str, Any]:
    """Run ``app`` with ``workspace`` through the Runner; the build time (s), the image and
    the reader's lines."""
    with get_runner("txws") as runner:
        t0 = time.monotonic()
        info = runner.dryrun(app, "local_docker", cfg, workspace=str(workspace))
        build_s = time.monotonic() - t0
        handle = runner.schedule(info)
        status = runner.wait(handle, wait_interval=0.2)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        lines = list(runner.log_lines(handle, "reader", 0))
    return {"build_s": build_s, "image": info.request.containers[0].image, "lines": lines}


def test_workspace_is_built_then_reused(podman_engine: Any, docker_client: Any, image: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("hello from the workspace\n")
    app = _cat_app(image, "/data.txt")
    first = _run(app, ws, {"quiet": True})
    assert first["image"].startswith("localhost/tx-workspace:"), first["image"]
    assert "/data.txt: hello from the workspace\n" in first["lines"], first["lines"]
    n_images = len(docker_client.images.list())
    second = _run(app, ws, {"quiet": True})
    assert second["image"] == first["image"], "an unchanged workspace got a new image"
    assert len(docker_client.images.list()) == n_images, "an unchanged workspace built an image"
    (ws / "data.txt").write_text("changed\n")
    third = _run(app, ws, {"quiet": True})
    assert third["image"] != first["image"]
    assert "/data.txt: changed\n" in third["lines"], third["lines"]
    label = docker_client.images.get(third["image"]).attrs["Config"]["Labels"][LABEL_HASH]
    assert third["image"].endswith(":" + label[:20])
    print(f"\nworkspace build {first['build_s']:.2f} s, unchanged {second['build_s']:.2f} s")


def test_txignore_and_own_dockerfile(podman_engine: Any, image: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "logs").mkdir(parents=True)
    (ws / "keep.txt").write_text("kept\n")
    (ws / "secret.key").write_text("do not ship\n")
    (ws / "logs" / "big.log").write_text("ignored dir\n")
    (ws / ".txignore").write_text("# not in the image\n*.key\nlogs/\n")
    (ws / "Dockerfile.tx").write_text("ARG IMAGE\nFROM $IMAGE\nCOPY . /app\nRUN echo built-by-own-dockerfile > /app/marker\n")
    res = _run(_cat_app(image, "/app/keep.txt", "/app/secret.key", "/app/logs/big.log", "/app/marker"), ws, {"quiet": True})
    assert res["lines"] == [
        "/app/keep.txt: kept\n",
        "/app/secret.key: absent\n",
        "/app/logs/big.log: absent\n",
        "/app/marker: built-by-own-dockerfile\n",
    ], res["lines"]


def test_ignored_file_changes_build_nothing(podman_engine: Any, tmp_path: Path, image: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("print('a')\n")
    (ws / ".txignore").write_text("*.log\n")
    kind = get_workspace("docker")
    first = kind.build(Role("r", image=image), str(ws), {"quiet": True})
    (ws / "run.log").write_text("noise\n")
    assert kind.build(Role("r", image=image), str(ws), {"quiet": True}).image == first.image


def test_kind_from_the_registry(podman_engine: Any) -> None:
    kind = get_workspace("docker")
    assert isinstance(kind, DockerWorkspace)
    assert {"image_repo", "quiet"} <= {k for k, _ in kind.run_opts()}
    from tx.schedulers import get_scheduler_factories

    sched = get_scheduler_factories()["local_docker"]("t")
    assert "image_repo" in sched.run_opts()


def test_missing_image_repo_is_explained(tmp_path: Path, image: str) -> None:
    with pytest.raises(WorkspaceError, match="image_repo is missing"):
        DockerWorkspace().build(Role("r", image=image), str(tmp_path), {REQUIRE_REPO_KEY: True})


def test_bad_workspace_and_bad_dockerfile(podman_engine: Any, tmp_path: Path, image: str) -> None:
    with pytest.raises(WorkspaceError, match="not a directory"):
        DockerWorkspace().build(Role("r", image=image), str(tmp_path / "nope"), {})
    (tmp_path / "Dockerfile.tx").write_text("ARG IMAGE\nFROM $IMAGE\nRUN exit 7\n")
    with pytest.raises(WorkspaceError, match="failed"):
        DockerWorkspace().build(Role("r", image=image), str(tmp_path), {"quiet": True})


def test_push_to_image_repo_then_pull(
    registry: str, docker_client: Any, scheduler: Any, image: str, tmp_path: Path
) -> None:
    """With image_repo the image is pushed there, and a node without it (here: this engine
    after the image is removed) pulls it when the app runs."""
    import json
    import urllib.request

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("pushed\n")
    repo = f"{registry}/tx/ws"
    role = get_workspace("docker").build(Role("reader", image=image), str(ws), {"image_repo": repo, "quiet": True,
                                                                                REQUIRE_REPO_KEY: True})
    assert role.image.startswith(repo + ":"), role.image
    with urllib.request.urlopen(f"http://{registry}/v2/tx/ws/tags/list", timeout=10) as r:
        tags = json.load(r)["tags"]
    assert role.image.rsplit(":", 1)[1] in tags, tags
    docker_client.images.remove(role.image, force=True)
    app = _cat_app(role.image, "/data.txt")
    app_id = scheduler.submit(app, {})
    try:
        desc = scheduler.wait(app_id, timeout=120, poll_interval=0.3)
        assert desc is not None and desc.state == AppState.SUCCEEDED, desc
        assert list(scheduler.log_iter(app_id, "reader", 0)) == ["/data.txt: pushed\n"]
    finally:
        scheduler.cancel(app_id)


def test_push_failure_is_one_line(podman_engine: Any, image: str, tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("x\n")
    with pytest.raises(WorkspaceError, match="pushing .* failed") as e:
        DockerWorkspace().build(Role("r", image=image), str(tmp_path), {"image_repo": "127.0.0.1:9/nowhere/ws",
                                                                        "quiet": True})
    assert "\n" not in str(e.value)
