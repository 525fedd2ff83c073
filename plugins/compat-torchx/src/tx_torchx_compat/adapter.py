"""Schedulers of TorchX's ``torchx.schedulers`` entry-point group, run by tx.

:mod:`tx_torchx_compat.hooks` registers scheduler ``NAME`` of that group as
``tx_torchx_compat.adapter:NAME``; this module's ``__getattr__`` returns the factory that
loads the entry point, calls it as TorchX would (``factory(session_name, **kwargs)``), and
adapts the scheduler it returns to tx's replica environment contract
(:mod:`tx.schedulers.env`), which TorchX 0.7 schedulers do not know:

* every role's env gets ``TX_APP_ID``/``TORCHX_APP_ID`` = ``${app_id}``,
  ``TX_REPLICA_ID``/``TORCHX_REPLICA_IDX`` = ``${replica_id}`` (TorchX macros, which every
  TorchX scheduler substitutes per replica), the role name, index and replica count; a
  value the role sets itself wins;
* ``TX_RANK0_HOST`` (and ``TORCHX_RANK0_HOST``) come from the variable a TorchX scheduler
  names with the ``${rank0_env}`` macro, known only inside the replica: the entrypoint is
  run through ``sh -c '...; exec "$0" "$@"' ENTRYPOINT ARGS...``, which sets them and then
  replaces itself with the program (same process, same arguments). A role that sets
  ``TX_RANK0_HOST`` itself is left unwrapped. The image needs a POSIX ``sh``.

The scheduler object stays the scheduler's own class, extended by a subclass that only
rewrites the app before ``_submit_dryrun``; the user's AppDef is never modified.
"""
from typing import Any, Callable, Dict

_RANK0_SCRIPT = (
    'TX_RANK0_HOST="${TX_RANK0_HOST:-${${rank0_env}}}"; export TX_RANK0_HOST; '
    'TORCHX_RANK0_HOST="${TORCHX_RANK0_HOST:-$TX_RANK0_HOST}"; export TORCHX_RANK0_HOST; '
    'exec "$0" "$@"'
)

_adapted: Dict[type, type] = {}


def with_replica_contract(app: Any) -> Any:
    """A copy of ``app`` whose roles carry tx's replica environment contract (see the
    module docs). ``app``: a :class:`tx.specs.AppDef`."""
    import attrs

    from tx.schedulers.env import RANK0_HOST, replica_env
    from tx.specs.api import macros

    roles = []
    for idx, role in enumerate(app.roles):
        env = {**replica_env(app_id=macros.app_id, role_name=role.name, replica_id=macros.replica_id,
                             role_idx=idx, num_replicas=role.num_replicas), **role.env}
        changes: Dict[str, Any] = {"env": env}
        if RANK0_HOST not in role.env:
            changes["entrypoint"] = "sh"
            changes["args"] = ["-c", _RANK0_SCRIPT, role.entrypoint, *role.args]
        roles.append(attrs.evolve(role, **changes))
    return attrs.evolve(app, roles=roles)


def adapt(scheduler: Any) -> Any:
    """Extend ``scheduler`` (a :class:`tx.schedulers.Scheduler` written against TorchX
    0.7) so that :meth:`_submit_dryrun` sees :func:`with_replica_contract` of the app.
    Returns the same object.

    Raises:
        TypeError: ``scheduler`` is not a tx Scheduler (e.g. a real TorchX's).
    """
    import tx_torchx_compat.scheduler_api  # noqa: F401 - TorchX 0.7's signatures (adapt_class)
    from tx.schedulers.api import Scheduler

    if not isinstance(scheduler, Scheduler):
        raise TypeError(
            f"{type(scheduler).__module__}.{type(scheduler).__name__} is not a scheduler tx can run: "
            "it must derive from torchx.schedulers.api.Scheduler as tx-torchx-compat provides it"
        )
    cls = type(scheduler)
    if getattr(cls, "_tx_torchx_adapted", False):
        return scheduler
    sub = _adapted.get(cls)
    if sub is None:
        def _submit_dryrun(self: Any, app: Any, cfg: Any) -> Any:
            return super(sub, self)._submit_dryrun(with_replica_contract(app), cfg)  # type: ignore[misc]

        sub = type(cls.__name__, (cls,), {
            "_submit_dryrun": _submit_dryrun, "_tx_torchx_adapted": True,
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__,
        })
        _adapted[cls] = sub
    scheduler.__class__ = sub
    return scheduler


def _factory(name: str) -> Callable[..., Any]:
    from importlib.metadata import entry_points

    eps = entry_points()
    group = eps.select(group="torchx.schedulers") if hasattr(eps, "select") else eps.get("torchx.schedulers", [])
    for ep in group:
        if ep.name == name:
            break
    else:
        raise AttributeError(f"no scheduler {name!r} in entry-point group torchx.schedulers")

    def create_scheduler(session_name: str, **kwargs: Any) -> Any:
        """The scheduler of entry point ``torchx.schedulers`` ``name``, adapted (:func:`adapt`).

        Raises:
            tx.plugins.PluginError: the entry point cannot be loaded (one line naming the
                entry point and its distribution).
        """
        try:
            factory = ep.load()
        except Exception as e:  # noqa: BLE001 - any import-time failure of the plugin
            from tx.plugins import PluginError

            dist = getattr(ep, "dist", None)
            where = f"{dist.metadata['Name']} {dist.version}" if dist is not None else "an unknown distribution"
            msg = str(e).splitlines()[0] if str(e) else ""
            raise PluginError(
                f"scheduler {name!r} cannot be loaded: entry point {ep.name} = {ep.value} "
                f"(group torchx.schedulers) of {where} failed: {type(e).__name__}: {msg}"
            ) from None
        return adapt(factory(session_name, **kwargs))

    create_scheduler.__name__ = f"create_{name}"
    return create_scheduler


def __getattr__(name: str) -> Callable[..., Any]:
    if name.startswith("__"):
        raise AttributeError(name)
    return _factory(name)
