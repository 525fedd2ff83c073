"""TorchX 0.7's scheduler API where it differs from tx's, for schedulers written against
``torchx.schedulers.api`` and ``torchx.workspace.api``:

* :class:`WorkspaceMixin`: a scheduler that derives from it builds a workspace by
  ``build_workspace_and_update_role`` (TorchX's way) instead of through a registered
  workspace kind (``Scheduler.workspace_kind``, tx's way);
* ``_validate(self, app, scheduler)``: TorchX 0.7's signature, without tx's ``cfg``;
* :class:`IgnoresMounts`: mounts ignored (with a warning) where the scheduler has none.

:func:`adapt_class` fits such a class to tx's Scheduler contract when the class is defined;
importing this module adds it to tx-core with :func:`tx.schedulers.api.add_subclass_adapter`
(every ``torchx.schedulers``, ``torchx.workspace`` and ``torchx.runner.api`` shim imports
this module, and so does :mod:`tx_torchx_compat.adapter`). tx's own schedulers are left as
they are.
"""
import abc
import copy
import inspect
import sys
from typing import Any, Generic, Mapping, Optional, TypeVar

from tx.schedulers.api import Scheduler, add_subclass_adapter
from tx.specs.api import AppDef, Role
from tx.specs.runopts import CfgVal, runopts

T = TypeVar("T")

__all__ = ["IgnoresMounts", "WorkspaceMixin", "adapt_class", "validate_takes_cfg"]


class IgnoresMounts:
    """Mix-in (before the tx scheduler among the bases) for the ``torchx.schedulers`` class of
    a scheduler that supports no mounts (``supports_mounts`` False: ``local_cwd``,
    ``local_dir``, ``ray``, ``slurm``, ``gcp_batch``): :meth:`submit_dryrun` drops the
    roles' mounts it would run without (``ignored_mounts``), as TorchX 0.7 ignores them,
    with one line on stderr naming them; tx's class refuses them."""

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> Any:
        """The scheduler's ``submit_dryrun`` of ``app`` without the mounts the scheduler
        would run without; raises as that does."""
        from tx.specs.mounts import without_mounts

        if hasattr(self, "ignored_mounts"):
            app, dropped = without_mounts(app, self.ignored_mounts)
            if dropped:
                print(f"torchx: warning: the {getattr(self, 'backend', 'this')} scheduler supports no mounts; "
                      f"ignored, as TorchX does: {dropped}", file=sys.stderr)
        return super().submit_dryrun(app, cfg)  # type: ignore[misc]


class WorkspaceMixin(Generic[T]):
    """TorchX 0.7's workspace mix-in (``torchx.workspace.api.WorkspaceMixin``): a
    :class:`tx.schedulers.api.Scheduler` subclass that also derives from it builds
    workspaces by :meth:`build_workspace_and_update_role` and adds :meth:`workspace_opts`
    to its run options.

    tx calls :meth:`build_workspace_and_update_role` on a deep copy of the first role
    (:meth:`build_workspace`), so the caller's AppDef is never modified. The mix-in may come
    before or after ``Scheduler`` among the bases (:func:`adapt_class`).
    """

    def workspace_opts(self) -> runopts:
        """Run options the workspace adds (default: none)."""
        return runopts()

    @abc.abstractmethod
    def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        """Build ``workspace`` (a local directory or fsspec URL) into ``role``, modifying
        ``role`` in place (usually its ``image``)."""

    def build_workspace(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> Optional[Role]:
        """tx's ``Scheduler.build_workspace`` for TorchX's mix-in: a deep copy of ``role``
        given to :meth:`build_workspace_and_update_role`, returned.

        Raises:
            what :meth:`build_workspace_and_update_role` raises.
        """
        patched = copy.deepcopy(role)
        self.build_workspace_and_update_role(patched, workspace, cfg)
        return patched

    def dryrun_push_images(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> T:
        """The images to push for ``app`` (remote schedulers); not implemented by default.

        Raises:
            NotImplementedError: always, unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} does not push images")

    def push_images(self, images_to_push: T) -> None:
        """Push what :meth:`dryrun_push_images` returned; not implemented by default.

        Raises:
            NotImplementedError: always, unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} does not push images")


def validate_takes_cfg(fn: Any) -> bool:
    """Whether a ``_validate`` implementation accepts the ``cfg`` argument (tx's and
    TorchX HEAD's signature) rather than TorchX 0.7's ``(self, app, scheduler)``; True
    where the signature cannot be read."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return True
    return len(params) >= 4  # self, app, scheduler, cfg


def _with_cfg(validate: Any) -> Any:
    """``validate(self, app, scheduler)`` as tx calls it: ``(self, app, scheduler, cfg=None)``."""

    def _validate(self: Any, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None) -> None:
        return validate(self, app, scheduler)

    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(_validate, attr, getattr(validate, attr, getattr(_validate, attr)))
    return _validate


def adapt_class(cls: type) -> None:
    """Fit ``cls``, a new :class:`tx.schedulers.api.Scheduler` subclass, to tx's contract
    where it follows TorchX 0.7's (added to tx-core by :func:`add_subclass_adapter`):

    * a ``_validate`` the class defines with TorchX 0.7's signature ``(self, app,
      scheduler)`` is wrapped to take (and ignore) tx's ``cfg``;
    * a :class:`WorkspaceMixin` subclass that lists the mix-in after ``Scheduler`` gets the
      mix-in side's ``build_workspace`` and ``workspace_opts`` (``Scheduler``'s would win by
      the method resolution order; TorchX adds a mix-in's options whatever the order), unless
      a class before ``Scheduler`` defines its own.
    """
    validate = cls.__dict__.get("_validate")
    if inspect.isfunction(validate) and not validate_takes_cfg(validate):
        cls._validate = _with_cfg(validate)  # type: ignore[attr-defined]
    if issubclass(cls, WorkspaceMixin):
        for name in ("build_workspace", "workspace_opts"):
            owners = [k for k in cls.__mro__ if name in k.__dict__]
            if owners[0] is Scheduler:  # the mix-in side's is the next one (WorkspaceMixin's at the latest)
                setattr(cls, name, owners[1].__dict__[name])


add_subclass_adapter(adapt_class)
