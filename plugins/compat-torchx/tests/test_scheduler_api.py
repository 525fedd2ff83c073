"""TorchX 0.7's scheduler signatures (``tx_torchx_compat.scheduler_api``): tx-core's
Scheduler calls ``_validate(app, scheduler, cfg)`` and builds workspaces through workspace
kinds only; this plugin fits classes written for TorchX (``_validate(self, app,
scheduler)``, ``WorkspaceMixin`` before or after ``Scheduler``) when they are defined."""
import importlib.util
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import pytest

import tx.schedulers.api
from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
from torchx.specs import AppDef, AppDryRunInfo, CfgVal, Role, runopts
from torchx.workspace.api import WorkspaceMixin
from tx_torchx_compat import scheduler_api
from tx.testing.backends import backends_required


class Mem(Scheduler):
    """The least a scheduler implements; apps are never kept."""

    def __init__(self, session_name: str = "s", **kwargs: Any) -> None:
        super().__init__("mem", session_name)
        self.validated: List[tuple] = []

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Dict[str, Any]]:
        return AppDryRunInfo({"app": app, "cfg": dict(cfg)}, repr)

    def schedule(self, dryrun_info: AppDryRunInfo[Dict[str, Any]]) -> str:
        return "app-1"

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        return None

    def list(self) -> List[ListAppResponse]:
        return []

    def _cancel_existing(self, app_id: str) -> None:
        pass


class Torchx07(Mem):
    def _validate(self, app: AppDef, scheduler: str) -> None:  # TorchX 0.7's signature
        self.validated.append((app.name, scheduler))


class Torchx07Child(Torchx07):
    def _validate(self, app: AppDef, scheduler: str) -> None:
        super()._validate(app, scheduler)
        self.validated.append(("child", scheduler))


class TxStyle(Mem):
    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        self.validated.append((app.name, scheduler, dict(cfg)))


class ImageWorkspace:
    """TorchX's contract: build into the role, in place."""

    def workspace_opts(self) -> runopts:
        opts = runopts()
        opts.add("image_repo", type_=str, default="repo", help="where images go")
        return opts

    def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        role.image = f"{cfg['image_repo']}/{Path(workspace).name}"


class MixinFirst(ImageWorkspace, WorkspaceMixin, Mem):  # TorchX's own order
    pass


class MixinLast(Mem, ImageWorkspace, WorkspaceMixin):
    pass


