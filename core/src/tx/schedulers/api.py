"""The Scheduler base class every scheduler plugin implements, and its responses.

The contract is TorchX's ``torchx.schedulers.api.Scheduler``: ``submit_dryrun`` turns an
AppDef and a run config into a backend request without side effects, ``schedule`` submits
it and returns the app id, and ``describe``/``list``/``log_iter``/``cancel`` act on app ids.
"""
from __future__ import annotations

import abc
import time
from typing import (TYPE_CHECKING, Any, Callable, ClassVar, Dict, Generic, Iterable, List, Mapping, Optional,
                    Protocol, Sequence, TypeVar)

import attrs

from tx.errors import UserError
from tx.plugins import get_registry
from tx.specs.api import NONE, NULL_RESOURCE, AppDef, AppDryRunInfo, AppState, InvalidRunConfigException, Role
from tx.specs.mounts import refuse_ignored_mounts
from tx.specs.runopts import CfgVal, runopts
from tx.specs.status import Attempt, RoleStatus, RootCause
from tx.workspace.api import IMAGE_REPO_REQUIRED, find_workspace, get_workspace

if TYPE_CHECKING:
    import datetime as _dt

__all__ = [
    "add_infra_retries_opt", "add_subclass_adapter", "DEFAULT_INFRA_RETRIES", "DescribeAppResponse",
    "INFRA_RETRIES", "infra_retries", "get_default_scheduler_name",
    "get_scheduler_factories", "ListAppResponse", "PartialListError", "Scheduler", "SchedulerError",
    "SchedulerFactory",
]

T = TypeVar("T")


class SchedulerError(UserError, RuntimeError):
    """A backend refused or failed a request (sbatch rejected the job, a client command is
    missing, the API answered with an error, the backend cannot be reached). The message is
    written for users: the CLI prints it as one line. Scheduler methods raise this (or a
    subclass), not bare ValueError/KeyError, for backend conditions."""


class PartialListError(SchedulerError):
    """:meth:`Scheduler.list` could read only part of what the backend knows (one of its
    sources did not answer: Slurm's ``sacct`` beside ``squeue``, ...).

    The message says, in one line, what could not be read and what is therefore missing;
    :attr:`apps` holds what could be read, so a caller can still show it (``tx list`` prints
    those apps, then the message, and exits 1).

    Attributes:
        apps: the apps that could be listed (``List[ListAppResponse]``).
    """

    def __init__(self, message: str, apps: "List[ListAppResponse]") -> None:
        super().__init__(message)
        self.apps = list(apps)


@attrs.define
class DescribeAppResponse:
    """What a scheduler knows about one app.

    Attributes:
        app_id: the scheduler's id of the app.
        state: the app's state.
        num_restarts: restarts so far (-1 if the scheduler cannot tell).
        msg: a human-readable message (the backend's own state text, an error).
        structured_error_msg: the first failure's error, if any.
        ui_url: where to look at the app.
        roles_statuses: per-role replica states.
        roles: the roles, rebuilt from the backend as far as it allows.
        metadata: scheduler-specific extras.
        app: the whole AppDef as submitted, where the backend stores it (name, metadata
            and every role field); :meth:`tx.runner.Runner.describe` returns it. Schedulers
            keep it as :func:`tx.specs.files.appdef_to_stored` writes it; where the job has
            no copy, ``metadata["app_not_stored"]`` says why in one line; the run options
            it was submitted with are then ``metadata["run_options"]`` (a dict,
            :func:`tx.specs.files.stored_run_options`; None where the copy has none).
        root_cause: why the first failed replica failed, field by field, where the
            scheduler read it (:func:`tx.schedulers.why.root_cause`); its ``text`` is then
            ``structured_error_msg``.
        attempts: every attempt with why it ended (:class:`tx.specs.Attempt`: infra or
            user failure, the backend's reason), oldest first; empty where the scheduler
            keeps no history. ``metadata["attempts"]`` holds the same as dicts.
    """

    app_id: str = "<NOT_SET>"
    state: AppState = AppState.UNSUBMITTED
    num_restarts: int = -1
    msg: str = NONE
    structured_error_msg: str = NONE
    ui_url: Optional[str] = None
    roles_statuses: List[RoleStatus] = attrs.field(factory=list)
    roles: List[Role] = attrs.field(factory=list)
    metadata: Dict[str, Any] = attrs.field(factory=dict)
    app: Optional[AppDef] = None
    root_cause: Optional[RootCause] = None
    attempts: List[Attempt] = attrs.field(factory=list)


