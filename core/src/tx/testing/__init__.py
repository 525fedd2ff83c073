"""tx.testing: a pytest plugin for testing tx plugins (opt-in; needs pytest).

Enable it in a ``conftest.py``::

    pytest_plugins = ["tx.testing"]

It provides:

* fixture ``tx_registry``: an isolated :class:`tx.plugins.PluginRegistry` (no installed
  plugin loaded, tx-core's built-ins registered) installed as the process registry for
  the test, the previous registry restored after it.
* ``register_plugin(obj, name="test-plugin")``: a context manager that registers a plugin
  object (a module or class with ``@tx.hookimpl`` functions) in the current registry for
  the duration of the block, so hooks are tested without installing anything::

      from tx import hookimpl
      from tx.testing import register_plugin

      class MyPlugin:
          @hookimpl
          def tx_register_schedulers(register):
              register("mysched", "my_pkg.scheduler:create_scheduler")

      def test_registers(tx_registry):
          with register_plugin(MyPlugin, name="mine"):
              assert "mysched" in tx_registry.names("schedulers")

* ``recording_workspace(kind="docker")``: a context manager that registers a workspace kind
  which records each ``build(role, workspace, cfg)`` call (yielded as a list) and returns
  the role with image ``<image_repo>:ws``: what a scheduler hands its workspace kind is
  tested without building images.
* ``SchedulerConformance``: a base test class a scheduler plugin subclasses to run the
  conformance tests against its real backend::

      from tx.testing import SchedulerConformance

      class TestMySchedulerConformance(SchedulerConformance):
          timeout = 300.0                      # seconds an app may take to end

          @pytest.fixture
          def scheduler(self):
              return create_scheduler("tx")

          @pytest.fixture
          def cfg(self):
              return {"partition": "debug"}

  The subclass provides the fixtures ``scheduler`` (required), ``cfg`` and ``image``, may
  adjust ``timeout``, ``poll_interval``, ``log_streams``, ``reports_replica_statuses``,
  ``reports_exit_codes``, ``lines_per_stream``, ``running_seconds``,
  ``running_not_observable`` (a sentence: why the backend cannot show RUNNING for a short
  app) and ``fresh_factory``, and may override
  ``command(script)`` (how a POSIX shell script is run), ``unknown_app_id()``,
  ``dryrun_app_id(info)``, ``read_log(...)``, ``fresh_env()`` and ``check_app_id_env``.
  Every description the kit reads is checked for values (the app id asked for, the
  submitted roles and replica ids, a SUCCEEDED app's replicas SUCCEEDED, a FAILED app
  saying why, UNKNOWN only with a message) and as a transition (no state after a terminal
  one; RUNNING seen before SUCCEEDED unless declared unobservable).
  The tests: submit, describe, status to SUCCEEDED and every line of every replica's logs
  in order with ``\\r`` kept; a failing replica gives FAILED (with its exit code); cancel
  gives CANCELLED, is idempotent, and is a no-op for unknown apps; describe of an unknown
  app is None; list holds a submitted app; dryrun is deterministic and submits nothing
  (``list()`` unchanged); bad run options raise InvalidRunConfigException; every reported
  state is an AppState and list() agrees with describe once an app ended; every replica has
  all 7 variables of the replica environment contract (:mod:`tx.schedulers.env`, tx's and
  TorchX's names) with the right values; and a scheduler created by name in a
  **fresh process** (as ``tx status``/``log``/``cancel`` from another shell) describes,
  lists, reads the logs of and cancels the apps (no state kept only in memory).

Beside it, :mod:`tx.testing.preemption` has the preemptable job every backend's preemption
test runs (``TRAIN``: arm the warning, count steps, save the step reached and leave as
preempted; resume from it), ``until`` (wait for an event, never a sleep) and ``app_pids``
(a local app's processes, to warn from outside); :mod:`tx.testing.backends` starts real
backends.
"""
from typing import Iterator

import pytest

from tx.plugins import PluginRegistry
from tx.testing._conformance import SchedulerConformance, is_subsequence
from tx.testing._registry import isolated_registry, recording_workspace, register_plugin
from tx.testing._status import find_replica
from tx.testing.backends import (
    ServiceProcess,
    backend_unavailable,
    environ,
    free_port,
    port_open,
    record_stop,
    require_module,
    script_backend,
    wait_for,
)

__all__ = [
    "SchedulerConformance", "ServiceProcess", "backend_unavailable", "environ", "find_replica", "free_port",
    "is_subsequence", "isolated_registry", "port_open", "record_stop", "recording_workspace", "register_plugin",
    "require_module", "script_backend", "tx_registry", "wait_for",
]


@pytest.fixture
def tx_registry() -> Iterator[PluginRegistry]:
    """An isolated plugin registry (tx-core's built-ins only), installed for the test."""
    with isolated_registry() as reg:
        yield reg
