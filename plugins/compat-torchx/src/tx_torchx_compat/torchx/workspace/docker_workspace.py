"""``torchx.workspace.docker_workspace``: TorchX 0.7.0's ``DockerWorkspaceMixin`` for
schedulers that derive from it, over tx's ``docker`` workspace kind
(:func:`tx.workspace.get_workspace`, provided by tx-scheduler-docker).

Differences from TorchX 0.7.0 (docs/migrating-from-torchx.md):

* the image is built by tx's workspace (``Dockerfile.tx`` or the default ``FROM $IMAGE`` /
  ``COPY . .``, files excluded by ``.txignore``, an unchanged workspace reuses its image) and,
  with ``image_repo`` set, pushed during the build, so the role's image is already the
  remote ``<image_repo>:<hash>``; :meth:`DockerWorkspaceMixin.dryrun_push_images` then has
  nothing to push. Local ``sha256:`` images (built by other means) are pushed as TorchX does.
* :func:`_build_context` (TorchX's build context as a tar file) adds ``Dockerfile.torchx``
  as TorchX does, but matches ``.dockerignore`` with gitignore rules, as every tx workspace
  (:func:`torchx.workspace.walk_workspace`); tx's own builds do not use it.
"""
import io
import logging
import posixpath
import sys
import tarfile
import tempfile
from typing import IO, Any, Dict, Iterable, Mapping, Optional, TextIO, Tuple

from tx.specs.api import AppDef, Role
from tx.specs.runopts import CfgVal, runopts
from tx.workspace import get_workspace
from tx_torchx_compat.torchx.workspace.api import WorkspaceMixin, walk_workspace

__all__ = ["DEFAULT_DOCKERFILE", "DockerWorkspaceMixin", "TORCHX_DOCKERFILE", "print_push_events"]

log: logging.Logger = logging.getLogger(__name__)

#: the workspace's own Dockerfile in :func:`_build_context` (tx's builds read ``Dockerfile.tx``)
TORCHX_DOCKERFILE = "Dockerfile.torchx"
#: the Dockerfile used without one: the role's image with the workspace copied on top
DEFAULT_DOCKERFILE = b"ARG IMAGE\nFROM $IMAGE\n\nCOPY . .\n"
_HASH_PREFIX = "sha256:"