#: the run option that bounds retries after infrastructure failures, the same on every backend
INFRA_RETRIES = "infra_retries"
#: its default: a replica lost to the infrastructure is retried this many times
DEFAULT_INFRA_RETRIES = 3


def add_infra_retries_opt(opts: runopts) -> None:
    """Declare the run option ``infra_retries`` (int, default :data:`DEFAULT_INFRA_RETRIES`)
    in a scheduler's ``opts``, with the one meaning every backend gives it: an attempt that
    ended in a :attr:`tx.specs.FailureKind.INFRA` failure (a node lost, preemption, eviction,
    a spot reclaim) is retried up to this many times without spending the roles'
    ``max_retries``; a :attr:`~tx.specs.FailureKind.USER` failure spends ``max_retries``."""
    opts.add(
        INFRA_RETRIES, type_=int, default=DEFAULT_INFRA_RETRIES,
        help="retries after infrastructure failures (node lost, preemption, eviction, spot reclaim), "
        "not counted in the roles' max_retries; 0 fails the app on the first one",
    )


def infra_retries(cfg: Mapping[str, CfgVal]) -> int:
    """The ``infra_retries`` of a resolved run config (:data:`DEFAULT_INFRA_RETRIES` if unset).

    Raises:
        tx.specs.InvalidRunConfigException: a negative value.
    """
    value = cfg.get(INFRA_RETRIES)
    if value is None:
        return DEFAULT_INFRA_RETRIES
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidRunConfigException(f"run option {INFRA_RETRIES} must be an integer >= 0, got {value!r}",
                                        INFRA_RETRIES, cfg)
    return value


@attrs.define(frozen=True)
class ListAppResponse:
    """One app as listed by ``Scheduler.list``; ``app_handle`` is filled by the Runner.

    Attributes:
        submitted: when the app was submitted (seconds since the epoch), where the backend
            says; ``tx list`` sorts and ages apps by it.
    """

    app_id: str
    state: AppState
    app_handle: str = "<NOT_SET>"
    name: str = ""
    submitted: Optional[float] = None