class OwnBuild(Mem, ImageWorkspace, WorkspaceMixin):
    def build_workspace(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> Optional[Role]:
        return None


def app() -> AppDef:
    return AppDef("demo", [Role("worker", image="img", entrypoint="echo")])


def test_torchx_names_are_the_plugins() -> None:
    import torchx.runner.api
    import torchx.schedulers.api
    import torchx.workspace

    assert torchx.workspace.api.WorkspaceMixin is scheduler_api.WorkspaceMixin
    assert torchx.workspace.WorkspaceMixin is torchx.schedulers.api.WorkspaceMixin is WorkspaceMixin
    assert torchx.runner.api.WorkspaceMixin is WorkspaceMixin
    assert torchx.schedulers.api.Scheduler is tx.schedulers.api.Scheduler
    assert not hasattr(tx.schedulers.api, "WorkspaceMixin")  # TorchX's mix-in is not in core


def test_a_validate_without_cfg_is_called_with_torchx_arguments() -> None:
    s = Torchx07Child()
    s.submit_dryrun(app(), {})
    assert s.validated == [("demo", "mem"), ("child", "mem")]
    t = TxStyle()
    t.submit_dryrun(app(), {})
    assert t.validated == [("demo", "mem", {})]


def test_tx_style_classes_are_left_as_they_are() -> None:
    assert TxStyle._validate is TxStyle.__dict__["_validate"]
    assert scheduler_api.validate_takes_cfg(TxStyle._validate)
    assert scheduler_api.validate_takes_cfg(Torchx07._validate)  # wrapped: takes cfg now
    assert Torchx07._validate.__qualname__ == "Torchx07._validate"
    assert "build_workspace" not in MixinFirst.__dict__ and "workspace_opts" not in MixinFirst.__dict__
    assert OwnBuild.__dict__["build_workspace"].__qualname__ == "OwnBuild.build_workspace"


def test_signature_sniffing() -> None:
    def old(self, app, scheduler): ...
    def new(self, app, scheduler, cfg=None): ...
    def star(self, *args): ...

    assert not scheduler_api.validate_takes_cfg(old)
    assert scheduler_api.validate_takes_cfg(new) and scheduler_api.validate_takes_cfg(star)
    assert scheduler_api.validate_takes_cfg(getattr)  # no readable signature: tx's call


@pytest.mark.parametrize("cls", [MixinFirst, MixinLast], ids=["mixin-first", "mixin-last"])
def test_workspace_mixin_builds_a_copy_of_the_first_role(cls: Any, tmp_path: Path) -> None:
    s = cls()
    assert "image_repo" in s.run_opts()
    role = app().roles[0]
    built = s.build_workspace(role, str(tmp_path / "proj"), {"image_repo": "reg.io"})
    assert built is not None and built.image == "reg.io/proj" and role.image == "img"


def test_a_class_own_build_workspace_wins(tmp_path: Path) -> None:
    assert OwnBuild().build_workspace(app().roles[0], str(tmp_path), {"image_repo": "r"}) is None


def test_classes_defined_before_the_plugin_is_imported_are_fitted(py: Any) -> None:
    """A subclass of tx's Scheduler with TorchX 0.7's ``_validate`` fails in tx-core alone;
    importing ``torchx.schedulers`` fits it (and its subclasses) afterwards."""
    p = py(
        "from tx.schedulers.api import Scheduler\n"
        "from tx.specs import AppDef, AppDryRunInfo, Role\n"
        "class Old(Scheduler):\n"
        "    def __init__(self): super().__init__('old', 's')\n"
        "    def _validate(self, app, scheduler): print('validated', scheduler)\n"
        "    def _submit_dryrun(self, app, cfg): return AppDryRunInfo({}, repr)\n"
        "    schedule = describe = list = _cancel_existing = lambda *a: None\n"
        "class Child(Old): pass\n"
        "app = AppDef('a', [Role('r', image='i', entrypoint='e')])\n"
        "try:\n"
        "    Child().submit_dryrun(app, {})\n"
        "except TypeError as e:\n"
        "    print('core alone:', type(e).__name__)\n"
        "import torchx.schedulers\n"
        "Child().submit_dryrun(app, {})\n"
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["core alone: TypeError", "validated old"]


@pytest.mark.skipif(importlib.util.find_spec("tx_scheduler_local") is None and not backends_required(),
                    reason="tx-scheduler-local is not installed: pip install -e plugins/scheduler-local")
def test_local_create_scheduler_passes_tx_arguments(tmp_path: Path) -> None:
    from torchx.schedulers.local_scheduler import create_scheduler
    from tx_scheduler_local.scheduler import create_cwd_scheduler

    s = create_scheduler("sess", cache_size=3, state_dir=str(tmp_path / "state"), supervisor="exec")
    assert (s.backend, s.state_dir, s._method) == ("local_cwd", str(tmp_path / "state"), "exec")
    with pytest.raises(ValueError, match="image_provider_class must be"):
        create_scheduler("sess", image_provider_class=int)
    # tx's own factory takes tx's arguments only; TorchX's cache_size is checked as TorchX does, then unused
    assert create_cwd_scheduler("sess", cache_size=3, state_dir=str(tmp_path)).state_dir == str(tmp_path)
    with pytest.raises(ValueError, match="cache_size must be greater than zero"):
        create_cwd_scheduler("sess", cache_size=0, state_dir=str(tmp_path))
