"""TorchX 0.7.0's in-process local scheduler, for projects that subclass it.

Projects such as NeMo-Run subclass ``torchx.schedulers.local_scheduler.LocalScheduler``
and use its parts directly: the app table ``self._apps`` of :class:`_LocalAppDef`,
``_to_popen_request(app, cfg)`` returning a :class:`PopenRequest`, ``schedule``,
``describe`` and ``log_iter`` of the base class, :class:`LogIterator`, the log file names.
This module provides those names with TorchX 0.7.0's documented behaviour
(https://pytorch.org/torchx/0.7.0/schedulers/local.html), written for tx:

* replicas are child processes of this process (``start_new_session``), one per replica,
  run in ``ImageProvider.get_cwd(image)`` with the submitter's environment, the role's env,
  ``TORCHX_RANK0_HOST=localhost``, ``TORCHELASTIC_ERROR_FILE`` and ``PET_LOG_DIR``;
* their output is written to ``<log_dir>/<session>/<app_id>/<role>/<k>/stdout.log``,
  ``stderr.log`` and ``combined.log`` (both, in arrival order); without the ``log_dir`` run
  option, under a temporary directory removed by :meth:`LocalScheduler.close`;
* the app's state is known only to the process that scheduled it (tx's own ``local_cwd``
  keeps it on disk instead); a finished app's ``SUCCESS`` file records each replica's pid,
  exit code and log files;
* cancel sends SIGTERM to each replica's process group, then SIGKILL after 10 s.

It is a :class:`tx.schedulers.Scheduler` whose replicas run on this host
(``runs_on_host``): ``tx run``/``torchx run`` wait for the app in the process that
scheduled it.
"""
import abc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Callable, Dict, Iterable, List, Mapping, Optional, TypedDict

from tx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
from tx.schedulers.ids import make_unique
from tx.schedulers.streams import Stream, filter_regex, split_lines_iterator
from tx.specs.api import NONE, AppDef, AppDryRunInfo, AppState, Role, is_terminal, macros
from tx.specs.runopts import CfgVal, runopts

__all__ = [
    "COMBINED_LOG", "CWDImageProvider", "ENV_CUDA_VISIBLE_DEVICES", "ImageProvider", "LocalDirectoryImageProvider",
    "LocalOpts", "LocalScheduler", "LogIterator", "PopenRequest", "ReplicaParam", "STDERR_LOG", "STDOUT_LOG",
]

#: a replica's log files, in ``<log_dir>/<session>/<app_id>/<role>/<k>/``
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
COMBINED_LOG = "combined.log"
ENV_CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"

AppId = str
AppName = str
RoleName = str

_KILL_AFTER = 10.0  # seconds from SIGTERM to SIGKILL on cancel


def _make_unique(name: str) -> str:
    """``make_unique`` of ``torchx.schedulers.local_scheduler`` as it is now (TorchX's tests
    patch that module's name to fix app ids), else :func:`tx.schedulers.ids.make_unique`."""
    module = sys.modules.get("tx_torchx_compat.torchx.schedulers.local_scheduler")
    return getattr(module, "make_unique", make_unique)(name)


@dataclass
class ReplicaParam:
    """What one replica is started with: argv, env (added to the submitter's), the log
    files (None: this process's stdout/stderr) and the working directory."""

    args: List[str]
    env: Dict[str, str]
    stdout: Optional[str] = None
    stderr: Optional[str] = None
    combined: Optional[str] = None
    cwd: Optional[str] = None


class ImageProvider(abc.ABC):
    """Turns a role's image into a directory on this host (see the two providers)."""

    def fetch_role(self, role: Role) -> str:
        """:meth:`fetch` of ``role.image``; an override may also change the role."""
        return self.fetch(role.image)

    @abc.abstractmethod
    def fetch(self, image: str) -> str:
        """The directory of ``image`` on this host ("" if there is none)."""

    def get_replica_param(self, img_root: str, role: Role, stdout: Optional[str] = None,
                          stderr: Optional[str] = None, combined: Optional[str] = None) -> ReplicaParam:
        """The :class:`ReplicaParam` of one replica of ``role`` (macros already applied)."""
        return ReplicaParam([self.get_entrypoint(img_root, role), *role.args], dict(role.env),
                            stdout, stderr, combined, self.get_cwd(role.image))

    def get_cwd(self, image: str) -> Optional[str]:
        """The replicas' working directory (None: this process's)."""
        return None

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        """The program to run: ``role.entrypoint`` under ``img_root``."""
        return os.path.join(img_root, role.entrypoint)


