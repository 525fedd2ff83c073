"""The local scheduler's request: what each replica runs, where, with which environment.

Built by ``submit_dryrun`` without side effects (nothing is created or started); its
``str`` is the dryrun text. ``to_json()`` is what the supervisor reads.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import attrs

from tx.schedulers import RANK0_HOST, clean_name, make_unique, replica_env
from tx.specs import MISSING, AppDef, BindMount, CfgVal, InvalidRunConfigException, Role, macros
from tx.workspace import WorkspaceError
from tx_scheduler_local import _cuda, _preempt

RANK0_ENV = RANK0_HOST
#: the ``Role.metadata`` key naming the workspace directory a ``local_cwd`` role runs in
#: (set by :func:`workspace_role`; ``local_dir`` puts it in the role's image instead)
WORKSPACE_CWD = "local/workspace"


class HostMounts:
    """Mounts on the local schedulers (a mix-in of ``LocalScheduler``): the replicas are host
    processes that see the host's filesystem as it is, so no mount is made. A writable bind
    mount whose ``src`` is ``dst`` (both absolute) already holds there and is accepted; every
    other mount (another ``dst``, read-only, volume, device) would be run without, so tx
    refuses it and the ``torchx`` command drops it with a warning (TorchX's local scheduler
    ignores mounts)."""

    supports_mounts = False
    mounts_advice = ("a local replica sees the host's filesystem as it is: use the host path itself "
                     "(a writable bind mount with src equal to dst is accepted), or run on local_docker")

    def ignored_mounts(self, role: Role) -> List[Any]:
        """The mounts of ``role`` the replicas would run without (all but writable bind
        mounts with ``src`` equal to ``dst``, both absolute paths)."""
        def holds(m: Any) -> bool:
            return (isinstance(m, BindMount) and not m.read_only and os.path.isabs(m.src_path)
                    and os.path.isabs(m.dst_path) and os.path.normpath(m.src_path) == os.path.normpath(m.dst_path))

        return [m for m in role.mounts if not holds(m)]


def workspace_role(role: Role, workspace: str, image_is_dir: bool) -> Role:
    """``role`` running in ``workspace`` (a local directory: ``tx run --workspace DIR``, or
    the temporary copy of a ``memory://`` workspace): ``local_dir`` makes it the role's
    image, ``local_cwd`` its working directory instead of the current one. ``role`` is
    not modified.

    Raises:
        WorkspaceError: ``workspace`` is not a directory.
    """
    if not os.path.isdir(workspace):
        raise WorkspaceError(f"workspace {workspace!r} is not a directory")
    ws = os.path.abspath(workspace)
    if image_is_dir:
        return attrs.evolve(role, image=ws)
    return attrs.evolve(role, metadata={**role.metadata, WORKSPACE_CWD: ws})


@attrs.define
class ReplicaParam:
    """One replica: ``argv`` (argv[0] is the entrypoint as written), the environment it
    adds to the submitter's, and its log directory."""

    id: int
    argv: List[str]
    env: Dict[str, str]
    dir: str


@attrs.define
class RoleParam:
    """One role: the directory its replicas run in, the resolved entrypoint path, its
    retry settings and its replicas."""

    name: str
    cwd: str
    entrypoint: str
    max_retries: int
    retry_policy: str
    replicas: List[ReplicaParam]


@attrs.define
class LocalRequest:
    """What ``schedule`` starts: the app id, the app's log directory
    (``<log_dir>/<session>/<app_id>``), the SIGTERM-to-SIGKILL grace in seconds, roles."""

    app_id: str
    app_name: str
    session: str
    scheduler: str
    log_dir: str
    log_root: str
    cancel_timeout: float
    roles: List[RoleParam]
    #: seconds between a preemption warning (a SIGTERM tx did not send) and SIGKILL
    preempt_grace: float = 30.0

    def to_json(self) -> Dict[str, Any]:
        """The request as plain JSON types (what the supervisor reads)."""
        return attrs.asdict(self)

    def __str__(self) -> str:
        """The dryrun text: the app, then per role its settings and per replica its argv,
        the environment it adds and its log directory (argv and env as JSON)."""
        out = [
            f"local request for app {self.app_id} ({self.app_name}) on {self.scheduler}, session {self.session}",
            f"  log_dir: {self.log_dir}",
            f"  cancel_timeout: {self.cancel_timeout:g} s",
            f"  preempt_grace: {self.preempt_grace:g} s (a SIGTERM tx did not send warns every replica, "
            "SIGKILL after it)",
        ]
        for role in self.roles:
            out.append(
                f"  role {role.name}: {len(role.replicas)} replica(s), entrypoint {role.entrypoint}, "
                f"cwd {role.cwd}, max_retries {role.max_retries}, retry_policy {role.retry_policy}"
            )
            for r in role.replicas:
                out.append(f"    [{r.id}] argv: {json.dumps(r.argv)}")
                out.append(f"        env: {json.dumps(r.env)}")
                out.append(f"        logs: {r.dir}")
        return "\n".join(out) + "\n"


def default_log_root() -> str:
    """``<tmp>/tx-<uid>``: the default ``log_dir`` (created 0700 on first use)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(_tempdir(), f"tx-{uid}")


def _tempdir() -> str:
    """:func:`tempfile.gettempdir` without importing tempfile (shutil, random: ~5 ms on
    every ``tx run``) where it is not loaded yet: the first of ``$TMPDIR``, ``$TEMP``,
    ``$TMP``, /tmp, /var/tmp, /usr/tmp that is a directory this user may write, else the
    working directory. Where tempfile is loaded (its ``tempdir`` may be set), its answer."""
    tf = sys.modules.get("tempfile")
    if tf is not None:
        return tf.gettempdir()
    candidates = [os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP")]
    for d in [c for c in candidates if c] + ["/tmp", "/var/tmp", "/usr/tmp"]:
        d = os.path.abspath(d)
        if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
            return d
    return os.getcwd()


def _check_name(kind: str, name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{kind} {name!r} cannot be used as a directory name (no '/', not '.' or '..')")


def _log_root(cfg: Mapping[str, CfgVal]) -> str:
    value = cfg.get("log_dir")
    if not value:
        return default_log_root()
    path = os.path.abspath(os.path.expanduser(str(value)))
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidRunConfigException(f"log_dir {path!r} exists and is not a directory", "log_dir", cfg)
    # missing parents are created when the app is scheduled (os.makedirs), as TorchX does;
    # the nearest existing one must be a directory
    ancestor = os.path.dirname(path)
    while not os.path.exists(ancestor) and os.path.dirname(ancestor) != ancestor:
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise InvalidRunConfigException(
            f"log_dir {path!r}: {ancestor!r} is not a directory", "log_dir", cfg
        )
    return path


def _which(name: str, path: str) -> Optional[str]:
    """``shutil.which`` for POSIX (the first executable file ``name`` on ``path``), without
    importing shutil, which loads bz2 and lzma: this runs on every ``tx run``."""
    for d in path.split(os.pathsep):
        candidate = os.path.join(d or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _resolve_entrypoint(role: Role, cwd: str, path: str, dir_first: bool) -> str:
    ep = role.entrypoint
    if not ep or ep == MISSING:
        raise ValueError(f"role {role.name!r} has no entrypoint")
    local = os.path.join(cwd, ep)
    if os.sep in ep or dir_first:
        if os.path.isfile(local) and os.access(local, os.X_OK):
            return os.path.abspath(local)
        if os.sep in ep:
            why = "is not executable" if os.path.isfile(local) else "does not exist"
            raise ValueError(f"role {role.name!r}: entrypoint {local!r} {why}")
    found = _which(ep, path)
    if found is None:
        hint = " (it exists but is not executable)" if os.path.isfile(local) else ""
        raise ValueError(
            f"role {role.name!r}: entrypoint {ep!r} not found in {cwd}{hint} nor on PATH"
        )
    return os.path.abspath(found)


def _venv_bin() -> Optional[str]:
    """The ``bin`` directory of the virtual environment tx itself runs from, or None.

    ``.venv/bin/tx run ...`` without activating the venv should find that venv's
    ``python`` and ``torchrun``, as an activated venv would.
    """
    if sys.prefix == getattr(sys, "base_prefix", sys.prefix):
        return None
    return os.path.dirname(os.path.abspath(sys.executable))


def _path(role: Role, cwd: str, prepend_cwd: bool, extra_paths: Sequence[str] = ()) -> str:
    """PATH of a replica: the scheduler's ``extra_paths`` (TorchX's), the role's PATH,
    then tx's own venv ``bin`` (when tx runs from an inactive venv), then the submitter's
    PATH; the working directory last (first with ``prepend_cwd``)."""
    submitter = os.environ.get("PATH", "")
    venv = _venv_bin()
    if venv and venv in submitter.split(os.pathsep):
        venv = None
    parts = [p for p in (*extra_paths, role.env.get("PATH"), venv, submitter) if p]
    parts.insert(0, cwd) if prepend_cwd else parts.append(cwd)
    return os.pathsep.join(parts)


#: the longest app name (as :func:`tx.schedulers.ids.clean_name` leaves it) whose app id
#: fits every file name the scheduler makes of it: the registry's work directory
#: ``.new-<app_id>-<pid>`` (the longest name, next to ``.gc-`` and the cgroup ``tx-<app_id>``)
#: holds at most 255 bytes, the id adds ``-`` and a random id of up to 14 characters, and a
#: pid has up to 7 digits (Linux's PID_MAX_LIMIT, 4194304), whatever this process's pid is
NAME_MAX = 255 - len(".new-") - len("-") - 7 - len("-") - 14


def _check_name_fits(name: str, given: str, scheduler: str) -> str:
    if len(name) > NAME_MAX:
        shown = given if len(given) <= 40 else f"{given[:32]}...{given[-5:]}"
        raise ValueError(f"app name {shown!r} is {len(name)} characters long; {scheduler} names files after "
                         f"its apps and keeps at most {NAME_MAX} characters of a name: give a shorter one "
                         "(tx run --name NAME)")
    return name


def build_request(
    app: AppDef,
    cfg: Mapping[str, CfgVal],
    *,
    scheduler: str,
    session: str,
    image_is_dir: bool,
    device_count: Callable[[], int],
    warn: Callable[[str], None],
    extra_paths: Sequence[str] = (),
) -> LocalRequest:
    """Build the request for ``app``.

    Args:
        cfg: resolved run options (``log_dir``, ``prepend_cwd``,
            ``auto_set_cuda_visible_devices``, ``cancel_timeout``, ``preempt_grace``).
        image_is_dir: ``local_dir``: each role runs in ``role.image`` (an existing
            directory) and its entrypoint is looked up there first; else the current
            directory (the role's workspace, :data:`WORKSPACE_CWD`) and PATH.
        device_count: returns the host's GPU count (only called when GPUs are requested
            and ``auto_set_cuda_visible_devices`` is on).
        warn: receives warnings (GPU sharing, too few GPUs).
        extra_paths: directories put first on every replica's PATH.

    Raises:
        ValueError: an app name longer than :data:`NAME_MAX` (once cleaned), a role or
            session name that cannot be a directory name, an image that
            is not a directory (local_dir), an entrypoint that is not found.
        InvalidRunConfigException: a log_dir that is, or is under, a file that is not a directory.
    """
    _check_name("session name", session)
    if not app.roles:
        raise ValueError(f"app {app.name!r} has no roles")
    for role in app.roles:
        _check_name("role name", role.name)
    app_id = make_unique(_check_name_fits(clean_name(app.name), app.name, scheduler))
    root = _log_root(cfg)
    grace = float(cfg.get("preempt_grace") if cfg.get("preempt_grace") is not None else 30.0)  # type: ignore[arg-type]
    app_dir = os.path.join(root, session, app_id)
    specs = [(r.name, r.resource.gpu, r.num_replicas) for r in app.roles]
    cuda, warnings = _cuda.plan(specs, bool(cfg.get("auto_set_cuda_visible_devices")), device_count)
    for w in warnings:
        warn(w)
    roles = []
    found: Dict[Any, str] = {}  # (entrypoint, cwd, PATH) -> resolved path
    for idx, role in enumerate(app.roles):
        if image_is_dir:
            if not role.image or not os.path.isdir(role.image):
                # as TorchX's local_dir, the image is the directory: say how to give one
                raise ValueError(
                    f"role {role.name!r}: image {role.image!r} is not an existing directory "
                    "(local_dir runs each replica in its image directory): pass the component "
                    "--image DIR (or set image = DIR under [component:NAME] in .txconfig), "
                    "or run it on local_cwd"
                )
            cwd = os.path.abspath(role.image)
        else:
            try:
                cwd = role.metadata.get(WORKSPACE_CWD) or os.getcwd()
            except FileNotFoundError:
                raise ValueError("the current directory no longer exists (local_cwd runs replicas in it)") from None
        path = _path(role, cwd, bool(cfg.get("prepend_cwd")), extra_paths)
        key = (role.entrypoint, cwd, path)
        if key not in found:
            found[key] = _resolve_entrypoint(role, cwd, path, image_is_dir)
        replicas = []
        for k in range(role.num_replicas):
            # what macros.Values.apply does to args and env (without copying the whole role)
            sub = macros.Values(img_root=cwd, app_id=app_id, replica_id=str(k), rank0_env=RANK0_ENV).substitute
            rdir = os.path.join(app_dir, role.name, str(k))
            env = {"PYTHONUNBUFFERED": "x"}
            env.update({n: sub(v) if "$" in v else v for n, v in role.env.items()})
            env.update(replica_env(app_id=app_id, role_name=role.name, replica_id=str(k),
                                   rank0_host="localhost", role_idx=idx, num_replicas=role.num_replicas))
            env.update({
                "PATH": path,
                "TORCHELASTIC_ERROR_FILE": os.path.join(rdir, "error.json"),
                "PET_LOG_DIR": os.path.join(app_dir, "torchelastic", role.name),
            })
            env.update(_preempt.env(rdir, grace))
            if cuda is not None and cuda[idx] is not None:
                env["CUDA_VISIBLE_DEVICES"] = cuda[idx][k]
            argv = [role.entrypoint, *(sub(a) if "$" in a else a for a in role.args)]
            replicas.append(ReplicaParam(k, argv, env, rdir))
        roles.append(RoleParam(role.name, cwd, found[key], role.max_retries, str(role.retry_policy), replicas))
    return LocalRequest(
        app_id=app_id,
        app_name=app.name,
        session=session,
        scheduler=scheduler,
        log_dir=app_dir,
        log_root=root,
        cancel_timeout=float(cfg.get("cancel_timeout") or 0.0),
        roles=roles,
        preempt_grace=grace,
    )


def app_from_json(data: Dict[str, Any]) -> Optional[AppDef]:
    """The AppDef stored in a request (:func:`tx.specs.files.appdef_to_dict`); a request
    written by tx-scheduler-local 0.1 (its own role layout) is read as far as it goes;
    None when there is none or it cannot be read."""
    from tx.specs import AppDefFormatError, Resource, RetryPolicy, appdef_from_dict

    if not data.get("roles"):
        return None
    try:
        return appdef_from_dict(data, trusted=True)
    except AppDefFormatError:
        if any("mounts" in r for r in data["roles"]):
            return None  # written by the converter, yet unreadable: nothing to rebuild
    try:  # 0.1 layout: retry_policy as "RetryPolicy.X", resource without tags
        roles = []
        for r in data["roles"]:
            r = dict(r)
            r["resource"] = Resource(**r["resource"])
            r["retry_policy"] = RetryPolicy[str(r.get("retry_policy", "APPLICATION")).rsplit(".", 1)[-1]]
            roles.append(Role(**r))
        return AppDef(data.get("name", ""), roles=roles, metadata=data.get("metadata") or {})
    except (KeyError, TypeError, ValueError):
        return None


def dumps_default(obj: Any) -> str:
    """``json.dumps`` fallback for metadata values that are not JSON: their ``repr``."""
    return repr(obj)
