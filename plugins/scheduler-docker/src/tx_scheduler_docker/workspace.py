"""Workspace kind ``docker``: an image with the workspace on top of the role's image.

Registered through ``tx_register_workspaces`` as ``docker``; local_docker uses it, and so do
remote schedulers (Kubernetes, AWS Batch, GCP Batch) through the registry, without importing
this package (``workspace_kind = "docker"`` on their Scheduler class).

How an image is made (``DockerWorkspace.build``):

1. The files of the workspace that its ``.txignore`` does not exclude (gitignore syntax,
   :func:`tx.workspace.walk_workspace`) are hashed (paths, modes and contents) together with
   the Dockerfile, the role's image (its id on the engine) and ``image_repo``.
2. The image is tagged ``<image_repo or localhost/tx-workspace>:<first 20 hex digits of the hash>``.
   When the engine already has that tag, it is reused: **an unchanged workspace builds
   nothing**.
3. Otherwise the files go in a build context with the workspace's ``Dockerfile.tx`` or, when
   there is none, :data:`DEFAULT_DOCKERFILE` (``FROM $IMAGE`` / ``COPY . .``), built with the
   build args ``IMAGE`` (the role's image) and, for an own ``Dockerfile.tx``, ``WORKSPACE``
   (the workspace path), as TorchX's ``Dockerfile.torchx`` is.
4. With ``image_repo`` set, the image is pushed there; the role then runs
   ``<image_repo>:<hash>``, which any node can pull.

Engine API: ``POST /build`` and ``POST /images/{name}/push``
(https://docs.docker.com/reference/api/engine/version/v1.43/#tag/Image).
"""
from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from tx.workspace import IGNORE_FILE, Workspace, WorkspaceError, walk_workspace

if TYPE_CHECKING:
    from tx.specs import CfgVal, Role, runopts

#: the workspace's own Dockerfile, used instead of the default when present
DOCKERFILE = "Dockerfile.tx"
#: the Dockerfile used when the workspace has no :data:`DOCKERFILE`
DEFAULT_DOCKERFILE = "ARG IMAGE\nFROM $IMAGE\n\nCOPY . .\n"
#: repository of workspace images when no ``image_repo`` is given (local to the engine)
LOCAL_REPO = "localhost/tx-workspace"
#: run option a scheduler sets to True (in the cfg it passes to :meth:`DockerWorkspace.build`)
#: when its nodes cannot see the local engine's images, so that a missing ``image_repo`` is
#: an error that says so instead of an image no node can pull
REQUIRE_REPO_KEY = "image_repo_required"
#: label of workspace images: the workspace hash
LABEL_HASH = "tx.workspace-hash"


class DockerWorkspace(Workspace):
    """Workspace kind ``docker`` (see the module docstring for the steps).

    Run options it adds to its schedulers': ``image_repo`` (str) and ``quiet`` (bool),
    TorchX's names and meaning.
    """

    kind = "docker"

    def run_opts(self) -> "runopts":
        from tx.specs import runopts

        opts = runopts()
        opts.add(
            "image_repo", type_=str, default=None,
            help="(remote jobs) the image repository to push the workspace image to, e.g. "
                 "registry.example.com/team/trainer; nodes that do not share this host's engine "
                 "pull it from there",
        )
        opts.add("quiet", type_=bool, default=False, help="do not print the image build's output")
        return opts

    def build(self, role: "Role", workspace: str, cfg: Mapping[str, "CfgVal"]) -> "Role":
        """Return ``role`` with ``image`` set to an image holding ``workspace`` on top of
        ``role.image`` (built only when no image of the same content exists; pushed to
        ``image_repo`` when given).

        Raises:
            tx.workspace.WorkspaceError: the workspace is not a directory, ``image_repo`` is
                missing where the scheduler needs it (``cfg[REQUIRE_REPO_KEY]``), no engine,
                the base image cannot be found or pulled, the build or the push failed.
        """
        import attrs

        image = self.build_image(role.image, workspace, cfg)
        return attrs.evolve(role, image=image)

    # -- the steps --------------------------------------------------------------------------------------
    def build_image(self, base: str, workspace: str, cfg: Mapping[str, "CfgVal"]) -> str:
        """Build (or reuse) the workspace image on top of ``base`` and return its name.

        Raises:
            WorkspaceError: as :meth:`build`.
        """
        repo = cfg.get("image_repo") or None
        quiet = bool(cfg.get("quiet"))
        if not repo and cfg.get(REQUIRE_REPO_KEY):
            raise WorkspaceError(
                "image_repo is missing: this scheduler's nodes pull images from a registry, so the "
                "workspace image must be pushed; set -cfg image_repo=REGISTRY/REPO (e.g. "
                "-cfg image_repo=ghcr.io/me/trainer), or run with --workspace ''"
            )
        if not os.path.isdir(workspace):
            raise WorkspaceError(f"workspace {workspace!r} is not a directory")
        if not base:
            raise WorkspaceError("the role has no image to put the workspace on")
        client = _client()
        base_id = _ensure_base(client, base)
        files, dockerfile = collect(workspace)
        digest = content_hash(files, dockerfile, base_id, str(repo or ""))
        tag = f"{repo or LOCAL_REPO}:{digest[:20]}"
        if _exists(client, tag):
            _say(quiet, f"workspace unchanged: reusing image {tag}")
        else:
            _say(quiet, f"building workspace image {tag} from {base} ({len(files)} files)")
            _build(client, base, workspace, files, dockerfile, tag, digest, quiet)
        if repo:
            _push(client, tag, quiet)
        return tag


