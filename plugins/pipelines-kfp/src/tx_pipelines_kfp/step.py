"""A pipeline step that runs an AppDef on any tx scheduler and waits for it.

:func:`run_app`, called inside a ``@dsl.pipeline`` function, adds a task of a KFP
lightweight Python component (:func:`tx_run_app`). When the step runs it does what
``tx run --wait --log`` does, through tx's Python API (:mod:`tx.runner`): it launches the app
on the scheduler named (``local_cwd``, ``slurm``, ``kubernetes``, ``aws_batch``, ...), relays
every replica's log lines into the step's log (each prefixed ``role/replica``), waits for the
app to end, prints its status, and returns its handle (the task's ``output``, for the next
step) when it succeeded; when it did not, the step fails with the app's structured error
(:class:`AppStepError`). Stopping the step (SIGTERM, SIGINT) cancels the app first.

The step's image must hold ``kfp``, tx-core, tx-pipelines-kfp and the scheduler's plugin,
and reach the scheduler (its CLI, API server or cloud credentials) as ``tx run`` would.
"""
# no `from __future__ import annotations`: kfp reads tx_run_app's annotations as types
import json
from typing import Any, List, Mapping, Optional

from tx.specs import AppDef, appdef_to_json

from tx_pipelines_kfp import _sdk  # noqa: F401 - kfp 2.x, or one line saying what to install
from tx_pipelines_kfp._run import AppStepError, run_and_wait

from kfp import dsl  # noqa: E402,I001 - after the SDK check

__all__ = ["run_app", "app_step_component", "tx_run_app", "run_and_wait", "AppStepError", "DEFAULT_BASE_IMAGE"]

#: the step's default image; it must hold kfp, tx-core, tx-pipelines-kfp and the scheduler's plugin
DEFAULT_BASE_IMAGE = "python:3.11"


def tx_run_app(app: str, scheduler: str, cfg: str = "{}", session: str = "") -> str:
    """The step's body (a KFP lightweight component: its source is what runs in the step).

    Args:
        app: the AppDef as JSON (:func:`tx.specs.files.appdef_to_json`).
        scheduler: a tx scheduler name.
        cfg: its run options as a JSON object.
        session: the tx session name ("" for tx's default).

    Returns:
        The app's handle, when it succeeded. Raises AppStepError when it did not.
    """
    # the step's process runs this source alone: it imports what it runs (no kfp.components)
    from tx_pipelines_kfp._run import run_and_wait

    return run_and_wait(app, scheduler, cfg, session)


def app_step_component(base_image: str = DEFAULT_BASE_IMAGE, packages_to_install: Optional[List[str]] = None,
                       install_kfp_package: bool = False) -> Any:
    """The step as a KFP component (``kfp.dsl.component`` of :func:`tx_run_app`): inputs
    ``app`` (AppDef JSON), ``scheduler``, ``cfg`` (JSON), ``session``; output the app handle.

    Args:
        base_image: the step's image (it must hold kfp, tx-core, tx-pipelines-kfp and the
            scheduler's plugin, or get them from ``packages_to_install``).
        packages_to_install: pip requirements installed when the step starts.
        install_kfp_package: whether the step pip-installs kfp first (KFP's default; off:
            the image has it).
    """
    return dsl.component(tx_run_app, base_image=base_image, packages_to_install=packages_to_install,
                         install_kfp_package=install_kfp_package)


def run_app(app: AppDef, scheduler: str, cfg: Optional[Mapping[str, Any]] = None, *, session: str = "",
            base_image: str = DEFAULT_BASE_IMAGE, packages_to_install: Optional[List[str]] = None,
            install_kfp_package: bool = False, display_name: Optional[str] = None) -> dsl.PipelineTask:
    """Add a step to the pipeline being defined that runs ``app`` (any roles and replicas) on
    the tx scheduler ``scheduler`` with run options ``cfg``, relays its logs into the step's
    log, and fails with the app's structured error when the app fails. Its ``output`` is the
    app handle. Caching is off (running an app is not a pure function of its inputs).

    Raises:
        ValueError: ``scheduler`` is empty, or ``cfg`` is not JSON-serializable (the scheduler
            and its options are checked when the step runs, where its plugin is installed).
    """
    if not scheduler:
        raise ValueError("run_app needs a scheduler name (local_cwd, slurm, kubernetes, ...)")
    try:
        cfg_json = json.dumps(dict(cfg or {}))
    except TypeError as e:
        raise ValueError(f"cfg must hold JSON values (str, int, float, bool, lists): {e}") from None
    component = app_step_component(base_image, packages_to_install, install_kfp_package)
    task = component(app=appdef_to_json(app), scheduler=scheduler, cfg=cfg_json, session=session)
    if dsl.pipeline_context.Pipeline.get_default_pipeline() is not None:  # not kfp.local's one-off run
        task.set_caching_options(False)
        task.set_display_name(display_name or f"tx-{app.name}")
    return task
