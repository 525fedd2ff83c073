"""TorchX 0.7.0's public API that its own unit tests use and an independent run counted
failing: ``CmdTracker``'s parser, ``tracker`` and commands; ``torchx.runner.config``'s
``dirs`` (the first wins), ``DEFAULT_CONFIG_DIRS``, ``get_scheduler_factories``, ``load``'s
unknown keys and ``$TORCHXCONFIG``."""
import argparse
import io
from pathlib import Path
from typing import Any, Dict

import pytest

from tx.testing import isolated_registry
from tx.tracker.backend.fsspec import create

RUN = "local_cwd://tx/train-2"


@pytest.fixture
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("TX_TRACKERS", "TORCHX_TRACKERS", "TX_TRACKER_FILE_CONFIG", "TORCHX_TRACKER_FILE_CONFIG",
                "TXCONFIG", "TORCHXCONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _parse(*argv: str) -> argparse.Namespace:
    from torchx.cli.cmd_tracker import CmdTracker

    parser = argparse.ArgumentParser()
    CmdTracker().add_arguments(parser)
    return parser.parse_args(list(argv))


def test_cmd_tracker_commands_on_the_file_tracker(clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from torchx.cli.cmd_tracker import CmdTracker

    with isolated_registry():
        args = _parse("list", "jobs")
        with pytest.raises(RuntimeError, match="No trackers configured"):
            args.func(args)
        root = tmp_path / "runs"
        t = create(str(root))
        t.add_metadata(RUN, lr=0.05)
        t.add_artifact(RUN, "model", "/ckpt/m.pt", {"accuracy": 0.97})
        t.add_artifact(RUN, "log", "/logs/train.txt")
        monkeypatch.setenv("TX_TRACKERS", "file")
        monkeypatch.setenv("TX_TRACKER_FILE_CONFIG", str(root))
        assert CmdTracker().tracker.run_ids() == [RUN]
        capsys.readouterr()
        for argv, expect, absent in ((["list", "jobs"], RUN, None),
                                     (["list", "jobs", "--parent-run-id", "nope"], "JOB ID", RUN),
                                     (["list", "metadata", RUN], "0.05", None),
                                     (["list", "artifacts", "--artifact", "model", RUN], "/ckpt/m.pt", "/logs")):
            args = _parse(*argv)
            args.func(args)
            out = capsys.readouterr().out
            assert expect in out and (absent is None or absent not in out), (argv, out)
        args = _parse("list", "lineage", RUN)
        with pytest.raises(NotImplementedError):  # as in TorchX 0.7.0
            args.func(args)


def test_config_dirs_first_wins_and_default_dirs(clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torchx.runner.config as config

    a, b = tmp_path / "a", tmp_path / "b"
    for d, image in ((a, "from-a"), (b, "from-b")):
        d.mkdir()
        (d / ".torchxconfig").write_text(f"[component:]\nfoo = bar\n[local_cwd]\nlog_dir = /{d.name}\n"
                                         f"[component:dist.ddp]\nimage = {image}\n")
    (b / ".torchxconfig").write_text((b / ".torchxconfig").read_text() + "j = 1x2\n")
    dirs = [str(a), str(b)]
    assert config.find_configs(dirs) == [str(a / ".torchxconfig"), str(b / ".torchxconfig")]
    assert config.load_sections("component", dirs) == {"dist.ddp": {"image": "from-a", "j": "1x2"}}  # no [component:]
    assert config.get_config("component", "dist.ddp", "image", dirs[::-1]) == "from-b"
    cfg: Dict[str, Any] = {}
    config.apply("local_cwd", cfg, dirs)
    assert cfg["log_dir"] == "/a"
    # a replaced DEFAULT_CONFIG_DIRS is searched (TorchX's tests patch it), the first winning
    monkeypatch.setattr(config, "DEFAULT_CONFIG_DIRS", [str(b), str(a)])
    assert config.get_configs("component", "dist.ddp") == {"image": "from-b", "j": "1x2"}
    monkeypatch.setenv("TORCHXCONFIG", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError):
        config.find_configs()
    with pytest.raises(FileNotFoundError):
        config.get_configs("component", "dist.ddp")


def test_config_schedulers_from_get_scheduler_factories(clean: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import torchx.runner.config as config
    from torchx.schedulers.local_scheduler import create_scheduler

    with pytest.raises(ValueError, match="`nope` is not a registered scheduler"):
        config.dump(io.StringIO(), ["nope"])
    cfg: Dict[str, Any] = {}
    config.load("local_cwd", io.StringIO("[local_cwd]\nlog_dir = /logs\nstale_key = 1\n"), cfg)
    assert cfg == {"log_dir": "/logs"}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "`stale_key = 1`" in err and "ignored, as TorchX does" in err, err
    # the schedulers are this module's get_scheduler_factories (TorchX's tests patch it)
    monkeypatch.setattr(config, "get_scheduler_factories", lambda: {"mine": create_scheduler})
    f = io.StringIO()
    config.dump(f)
    assert f.getvalue().startswith("[mine]\n") and "log_dir" in f.getvalue(), f.getvalue()


COMPONENT = '''
import torchx.specs as specs


def hello(who: str = "world") -> specs.AppDef:
    """Says hello.

    Args:
        who: whom to greet
    """
    return specs.AppDef("hello", [specs.Role("greeter", image="img", entrypoint="echo", args=["hello", who])])


def untyped(who) -> specs.AppDef:  # no annotation: a linter error
    """Says hello.

    Args:
        who: whom to greet
    """
    return specs.AppDef("u", [specs.Role("r", image="img", entrypoint="echo")])
'''


def test_finder_classes_and_module_relname(tmp_path: Path) -> None:
    import torchx.components as c
    import torchx.components.dist as d
    from torchx.specs.finder import (ComponentNotFoundException, CustomComponentsFinder, ModuleComponentsFinder,
                                     module_relname)

    assert (module_relname(d, relative_to=c), module_relname(d, relative_to=d)) == ("dist", "")
    with pytest.raises(ValueError, match="is not a submodule"):
        module_relname(c, relative_to=d)
    path = tmp_path / "comps.py"
    path.write_text(COMPONENT)
    [hello] = CustomComponentsFinder(str(path), "hello").find()
    assert (hello.name, hello.fn_name, hello.description, hello.validation_errors) == (
        f"{path}:hello", "hello", "Says hello.", [])
    assert hello.fn().roles[0].args == ["hello", "world"]
    [bad] = CustomComponentsFinder(str(path), "untyped").find()  # listed, with its errors
    assert len(bad.validation_errors) == 1 and "who" in bad.validation_errors[0]
    with pytest.raises(ComponentNotFoundException):
        CustomComponentsFinder(str(tmp_path / "nope.py"), "hello").find()
    names = {comp.name for comp in ModuleComponentsFinder("tx.components", group="").find()}
    assert {"dist.ddp", "utils.echo"} <= names
    grouped = {comp.name for comp in ModuleComponentsFinder("tx.components.utils", group="u").find()}
    assert "u.echo" in grouped and "utils.echo" not in grouped


def test_local_scheduler_app_id_from_the_modules_make_unique(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TorchX's tests fix app ids by patching ``torchx.schedulers.local_scheduler.make_unique``."""
    import torchx.schedulers.local_scheduler as local
    from torchx.specs import AppDef, Role

    monkeypatch.setattr(local, "make_unique", lambda name: f"{name}-fixed")
    s = local.LocalScheduler("sess", local.LocalDirectoryImageProvider)
    try:
        app = AppDef("a", [Role("r", image=str(tmp_path), entrypoint="true")])
        assert s.submit(app, cfg={"log_dir": str(tmp_path / "logs")}) == "a-fixed"
        s.wait("a-fixed", timeout=60)
    finally:
        s.close()