def collect(workspace: str) -> Tuple[List[Tuple[str, str]], bytes]:
    """The files that go into the image, as ``(relative path, absolute path)`` sorted by
    path, and the Dockerfile's bytes (the workspace's ``Dockerfile.tx`` or the default).
    ``.txignore`` excludes files; ``Dockerfile.tx`` and ``.txignore`` always go in.

    Raises:
        WorkspaceError: a file cannot be read.
    """
    rels = set(walk_workspace(workspace, IGNORE_FILE))
    own = os.path.join(workspace, DOCKERFILE)
    if os.path.isfile(own):
        rels.add(DOCKERFILE)
        with open(own, "rb") as f:
            dockerfile = f.read()
    else:
        dockerfile = DEFAULT_DOCKERFILE.encode()
    files = [(rel, os.path.join(workspace, *rel.split("/"))) for rel in sorted(rels)]
    return files, dockerfile


def content_hash(files: List[Tuple[str, str]], dockerfile: bytes, base_id: str, repo: str) -> str:
    """sha256 (hex) of what decides the image: each file's path, mode and content, the
    Dockerfile, the base image id and the repository."""
    h = hashlib.sha256()
    for part in (b"tx-docker-workspace-1", base_id.encode(), repo.encode(), dockerfile):
        h.update(len(part).to_bytes(8, "little") + part)
    for rel, path in files:
        try:
            st = os.stat(path)
            h.update(f"\0{rel}\0{st.st_mode & 0o7777:o}\0{st.st_size}\0".encode())
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except OSError as e:
            raise WorkspaceError(f"cannot read workspace file {path}: {e.strerror}") from None
    return h.hexdigest()


def _context(files: List[Tuple[str, str]], dockerfile: bytes) -> io.BytesIO:
    """A tar build context: the files (modes kept, owner root) and ``Dockerfile.tx``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, path in files:
            if rel == DOCKERFILE:
                continue
            info = tar.gettarinfo(path, arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isfile():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
        info = tarfile.TarInfo(DOCKERFILE)
        info.size = len(dockerfile)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(dockerfile))
    buf.seek(0)
    return buf


def _client() -> Any:
    from tx.schedulers import SchedulerError
    from tx_scheduler_docker._client import make_client

    try:
        return make_client()
    except SchedulerError as e:
        raise WorkspaceError(f"cannot build the workspace image: {e}") from None


def _ensure_base(client: Any, base: str) -> str:
    """The id of ``base`` on the engine, pulled when missing."""
    import docker

    try:
        return str(client.images.get(base).id)
    except docker.errors.ImageNotFound:
        pass
    try:
        return str(client.images.pull(base).id)
    except docker.errors.DockerException as e:
        raise WorkspaceError(f"image {base!r} is not on the engine and cannot be pulled: {_reason(e)}") from None


def _exists(client: Any, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _build(client: Any, base: str, workspace: str, files: List[Tuple[str, str]], dockerfile: bytes, tag: str,
           digest: str, quiet: bool) -> None:
    import docker

    from tx_scheduler_docker.version import __version__

    tail: List[str] = []
    buildargs = {"IMAGE": base}
    if dockerfile != DEFAULT_DOCKERFILE.encode():
        buildargs["WORKSPACE"] = os.path.abspath(workspace)
    try:
        for event in client.api.build(
            fileobj=_context(files, dockerfile), custom_context=True, dockerfile=DOCKERFILE, tag=tag,
            buildargs=buildargs,
            labels={LABEL_HASH: digest, "tx.version": __version__}, rm=True, forcerm=True, pull=False,
            decode=True,
        ):
            if "error" in event or "errorDetail" in event:
                detail = event.get("errorDetail") or {}
                msg = (detail.get("message") if isinstance(detail, dict) else None) or event.get("error")
                raise WorkspaceError(f"building the workspace image {tag} failed: {str(msg).strip()}"
                                     + (f" (last output: {' | '.join(tail[-3:])})" if tail else ""))
            text = event.get("stream")
            if text:
                tail = (tail + [ln for ln in text.splitlines() if ln.strip()])[-10:]
                if not quiet:
                    sys.stderr.write(text)
    except docker.errors.DockerException as e:
        raise WorkspaceError(f"building the workspace image {tag} failed: {_reason(e)}") from None
    if not _exists(client, tag):
        raise WorkspaceError(f"building the workspace image {tag} failed: the engine has no image afterwards"
                             + (f" (last output: {' | '.join(tail[-3:])})" if tail else ""))


def _push(client: Any, tag: str, quiet: bool) -> None:
    import docker

    repo, _, version = tag.rpartition(":")
    _say(quiet, f"pushing {tag}")
    try:
        for event in client.api.push(repo, tag=version, stream=True, decode=True):
            if "error" in event or "errorDetail" in event:
                detail: Dict[str, Any] = event.get("errorDetail") or {}
                msg = detail.get("message") or event.get("error")
                raise WorkspaceError(f"pushing {tag} failed: {str(msg).strip()}")
    except docker.errors.DockerException as e:
        raise WorkspaceError(f"pushing {tag} failed: {_reason(e)}") from None


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        sys.stderr.write(f"[docker workspace] {text}\n")


def _reason(e: Exception) -> str:
    text = str(getattr(e, "explanation", None) or e)
    return text.splitlines()[0][:300] if text else type(e).__name__


def image_hash(client: Any, image: str) -> Optional[str]:
    """The workspace hash label of ``image`` (None for images not made by this kind)."""
    labels = (client.images.get(image).attrs.get("Config") or {}).get("Labels") or {}
    return labels.get(LABEL_HASH)
