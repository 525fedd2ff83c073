"""``torchx.runner.events.log_event`` with TorchX 0.7.0's signature, as a ``Runner``
subclass uses it (NeMo-Run's runner times ``dryrun``/``schedule`` with it; the subclass
here is written for this test): the events reach tx's ``tx_on_event`` hooks."""
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest


def test_log_event_in_a_runner_subclass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tx.plugins import PluginRegistry, set_registry
    from torchx.runner.api import Runner
    from torchx.runner.events import TorchxEvent, log_event
    from torchx.specs import AppDef, Role, make_app_handle

    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "seen_events_plugin.py").write_text(textwrap.dedent("""
        from tx import hookimpl
        SEEN = []

        @hookimpl
        def tx_on_event(event):
            SEEN.append(event)
    """))

    class MyRunner(Runner):
        def dryrun(self, app: AppDef, scheduler: str, cfg: Any = None, workspace: Any = None,
                   parent_run_id: Any = None) -> Any:
            with log_event("dryrun", scheduler):
                info = self._scheduler(scheduler).submit_dryrun(app, cfg or {})
                info._scheduler = scheduler
                return info

        def schedule(self, dryrun_info: Any) -> str:
            with log_event("schedule", dryrun_info._scheduler, app_image=dryrun_info._app.roles[0].image) as ctx:
                app_id = self._scheduler(dryrun_info._scheduler).schedule(dryrun_info)
                ctx._torchx_event.app_id = app_id
                return make_app_handle(dryrun_info._scheduler, self._name, app_id)

    import seen_events_plugin

    installed = PluginRegistry()  # the runner's schedulers: the installed plugins
    old = set_registry(PluginRegistry(entry_points=[("seen", "seen_events_plugin", "seen-events", "0.1")]))
    try:
        with MyRunner("sess", registry=installed) as runner:
            app = AppDef("hi", [Role("r", image=".", entrypoint="true")])
            handle = runner.schedule(runner.dryrun(app, "local_cwd"))
            assert runner.wait(handle, wait_interval=0.1).state.name == "SUCCEEDED"
        with pytest.raises(ValueError):
            with log_event("boom", "local_cwd", workspace="file://."):
                raise ValueError("no")
    finally:
        set_registry(old)
        sys.modules.pop("seen_events_plugin", None)
    mine = [e for e in seen_events_plugin.SEEN if e.api in ("dryrun", "schedule", "boom")]
    assert [(e.api, e.scheduler) for e in mine] == [("dryrun", "local_cwd"), ("schedule", "local_cwd"),
                                                    ("boom", "local_cwd")]
    assert all(isinstance(e, TorchxEvent) and e.wall_time_usec >= 0 for e in mine)
    assert mine[1].app_id == handle.rsplit("/", 1)[1] and mine[1].app_image == "."
    assert mine[2].exception_type == "ValueError" and "no" in mine[2].raw_exception and mine[2].workspace == "file://."