class LocalOpts(TypedDict, total=False):
    """The run options of :class:`LocalScheduler`."""

    log_dir: str
    prepend_cwd: Optional[bool]
    auto_set_cuda_visible_devices: Optional[bool]


class LocalDirectoryImageProvider(ImageProvider):
    """The image is an existing directory: replicas run in it.

    Raises (``fetch``):
        ValueError: the image is not an existing directory.
    """

    def __init__(self, cfg: Optional[Mapping[str, Any]] = None) -> None:
        self.cfg = cfg

    def fetch(self, image: str) -> str:
        if not os.path.isdir(image):
            raise ValueError(f"image {image!r} is not an existing directory")
        return image

    def get_cwd(self, image: str) -> Optional[str]:
        return image

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        return role.entrypoint


class CWDImageProvider(ImageProvider):
    """The image is ignored: replicas run in the current directory."""

    def __init__(self, cfg: Optional[Mapping[str, Any]] = None) -> None:
        self.cfg = cfg

    def fetch(self, image: str) -> str:
        return os.getcwd()

    def get_cwd(self, image: str) -> Optional[str]:
        return os.getcwd()

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        return role.entrypoint


def _join_PATH(*paths: Optional[str]) -> str:  # noqa: N802 - TorchX's name
    """Join PATH parts, skipping empty ones and stray separators."""
    return os.pathsep.join(p.strip(os.pathsep) for p in paths if p and p.strip(os.pathsep))