class Scheduler(abc.ABC, Generic[T]):
    """Base class of schedulers.

    Args:
        backend: the scheduler's registered name (``local_cwd``, ``slurm`` ...).
        session_name: the session part of app handles (``tx`` by default).

    Required in a subclass: :meth:`_submit_dryrun`, :meth:`schedule`, :meth:`describe`,
    :meth:`list` and :meth:`_cancel_existing`. Optional: :meth:`_run_opts` (default: no
    options), :meth:`_validate` (default: every role has a resource), :meth:`log_iter`
    (default: NotImplementedError, "keeps no logs"), :meth:`log_iter_blocks`, :meth:`wait`
    (default: polls :meth:`describe`), :meth:`close`, and the class attributes
    :attr:`workspace_kind`, :attr:`runs_on_host`, :attr:`supports_mounts` and
    :attr:`mounts_advice` (or :meth:`ignored_mounts`, per kind).

    Errors: a backend that refuses or cannot be reached raises :class:`SchedulerError`;
    input that cannot run on the backend raises ``ValueError`` (from :meth:`_validate`) or
    :class:`tx.specs.InvalidRunConfigException` (run options). Times are seconds, memory
    is MB (``Resource.memMB``), as in TorchX.
    """

    #: the workspace kind this scheduler uses (``"dir"``, ``"docker"``; see
    #: :mod:`tx.workspace`), looked up in the plugin registry; None: no workspace support
    workspace_kind: ClassVar[Optional[str]] = None

    #: True for schedulers whose replicas run on the submitting host (local_cwd,
    #: local_dir, local_docker): ``tx run`` then waits and relays logs by default, as
    #: TorchX does for its local schedulers
    runs_on_host: ClassVar[bool] = False

    #: False for schedulers whose TorchX counterparts ignore mounts (``local_cwd``,
    #: ``local_dir``, ``ray``, ``slurm``, ``gcp_batch``): tx refuses the mounts of
    #: :meth:`ignored_mounts` (:meth:`submit_dryrun`); the ``torchx`` command and TorchX's
    #: Runner drop them instead, with a warning, as TorchX 0.7 does
    supports_mounts: ClassVar[bool] = True
    #: what to do instead of mounts the scheduler ignores (ends the refusal's line)
    mounts_advice: ClassVar[str] = "remove them, or run on a scheduler that honours them"

    def ignored_mounts(self, role: Role) -> List[Any]:
        """The mounts of ``role`` this scheduler would run without: all of them where
        :attr:`supports_mounts` is False, else none (a scheduler that honours some kinds
        overrides this). Returns a list of :data:`tx.specs.Mount`."""
        return [] if self.supports_mounts else list(role.mounts)

    def __init__(self, backend: str, session_name: str) -> None:
        self.backend = backend
        self.session_name = session_name

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for adapter in tuple(_subclass_adapters):
            adapter(cls)

    # -- submission --------------------------------------------------------------------
    def submit(self, app: AppDef, cfg: Mapping[str, CfgVal], workspace: Optional[str] = None) -> str:
        """Dry-run then schedule ``app``; returns the app id (a convenience for tests).

        Raises:
            what :meth:`submit_dryrun`, :meth:`build_workspace` and :meth:`schedule` raise.
        """
        if workspace:
            role = self.build_workspace(app.roles[0], workspace, self.run_opts().resolve(cfg))
            if role is not None:
                app = attrs.evolve(app, roles=[role, *app.roles[1:]])
        return self.schedule(self.submit_dryrun(app, cfg))

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Return the request :meth:`schedule` would submit, without side effects.

        Raises:
            tx.specs.InvalidRunConfigException: ``cfg`` does not fit :meth:`run_opts`.
            ValueError: the app cannot run on this scheduler (see :meth:`_validate`), or a
                role has mounts it would run without (:meth:`ignored_mounts`).
        """
        return self._dryrun_resolved(app, self.run_opts().resolve(cfg))

    #: True while :meth:`submit_dryrun_many` runs: a scheduler may then make on first use what
    #: only a trial submitted as a job of its own needs (its stored AppDef: an array keeps none)
    _many: bool = False

    def submit_dryrun_many(self, apps: Sequence[AppDef], cfg: Mapping[str, CfgVal]) -> List[AppDryRunInfo[T]]:
        """:meth:`submit_dryrun` of each app (a sweep's trials), ``cfg`` resolved once for all (a
        scheduler's own :meth:`submit_dryrun` is called for each; ``_many`` is True meanwhile).
        Raises as it does."""
        self._many = True
        try:
            if getattr(self.submit_dryrun, "__func__", None) is not Scheduler.submit_dryrun:  # its own (or a patch)
                return [self.submit_dryrun(app, cfg) for app in apps]
            resolved = self.run_opts().resolve(cfg)
            return [self._dryrun_resolved(app, dict(resolved)) for app in apps]
        finally:
            self._many = False

    def _dryrun_resolved(self, app: AppDef, resolved: Dict[str, CfgVal]) -> AppDryRunInfo[T]:
        """:meth:`submit_dryrun` of ``app`` with ``cfg`` resolved (its own copy)."""
        self._validate(app, self.backend, resolved)
        refuse_ignored_mounts(app, self.backend, self.ignored_mounts, self.mounts_advice)
        info = self._submit_dryrun(app, resolved)
        for role in app.roles:
            info = role.pre_proc(self.backend, info)
        info._app = app
        info._cfg = resolved
        info._scheduler = self.backend
        return info

    @abc.abstractmethod
    def schedule(self, dryrun_info: AppDryRunInfo[T]) -> str:
        """Submit the request and return the app id.

        Raises:
            SchedulerError: the backend refused the request or cannot be reached (one line
                for users). A failed submit leaves nothing behind on the backend.
        """

    @abc.abstractmethod
    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Build the backend request for ``app`` with the resolved ``cfg`` (no side effects)."""

    def run_opts(self) -> runopts:
        """The options this scheduler accepts: its own, then its workspace kind's (an option
        both declare is the scheduler's)."""
        opts = self._run_opts()
        ws = self.workspace_opts()
        if ws is not None:
            for key, opt in ws._opts.items():
                opts._opts.setdefault(key, opt)
        return opts

    def _run_opts(self) -> runopts:
        return runopts()

    def workspace_opts(self) -> Optional[runopts]:
        """Options of this scheduler's workspace kind (None without one, or while the kind
        is not installed)."""
        if self.workspace_kind is None:
            return None

        ws = find_workspace(self.workspace_kind)
        return ws.run_opts() if ws is not None else None

    def build_workspace(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> Optional[Role]:
        """Put ``workspace`` (a local directory) into ``role`` through the scheduler's
        :attr:`workspace_kind` and return the patched role (``role`` is not modified).

        Returns:
            the new role; None where this scheduler has no workspace support (the
            workspace is ignored, as TorchX ignores it).

        Raises:
            tx.workspace.WorkspaceError: the kind is not installed (the message names the
                distribution to install) or the build failed.
        """
        if self.workspace_kind is None:
            return None

        # replicas that run elsewhere pull the image from a registry: the kind must push it
        # (the scheduler's own fact; a run option cannot change it)
        cfg = {**cfg, IMAGE_REPO_REQUIRED: not self.runs_on_host}
        return get_workspace(self.workspace_kind).build(role, workspace, cfg)

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None) -> None:
        """Reject apps this scheduler cannot run. The default rejects roles without a
        resource (NULL_RESOURCE); schedulers that ignore resources override it.

        Raises:
            ValueError: with the role named.
        """
        for role in app.roles:
            if role.resource == NULL_RESOURCE:
                raise ValueError(
                    f"role {role.name!r} has no resource; {scheduler} needs cpu, gpu and memMB"
                )

    # -- sweeps (optional) ---------------------------------------------------------------
    #: the most trials one sweep's native request may hold (AWS Batch's 10,000 children of an
    #: array; Slurm's MaxJobCount, its arrays split at MaxArraySize); None: no limit of its
    #: own. A sweep with more trials is refused before anything is submitted.
    sweep_array_limit: ClassVar[Optional[int]] = None
    #: what :attr:`sweep_array_limit` is, for that refusal's one line
    #: (``"N trials are more than <scheduler>'s <this> of <limit>"``)
    sweep_limit_name: ClassVar[str] = "array limit"

    def submit_sweep_dryrun(
        self, trials: Sequence[AppDryRunInfo[T]], max_parallel: Optional[int]
    ) -> Optional[AppDryRunInfo[Any]]:
        """The backend's native array request for a sweep's trials, without side effects;
        None where the backend has no native array for these trials (the default): the
        Runner then submits each trial's own request, at most ``max_parallel`` running at
        once under one supervisor (docs/sweeps.md).

        Args:
            trials: each trial's request as :meth:`submit_dryrun` made it, in trial order
                (the trials differ only in arguments and env).
            max_parallel: the most trials to run at once (None: no bound).

        Raises:
            ValueError: the trials cannot run as one array on this backend.
        """
        return None

    def sweep_not_an_array(self, trials: Sequence[AppDryRunInfo[T]]) -> str:
        """Why :meth:`submit_sweep_dryrun` returned None for ``trials``, in a few words for
        the sweep's dryrun (the default: the scheduler has no native arrays)."""
        return f"{self.backend} has no native array"

    def schedule_sweep(self, dryrun_info: AppDryRunInfo[Any]) -> List[str]:
        """Submit what :meth:`submit_sweep_dryrun` returned; returns each trial's app id, in
        trial order (each one :meth:`describe`, :meth:`log_iter` and :meth:`cancel` take).

        Raises:
            SchedulerError: the backend refused the request or cannot be reached.
            NotImplementedError: the scheduler has no native arrays.
        """
        raise NotImplementedError(f"{self.backend} has no native sweep arrays")

    def states_of(self, app_ids: Sequence[str]) -> Optional[Dict[str, AppState]]:
        """The states of many apps (a sweep's trials) in as few backend calls as the backend
        allows (AWS Batch: one list page per 100 children of an array job); an app missing
        from the answer is unknown to the backend. None (the default): no such query, the
        Runner lists the scheduler's apps or describes each.

        Raises:
            SchedulerError: the backend cannot be reached or answered with an error.
        """
        return None

    # -- queries -------------------------------------------------------------------------
    @abc.abstractmethod
    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """What the backend knows of ``app_id`` now: its state, per-replica statuses, and
        for a pending app why it waits (``msg``), for a failed one why it failed
        (``structured_error_msg``: first failed replica, exit code or signal, the backend's
        reason, last lines). Must work from any process (no state only in memory).

        Returns:
            the description, or None if the backend does not know the app (never raises
            for an unknown app id).

        Raises:
            SchedulerError: the backend cannot be reached or answered with an error.
        """

    @abc.abstractmethod
    def list(self) -> List[ListAppResponse]:
        """The apps of this scheduler that tx submitted and the backend still knows (its
        own notion of "all": a queue, a namespace, a state directory).

        A backend with two sources (Slurm's squeue and sacct, ...) of which one did not
        answer raises :class:`PartialListError` with what the other gave: never a silent,
        incomplete list.

        Raises:
            PartialListError: only part could be read (its ``apps``; the message says what is
                missing).
            SchedulerError: the backend cannot be reached or answered with an error.
        """

    def exists(self, app_id: str) -> bool:
        """True if the backend knows ``app_id`` (see :meth:`describe`)."""
        return self.describe(app_id) is not None

    def cancel(self, app_id: str) -> None:
        """Cancel the app if it exists; idempotent and non-blocking (the app reaches
        CANCELLED later; :meth:`wait` for it). An unknown app id is not an error.

        Raises:
            SchedulerError: the backend cannot be reached or refused.
        """
        if self.exists(app_id):
            self._cancel_existing(app_id)

    def cancel_many(self, app_ids: Sequence[str]) -> None:
        """Cancel each app of ``app_ids`` (a sweep's trials) as :meth:`cancel` does. The
        default calls :meth:`cancel` for each; a backend that cancels several apps in one
        call (Slurm's ``scancel ID...``) overrides it.

        Raises:
            SchedulerError: the backend cannot be reached or refused.
        """
        for app_id in app_ids:
            self.cancel(app_id)

    @abc.abstractmethod
    def _cancel_existing(self, app_id: str) -> None:
        """Cancel an app known to exist (called by :meth:`cancel`).

        Raises:
            SchedulerError: the backend refused.
        """

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[_dt.datetime] = None,
        until: Optional[_dt.datetime] = None,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name``, each with its ``\\n``.

        Args:
            regex: keep only lines where it is found (``re.search``).
            since, until: time window (timezone-aware or naive local datetimes), where the
                backend records times.
            should_tail: follow until the app is terminal.
            streams: a :class:`tx.schedulers.Stream` (None: the scheduler's default).

        Returns:
            an iterable of lines, each ending with ``\\n`` (the last one may not, when the
            replica's output does not); lazy where the backend allows, so that tailing
            yields lines as they arrive.

        Raises:
            ValueError: a stream this scheduler does not keep, or a replica that the app
                does not have.
            SchedulerError: the backend cannot be reached, or the logs are gone.
            NotImplementedError: the scheduler keeps no logs.
        """
        raise NotImplementedError(f"{self.backend} does not support logs")

    def log_iter_blocks(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[bytes]:
        """The same text as :meth:`log_iter` (no filtering), as UTF-8 byte blocks that each
        end on a line boundary (the last block may end mid-line when the replica's output
        does). The CLI relays these with a per-line prefix; schedulers whose logs are files
        override it to skip per-line work. The default batches :meth:`log_iter` into blocks
        of up to 64 KB; when tailing, it yields every line at once (a line that arrives is
        shown without waiting for the next).
        """
        batch: List[str] = []
        size = 0
        limit = 0 if should_tail else 65536
        for line in self.log_iter(app_id, role_name, k, should_tail=should_tail, streams=streams):
            batch.append(line)
            size += len(line)
            if size >= limit:
                yield "".join(batch).encode("utf-8", "replace")
                batch, size = [], 0
        if batch:
            yield "".join(batch).encode("utf-8", "replace")

    def wait(
        self, app_id: str, timeout: Optional[float] = None, poll_interval: float = 1.0
    ) -> Optional[DescribeAppResponse]:
        """Block until the app is terminal (or ``timeout`` seconds pass); return its last
        description, None if the scheduler does not know it. The default polls
        :meth:`describe` every ``poll_interval`` seconds; schedulers that can be notified
        override it."""

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            desc = self.describe(app_id)
            if desc is None or desc.state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED):
                return desc
            if deadline is not None and time.monotonic() >= deadline:
                return desc
            time.sleep(poll_interval if deadline is None else max(0.0, min(poll_interval, deadline - time.monotonic())))

    def close(self) -> None:
        """Release clients and resources (connections, threads); idempotent. Optional."""

    def __enter__(self) -> "Scheduler[T]":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: what :func:`add_subclass_adapter` added, called in order on each new Scheduler subclass
_subclass_adapters: List[Callable[[type], None]] = []


def add_subclass_adapter(adapter: Callable[[type], None]) -> None:
    """Call ``adapter(cls)`` on every subclass of :class:`Scheduler`: on each one that
    exists now, and on each one defined later, when its ``class`` statement runs (through
    ``Scheduler.__init_subclass__``). Adding the same adapter again does nothing.

    This is how a compatibility plugin fits classes written against another scheduler API to
    tx's (tx-torchx-compat: TorchX 0.7's ``_validate(self, app, scheduler)`` and
    ``WorkspaceMixin``). It is a function, not a pluggy hook, because it must act where a
    class is defined (at import, also while plugins load, and for schedulers that are
    constructed directly rather than through the registry). See docs/hooks.md.

    ``adapter`` may set attributes of ``cls``; it must not raise (an exception would fail
    the ``class`` statement of the scheduler being defined).
    """
    if adapter in _subclass_adapters:
        return
    _subclass_adapters.append(adapter)
    seen = set()
    todo = list(Scheduler.__subclasses__())
    while todo:
        cls = todo.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        adapter(cls)
        todo.extend(cls.__subclasses__())


class SchedulerFactory(Protocol):
    """What a scheduler plugin registers (TorchX's ``torchx.schedulers.SchedulerFactory``):
    ``factory(session_name, **kwargs) -> Scheduler``."""

    def __call__(self, session_name: str, **kwargs: Any) -> "Scheduler[Any]":
        ...


def get_scheduler_factories() -> Dict[str, Any]:
    """Scheduler name -> factory for every registered scheduler (factories import lazily)."""

    reg = get_registry()
    return {name: _LazyFactory(name) for name in reg.names("schedulers")}


def get_default_scheduler_name(names: Optional[Sequence[str]] = None) -> Optional[str]:
    """The scheduler used when none is named: ``local_cwd`` when installed, else the first
    registered scheduler, else None. ``names``: the installed scheduler names (default:
    the registry's). The CLI's ``[cli:run] scheduler`` setting comes before this rule."""
    if names is None:
        names = get_registry().names("schedulers")
    if "local_cwd" in names:
        return "local_cwd"
    return names[0] if names else None


class _LazyFactory:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:

        reg = get_registry().get("schedulers", self.name)
        assert reg is not None
        return reg.load()(session_name, **kwargs)