class DockerWorkspaceMixin(WorkspaceMixin[Dict[str, Tuple[str, str]]]):
    """Builds the workspace into a Docker image on top of the role's image and makes it the
    role's image (see the module docstring).

    Args:
        args, kwargs: passed on to the next class (the scheduler's constructor).
        docker_client: a ``docker.DockerClient`` for :meth:`push_images` (None: made from
            the environment when first needed).
    """

    #: label of the images TorchX builds (kept for subclasses that read it)
    LABEL_VERSION: str = "torchx.pytorch.org/version"

    def __init__(self, *args: Any, docker_client: Optional[Any] = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.__docker_client = docker_client

    @property
    def _docker_client(self) -> Any:
        """The docker SDK client (created from the environment on first use)."""
        if self.__docker_client is None:
            import docker  # deferred: the docker SDK only when an image is pushed

            self.__docker_client = docker.from_env()
        return self.__docker_client

    def workspace_opts(self) -> runopts:
        """tx's docker workspace options: ``image_repo`` (str) and ``quiet`` (bool), TorchX's
        names and meaning.

        Raises:
            tx.workspace.WorkspaceError: tx-scheduler-docker is not installed.
        """
        return get_workspace("docker").run_opts()

    def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        """Build ``workspace`` on top of ``role.image`` with tx's docker workspace (pushed
        when ``cfg["image_repo"]`` is set) and set ``role.image`` to the result.

        Raises:
            tx.workspace.WorkspaceError: no engine, the build or push failed, or
                tx-scheduler-docker is not installed.
        """
        role.image = get_workspace("docker").build(role, workspace, cfg).image

    def dryrun_push_images(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> Dict[str, Tuple[str, str]]:
        """Replace each role image that is a local ``sha256:<hash>`` id with
        ``<image_repo>:<hash>`` (in place) and return ``{local id: (image_repo, hash)}`` for
        :meth:`push_images`; images tx built are already pushed and are left alone.

        Raises:
            KeyError: a local image and no ``image_repo`` in ``cfg``.
        """
        repo = cfg.get("image_repo")
        out: Dict[str, Tuple[str, str]] = {}
        for role in app.roles:
            if not role.image.startswith(_HASH_PREFIX):
                continue
            if not repo:
                raise KeyError(f"must specify the image repository via `image_repo` config to be able to "
                               f"upload local image {role.image}")
            digest = role.image[len(_HASH_PREFIX):]
            out[role.image] = (str(repo), digest)
            role.image = f"{repo}:{digest}"
        return out

    def push_images(self, images_to_push: Dict[str, Tuple[str, str]]) -> None:
        """Tag each local image as ``repo:tag`` and push it (the engine must be logged in
        to the registry), printing the engine's progress (:func:`print_push_events`).

        Raises:
            RuntimeError: the engine reports a push error.
        """
        if not images_to_push:
            return
        client = self._docker_client
        for local, (repo, tag) in images_to_push.items():
            log.info(f"pushing image {repo}:{tag}...")
            client.images.get(local).tag(repo, tag=tag)
            print_push_events(client.images.push(repo, tag=tag, stream=True, decode=True))


def print_push_events(events: Iterable[Dict[str, str]], stream: TextIO = sys.stderr) -> None:
    """Write the Docker engine's push progress ``events`` (decoded JSON objects of
    ``POST /images/{name}/push``) to ``stream``: one line per layer id, rewritten in place
    (ANSI cursor moves) as its status changes; events without an id as their own line.

    Raises:
        RuntimeError: an event carries ``error``.
    """
    header = "\033[34mdocker push \033[0m"
    ids: list = []
    for event in events:
        if "error" in event:
            raise RuntimeError(f"failed to push docker image: {event['error']}")
        status = event.get("status")
        if not status:
            continue
        layer = event.get("id")
        if not layer:
            stream.write(f"{header}{status}\n")
            continue
        msg = f"{header}{layer}: {status} {event.get('progress', '')}"
        if layer not in ids:
            ids.append(layer)
            stream.write(f"{msg}\n")
        else:
            up = len(ids) - ids.index(layer)
            stream.write(f"\033[{up}F\033[2K{msg}\033[{up}E")


def _build_context(img: str, workspace: str) -> IO[bytes]:
    """TorchX's build context of ``workspace`` (a local directory or fsspec URL) as an
    open temporary tar file (deleted when closed): its files less what ``.dockerignore``
    excludes (gitignore rules, :func:`torchx.workspace.walk_workspace`), modes kept, plus :data:`DEFAULT_DOCKERFILE` as ``Dockerfile.torchx`` when
    the workspace has none. ``img`` is unused (TorchX passes the base image as a build arg)."""
    import fsspec  # deferred: fsspec only when a build context is made

    fs, root = fsspec.core.url_to_fs(workspace)
    f = tempfile.NamedTemporaryFile(prefix="torchx-context", suffix=".tar")  # noqa: SIM115 - the caller closes it
    with tarfile.open(fileobj=f, mode="w") as tar:
        for d, _dirs, files in walk_workspace(fs, root, ignore_name=".dockerignore"):
            rel_dir = posixpath.relpath(d, root)
            for name, info in files.items():
                rel = name if rel_dir == "." else posixpath.join(rel_dir, name)
                with fs.open(posixpath.join(d, name), "rb") as src:
                    data = src.read()
                ti = tarfile.TarInfo(rel)
                ti.size = len(data)
                mode = info.get("mode")
                ti.mode = (mode & 0o7777) if isinstance(mode, int) else 0o644
                tar.addfile(ti, io.BytesIO(data))
        if TORCHX_DOCKERFILE not in tar.getnames():
            ti = tarfile.TarInfo(TORCHX_DOCKERFILE)
            ti.size = len(DEFAULT_DOCKERFILE)
            tar.addfile(ti, io.BytesIO(DEFAULT_DOCKERFILE))
    f.seek(0)
    return f