@dataclass
class _LocalReplica:
    """One running replica: its process and its open log files."""

    role_name: RoleName
    replica_id: int
    proc: subprocess.Popen
    stdout: Optional[IO[bytes]] = None
    stderr: Optional[IO[bytes]] = None
    combined: Optional[IO[bytes]] = None
    error_file: str = "<N/A>"
    pumps: List[threading.Thread] = field(default_factory=list)

    def terminate(self) -> None:
        """SIGTERM to the replica's process group; safe to call again."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass

    def close_files(self) -> None:
        """Wait for the output to be copied, then close the log files."""
        for t in self.pumps:
            t.join(timeout=5)
        for f in (self.stdout, self.stderr, self.combined):
            if f is not None and not f.closed:
                f.close()

    def is_alive(self) -> bool:
        return self.proc.poll() is None

    def failed(self) -> bool:
        return not self.is_alive() and self.proc.returncode != 0


class _LocalAppDef:
    """An app of :class:`LocalScheduler`: its replicas by role, state and log directory."""

    def __init__(self, id: str, log_dir: str) -> None:  # noqa: A002 - TorchX's name
        self.id = id
        self.log_dir = log_dir
        self.role_replicas: Dict[RoleName, List[_LocalReplica]] = {}
        self.state: AppState = AppState.PENDING
        self.last_updated: float = -1
        self._closed = False

    def add_replica(self, role_name: str, replica: _LocalReplica) -> None:
        self.role_replicas.setdefault(role_name, []).append(replica)

    def set_state(self, state: AppState) -> None:
        self.last_updated = time.time()
        self.state = state

    def _replicas(self) -> List[_LocalReplica]:
        return [r for rs in self.role_replicas.values() for r in rs]

    def kill(self) -> None:
        """SIGTERM every replica's process group, SIGKILL what is left after 10 s."""
        for r in self._replicas():
            r.terminate()
        deadline = time.monotonic() + _KILL_AFTER
        for r in self._replicas():
            try:
                r.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(r.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                r.proc.wait()

    def get_structured_error_msg(self) -> str:
        """The JSON of the earliest replica error file (torchelastic's), or NONE."""
        files = [r.error_file for r in self._replicas() if os.path.isfile(r.error_file)]
        if not files:
            return NONE
        with open(min(files, key=os.path.getmtime)) as f:
            return json.dumps(json.load(f))

    def close(self) -> None:
        """Stop the replicas, close the log files and write ``<log_dir>/SUCCESS`` (the
        app's final state and each replica's pid, exit code and logs); idempotent."""
        if self._closed:
            return
        self._closed = True
        self.kill()
        for r in self._replicas():
            r.close_files()
        info = {
            "app_id": self.id, "log_dir": self.log_dir, "final_state": self.state.name,
            "last_updated": self.last_updated,
            "roles": {role: [{"replica_id": r.replica_id, "pid": r.proc.pid, "exitcode": r.proc.returncode,
                              "stdout": getattr(r.stdout, "name", "<CONSOLE>"),
                              "stderr": getattr(r.stderr, "name", "<CONSOLE>"), "error_file": r.error_file}
                             for r in rs] for role, rs in self.role_replicas.items()},
        }
        if os.path.isdir(self.log_dir):
            with open(os.path.join(self.log_dir, "SUCCESS"), "w") as f:
                json.dump(info, f, indent=2)

    def __repr__(self) -> str:
        pids = {role: [r.proc.pid for r in rs] for role, rs in self.role_replicas.items()}
        return f"{{app_id:{self.id}, state:{self.state}, pid_map:{pids}}}"


@dataclass
class PopenRequest:
    """What :meth:`LocalScheduler.schedule` starts: each role's replicas and log dirs."""

    app_id: AppId
    log_dir: str
    role_params: Dict[RoleName, List[ReplicaParam]]
    role_log_dirs: Dict[RoleName, List[str]]


def _pump(src: IO[bytes], own: IO[bytes], combined: Optional[IO[bytes]], lock: threading.Lock) -> None:
    """Copy a replica's output pipe to its log file and to the combined log."""
    fd = src.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        own.write(chunk)
        if combined is not None:
            with lock:
                combined.write(chunk)
    src.close()


class LocalScheduler(Scheduler):
    """TorchX 0.7.0's local scheduler (see the module docs).

    Args:
        session_name: the session part of app handles.
        image_provider_class: called with the run options, returns the
            :class:`ImageProvider` (:class:`CWDImageProvider`: ``local_cwd``).
        cache_size: finished apps kept in memory (the oldest finished one is dropped).
        extra_paths: directories put first on every replica's PATH.

    Raises:
        ValueError: ``cache_size`` < 1.
    """

    runs_on_host = True

    def __init__(self, session_name: str, image_provider_class: Callable[[Any], ImageProvider],
                 cache_size: int = 100, extra_paths: Optional[List[str]] = None) -> None:
        super().__init__("local", session_name)
        if cache_size <= 0:
            raise ValueError("cache_size must be greater than zero")
        self._apps: Dict[AppId, _LocalAppDef] = {}
        self._image_provider_class = image_provider_class
        self._cache_size = cache_size
        self._extra_paths: List[str] = list(extra_paths or [])
        self._base_log_dir: Optional[str] = None
        self._created_tmp_log_dir = False

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("log_dir", type_=str, default=None, help="directory of the replicas' stdout/stderr log files")
        opts.add("prepend_cwd", type_=bool, default=False,
                 help="put the working directory first on the replicas' PATH (default: last)")
        opts.add("auto_set_cuda_visible_devices", type_=bool, default=False,
                 help="give each replica of a GPU role its own CUDA_VISIBLE_DEVICES")
        return opts

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None) -> None:
        """Resources are not enforced locally: every app is accepted."""

    # -- request -----------------------------------------------------------------------------
    def _get_app_log_dir(self, app_id: str, cfg: Mapping[str, Any]) -> str:
        """``<log_dir>/<session>/<app_id>``; without ``log_dir`` a temporary directory
        (removed by :meth:`close`) stands for it."""
        self._base_log_dir = cfg.get("log_dir")
        if not self._base_log_dir:
            self._base_log_dir = tempfile.mkdtemp(prefix="torchx_")
            self._created_tmp_log_dir = True
        return os.path.join(str(self._base_log_dir), self.session_name, app_id)

    def _to_popen_request(self, app: AppDef, cfg: Mapping[str, Any]) -> PopenRequest:
        """The :class:`PopenRequest` of ``app`` (macros applied per replica)."""
        app_id = _make_unique(app.name)
        provider = self._image_provider_class(cfg)
        app_log_dir = self._get_app_log_dir(app_id, cfg)
        role_params: Dict[str, List[ReplicaParam]] = {}
        role_log_dirs: Dict[str, List[str]] = {}
        for role in app.roles:
            img_root = provider.fetch_role(role)
            env = dict(role.env)
            env["PATH"] = _join_PATH(*self._extra_paths, env.get("PATH"))
            cwd = provider.get_cwd(role.image)
            if cwd:
                env["PATH"] = _join_PATH(cwd, env["PATH"]) if cfg.get("prepend_cwd") else _join_PATH(env["PATH"], cwd)
            role.env = env  # as TorchX: the role's PATH shows in the dryrun's app
            params, dirs = role_params.setdefault(role.name, []), role_log_dirs.setdefault(role.name, [])
            for k in range(role.num_replicas):
                values = macros.Values(img_root=img_root, app_id=app_id, replica_id=str(k),
                                       rank0_env="TORCHX_RANK0_HOST")
                replica = values.apply(role)
                replica.env["TORCHX_RANK0_HOST"] = "localhost"
                rdir = os.path.join(app_log_dir, role.name, str(k))
                replica.env.setdefault("TORCHELASTIC_ERROR_FILE", os.path.join(rdir, "error.json"))
                replica.env.setdefault("PET_LOG_DIR", os.path.join(app_log_dir, "torchelastic", role.name))
                params.append(provider.get_replica_param(img_root, replica, os.path.join(rdir, STDOUT_LOG),
                                                         os.path.join(rdir, STDERR_LOG),
                                                         os.path.join(rdir, COMBINED_LOG)))
                dirs.append(rdir)
        self._set_cuda_visible_devices(role_params, app, cfg)
        return PopenRequest(app_id, app_log_dir, role_params, role_log_dirs)

    def _set_cuda_visible_devices(self, role_params: Dict[str, List[ReplicaParam]], app: AppDef,
                                  cfg: Mapping[str, Any]) -> None:
        if not cfg.get("auto_set_cuda_visible_devices"):
            return
        wanted = sum(r.num_replicas * r.resource.gpu for r in app.roles)
        if wanted <= 0 or wanted > self._cuda_device_count():
            return
        start = 0
        for role in app.roles:
            for param in role_params[role.name] if role.resource.gpu > 0 else []:
                param.env[ENV_CUDA_VISIBLE_DEVICES] = ",".join(str(i) for i in range(start, start + role.resource.gpu))
                start += role.resource.gpu

    def _cuda_device_count(self) -> int:
        """GPUs on this host (``nvidia-smi -L``; 0 without it)."""
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return 0
        return len([ln for ln in out.splitlines() if ln.strip()])

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo:
        import pprint  # only for the dryrun's text

        return AppDryRunInfo(self._to_popen_request(app, cfg), lambda r: pprint.pformat(asdict(r), indent=2, width=80))

    # -- running -----------------------------------------------------------------------------
    def _get_file_io(self, path: Optional[str]) -> Optional[IO[bytes]]:
        """``path`` opened for writing (parents made), or None.

        Raises:
            FileExistsError: the file exists (another app wrote it).
        """
        if not path:
            return None
        if os.path.isfile(path):
            raise FileExistsError(f"log file {path} already exists: use another log_dir or app name")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "wb", buffering=0)

    def _popen(self, role_name: RoleName, replica_id: int, replica_params: ReplicaParam) -> _LocalReplica:
        """Start one replica with its output copied to its log files."""
        params = replica_params
        out, err, combined = (self._get_file_io(p) for p in (params.stdout, params.stderr, params.combined))
        env = {**os.environ, **params.env}
        env["PATH"] = _join_PATH(params.env.get("PATH"), os.environ.get("PATH"))
        env.setdefault("PYTHONUNBUFFERED", "x")
        proc = subprocess.Popen(params.args, env=env, cwd=params.cwd, start_new_session=True,
                                stdout=subprocess.PIPE if out else None, stderr=subprocess.PIPE if err else None)
        replica = _LocalReplica(role_name, replica_id, proc, out, err, combined,
                                env.get("TORCHELASTIC_ERROR_FILE", "<N/A>"))
        lock = threading.Lock()
        for pipe, own in ((proc.stdout, out), (proc.stderr, err)):
            if pipe is not None and own is not None:
                t = threading.Thread(target=_pump, args=(pipe, own, combined, lock), daemon=True)
                t.start()
                replica.pumps.append(t)
        return replica

    def _evict_lru(self) -> bool:
        done = [a for a in self._apps.values() if is_terminal(a.state)]
        if not done:
            return False
        del self._apps[min(done, key=lambda a: a.last_updated).id]
        return True

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        """Start every replica of the request; returns the app id.

        Raises:
            IndexError: ``cache_size`` apps are running.
            FileExistsError: the app's log directory exists.
        """
        if len(self._apps) >= self._cache_size and not self._evict_lru():
            raise IndexError(f"{self._cache_size} apps are running (cache_size): raise cache_size")
        request: PopenRequest = dryrun_info.request
        os.makedirs(request.log_dir)
        app = _LocalAppDef(request.app_id, request.log_dir)
        for role_name, params in request.role_params.items():
            for k, p in enumerate(params):
                os.makedirs(request.role_log_dirs[role_name][k], exist_ok=True)
                app.add_replica(role_name, self._popen(role_name, k, p))
        app.set_state(AppState.RUNNING)
        self._apps[request.app_id] = app
        return request.app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state (RUNNING while a replica runs, then FAILED if one failed, else
        SUCCEEDED); None for an app this process did not schedule."""
        app = self._apps.get(app_id)
        if app is None:
            return None
        if not is_terminal(app.state):
            replicas = app._replicas()
            if any(r.is_alive() for r in replicas):
                state = AppState.RUNNING
            else:
                state = AppState.FAILED if any(r.failed() for r in replicas) else AppState.SUCCEEDED
            app.set_state(state)
        if is_terminal(app.state):
            app.close()
        resp = DescribeAppResponse()
        resp.app_id = app_id
        resp.state = app.state
        resp.num_restarts = 0
        resp.structured_error_msg = app.get_structured_error_msg()
        resp.ui_url = f"file://{app.log_dir}"
        return resp

    def log_iter(self, app_id: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                 since: Any = None, until: Any = None, should_tail: bool = False,
                 streams: Optional[Stream] = None) -> Iterable[str]:
        """Lines of the replica's log file (``streams``: None or COMBINED, STDOUT, STDERR);
        ``since``/``until`` are ignored, as in TorchX.

        Raises:
            KeyError: an app this process did not schedule.
            RuntimeError: the replica has no log file.
        """
        app = self._apps[app_id]
        name = {None: COMBINED_LOG, Stream.COMBINED: COMBINED_LOG, Stream.STDOUT: STDOUT_LOG,
                Stream.STDERR: STDERR_LOG}[streams]
        path = os.path.join(app.log_dir, role_name, str(k), name)
        if not os.path.isfile(path):
            raise RuntimeError(f"app {app_id} has no log file {path} (was it run with log files?)")
        lines: Iterable[str] = split_lines_iterator(LogIterator(app_id, path, self, should_tail=should_tail))
        return filter_regex(regex, lines) if regex else lines

    def list(self) -> List[ListAppResponse]:
        """Not supported (apps are known only to the process that scheduled them).

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("apps of the local scheduler cannot be listed: they are not persisted")

    def _cancel_existing(self, app_id: str) -> None:
        app = self._apps[app_id]
        app.set_state(AppState.CANCELLED)
        app.close()

    def close(self) -> None:
        """Stop every app's replicas; remove the temporary log directory, if one was made."""
        for app in self._apps.values():
            app.kill()
            for r in app._replicas():
                r.close_files()
        if self._base_log_dir and self._created_tmp_log_dir:
            shutil.rmtree(self._base_log_dir, ignore_errors=True)


