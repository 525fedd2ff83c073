"""AppDefs as Kubeflow Pipelines container components (the KFP v2 SDK, ``kfp`` 2.x).

TorchX 0.7.0's ``torchx.pipelines.kfp.adapter`` under its names, rebuilt on the v2 SDK
(TorchX's produced KFP v1 ``ContainerOp``/``ResourceOp``, which kfp 2 removed):

* :func:`component_spec_from_app`: the component's YAML text and the role it came from;
* :func:`component_from_app`: a factory that, called inside a ``@dsl.pipeline`` function,
  adds a task (a :class:`kfp.dsl.PipelineTask`) with the role's image, entrypoint and args,
  env, CPU, memory and accelerator limits and retries;
* :func:`container_from_app`: the same, called at once;
* :func:`resource_from_app`: TorchX's Volcano ``ResourceOp``, as a step that runs the app on
  tx's ``kubernetes`` scheduler (Volcano) and waits for it (:mod:`tx_pipelines_kfp.step`).

One container is one replica of one role: an app with several roles or replicas is refused
(one line) by the first three; :func:`tx_pipelines_kfp.step.run_app` runs any app.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Tuple

import yaml

from tx.specs import AppDef, Role, macros

from tx_pipelines_kfp import _sdk  # noqa: F401 - kfp 2.x, or one line saying what to install
from tx_pipelines_kfp.step import run_app

from kfp import components, dsl  # noqa: E402,I001 - after the SDK check

from tx_pipelines_kfp.version import __version__ as __version__  # noqa: F401

__all__ = ["component_spec_from_app", "component_from_app", "container_from_app",
           "resource_from_app", "ContainerFactory", "KfpAdapterError", "ACCELERATOR"]

#: the accelerator type a role's ``Resource.gpu`` asks for (Kubernetes' NVIDIA device plugin)
ACCELERATOR = "nvidia.com/gpu"

#: a factory of tasks: called inside a ``@dsl.pipeline`` function, adds one task
ContainerFactory = Callable[..., dsl.PipelineTask]


class KfpAdapterError(ValueError):
    """The app cannot become one KFP container (one line: what and what to do instead)."""


def _one_role(app: AppDef) -> Role:
    """The app's only role with its macros applied; raises KfpAdapterError for what one
    container cannot hold."""
    if len(app.roles) != 1:
        raise KfpAdapterError(
            f"app {app.name!r} has {len(app.roles)} roles: a KFP container component holds one role "
            "of one replica; run the app with tx_pipelines_kfp.step.run_app (any tx scheduler) instead")
    role = app.roles[0]
    if role.num_replicas != 1:
        raise KfpAdapterError(
            f"role {role.name!r} of app {app.name!r} has {role.num_replicas} replicas: a KFP container "
            "component runs one; run the app with tx_pipelines_kfp.step.run_app (any tx scheduler) instead")
    res = role.resource
    if res.capabilities:
        raise KfpAdapterError(
            f"role {role.name!r}: KFP has no resource capabilities ({', '.join(sorted(res.capabilities))}); "
            "remove them or run the app with tx_pipelines_kfp.step.run_app")
    if res.devices:
        raise KfpAdapterError(
            f"role {role.name!r}: KFP v2 containers take no devices ({', '.join(sorted(res.devices))}); "
            "remove them or run the app with tx_pipelines_kfp.step.run_app")
    if role.mounts:
        raise KfpAdapterError(
            f"role {role.name!r} has {len(role.mounts)} mount(s): KFP v2 container components take none "
            "(kfp-kubernetes mounts volumes on the task); remove them or run the app with "
            "tx_pipelines_kfp.step.run_app")
    # one container, one replica: its id is 0, it is its own rank 0; the app id is the
    # pipeline run's task id (unique per run, as a scheduler's app id is)
    values = macros.Values(img_root="", app_id=dsl.PIPELINE_TASK_ID_PLACEHOLDER, replica_id="0",
                           rank0_env="TX_RANK0_HOST")
    role = values.apply(role)
    return role


def _component_name(app: AppDef, role: Role) -> str:
    return f"{app.name}-{role.name}"


def component_spec_from_app(app: AppDef) -> Tuple[str, Role]:
    """The KFP component YAML of ``app`` (image, command = entrypoint + args) and its role
    (macros applied), as TorchX's: resources, env and retries are set on each task by
    :func:`component_from_app`, so the YAML holds what every task of it shares.

    The YAML is the component format ``kfp.components.load_component_from_text`` reads
    (``name``, ``description``, ``implementation.container``).

    Raises:
        KfpAdapterError (a ValueError): several roles or replicas, resource capabilities,
            devices or mounts (one line each).
    """
    role = _one_role(app)
    spec = {
        "name": _component_name(app, role),
        "description": f"KFP wrapper for tx app {app.name}, role {role.name}",
        "implementation": {
            "container": {
                "image": role.image,
                "command": [role.entrypoint, *role.args],
            },
        },
    }
    return yaml.safe_dump(spec, sort_keys=False), role


def _apply_role(task: dsl.PipelineTask, role: Role) -> dsl.PipelineTask:
    """Set the role's env, resources (requests = limits, as tx's kubernetes scheduler) and
    retries on ``task``; caching off (a run of an app is not a pure function of its inputs).
    Outside a pipeline (kfp.local's one-off run, which takes no task settings) it is left as is."""
    if dsl.pipeline_context.Pipeline.get_default_pipeline() is None:
        return task
    for name, value in role.env.items():
        task.set_env_variable(name, value)
    res = role.resource
    if res.cpu > 0:
        task.set_cpu_request(str(res.cpu)).set_cpu_limit(str(res.cpu))
    if res.memMB > 0:
        mem = f"{int(res.memMB)}Mi"  # memMB is MiB (2**20 bytes)
        task.set_memory_request(mem).set_memory_limit(mem)
    if res.gpu > 0:
        task.set_accelerator_type(ACCELERATOR).set_accelerator_limit(res.gpu)
    if role.max_retries > 0:
        task.set_retry(num_retries=role.max_retries)
    task.set_caching_options(False)
    return task


def component_from_app(app: AppDef, ui_metadata: Optional[Mapping[str, object]] = None) -> ContainerFactory:
    """A factory of KFP tasks for ``app`` (one role, one replica): called inside a
    ``@dsl.pipeline`` function with the component's arguments (it has none: the app's args
    are fixed), it adds a :class:`kfp.dsl.PipelineTask` running the role's image with
    ``entrypoint + args``, its env, CPU (cores) and memory (``<memMB>Mi``) as requests and
    limits, ``gpu`` as ``nvidia.com/gpu`` accelerators, ``max_retries`` as the task's retries;
    caching off. Tasks chain as any KFP task (``.after(other)``). The factory's
    ``component_spec`` is the loaded component.

    Args:
        app: the AppDef (macros: ``${app_id}`` becomes the pipeline task's id, ``${replica_id}``
            0, ``${img_root}`` empty).
        ui_metadata: TorchX's KFP v1 UI metadata; the v2 SDK has no such output: must be None.

    Raises:
        KfpAdapterError (a ValueError): what :func:`component_spec_from_app` refuses, or a
            ``ui_metadata`` (KFP v2 shows artifacts through ``dsl.Output`` instead).
    """
    if ui_metadata is not None:
        raise KfpAdapterError(
            "ui_metadata is KFP v1's mlpipeline-ui-metadata output, which the KFP v2 SDK removed; "
            "write a dsl.Output[dsl.Markdown]/dsl.Metrics artifact from a component instead")
    spec, role = component_spec_from_app(app)
    component = components.load_component_from_text(spec)

    def factory(*args: Any, **kwargs: Any) -> dsl.PipelineTask:
        return _apply_role(component(*args, **kwargs), role)

    factory.component_spec = component.component_spec  # type: ignore[attr-defined]
    factory.__name__ = component.name.replace("-", "_")
    return factory


def container_from_app(app: AppDef, *args: Any, ui_metadata: Optional[Mapping[str, object]] = None,
                       **kwargs: Any) -> dsl.PipelineTask:
    """Add ``app`` as a task of the pipeline being defined (:func:`component_from_app`, then
    called with ``args`` and ``kwargs``); returns the :class:`kfp.dsl.PipelineTask`.

    Raises:
        KfpAdapterError: see :func:`component_from_app`.
    """
    return component_from_app(app, ui_metadata)(*args, **kwargs)


def resource_from_app(app: AppDef, queue: str, service_account: Optional[str] = None,
                      **step_options: Any) -> dsl.PipelineTask:
    """TorchX's Volcano ``ResourceOp``, on the KFP v2 SDK: a step that runs ``app`` (any number
    of roles and replicas) on tx's ``kubernetes`` scheduler (a Volcano Job in ``queue``) and
    waits for it (:func:`tx_pipelines_kfp.step.run_app`; its image needs tx-scheduler-k8s and
    in-cluster credentials). ``step_options`` go to ``run_app`` (``base_image``, ...).

    Raises:
        ValueError: a bad app or option (see :func:`tx_pipelines_kfp.step.run_app`).
    """
    cfg = {"queue": queue}
    if service_account is not None:
        cfg["service_account"] = service_account
    return run_app(app, "kubernetes", cfg, **step_options)