class LogIterator:
    """The chunks of a replica's log file, followed until the app is terminal
    (``scheduler.describe``) when the app is still running at ``iter()``, whatever
    ``should_tail`` says: TorchX 0.7.0's iterator checks the app's state there, so
    ``log_iter`` of a running app returns all of its lines (``should_tail=False`` only
    stops at the end of the file of an app already finished).

    Raises (when iterated):
        RuntimeError: the app finished without writing the file.
    """

    def __init__(self, app_id: str, log_file: str, scheduler: Scheduler, should_tail: bool = True) -> None:
        self._app_id = app_id
        self._log_file = log_file
        self._scheduler = scheduler
        self._should_tail = should_tail
        self._app_finished = not should_tail
        self._fp: Optional[IO[str]] = None

    def _check_finished(self) -> None:
        desc = self._scheduler.describe(self._app_id)
        self._app_finished = not desc or is_terminal(desc.state)

    def __iter__(self) -> "LogIterator":
        while True:
            self._check_finished()
            if os.path.isfile(self._log_file):
                self._fp = open(self._log_file, "rt", newline="\n", errors="replace")
                return self
            if self._app_finished:
                raise RuntimeError(f"app {self._app_id} finished without writing {self._log_file}")
            time.sleep(0.1)

    def __next__(self) -> str:
        assert self._fp is not None, "iter() first"
        while True:
            chunk = self._fp.read(65536)
            if chunk:
                return chunk
            if self._app_finished:
                self._fp.close()
                raise StopIteration
            time.sleep(0.1)
            self._check_finished()
