"""The behaviour of TorchX 0.7.0's smaller public helpers in tx-torchx-compat: the CLI
command classes (``SubCommand``, documented for ``torchx.cli.cmds`` plugins), ``Tee``,
``ComponentTestCase``, ``TestWithTmpDir``, ``torchx.util.{modules,strings,shlex}``."""
import argparse
import io
import os
import unittest
from pathlib import Path
from typing import Any, Dict

import pytest


def test_sub_cmds_are_subcommands_that_run_tx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    from torchx.cli.cmd_base import SubCommand
    from torchx.cli.main import get_sub_cmds

    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    cmds = get_sub_cmds()
    assert {"run", "status", "cancel", "describe", "list", "log", "runopts", "builtins"} <= set(cmds)
    assert all(isinstance(c, SubCommand) for c in cmds.values())

    parser = argparse.ArgumentParser()
    cmds["runopts"].add_arguments(parser)
    cmds["runopts"].run(parser.parse_args(["local_cwd"]))  # success: returns None
    assert "log_dir" in capsys.readouterr().out

    parser = argparse.ArgumentParser()
    cmds["status"].add_arguments(parser)
    with pytest.raises(SystemExit) as e:  # failure: TorchX's sys.exit(1), one line naming torchx
        cmds["status"].run(parser.parse_args(["local_cwd://s/nope"]))
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("torchx status: error:") and err.count("\n") == 1


def test_tee_copies_sources_written_before_and_after(tmp_path: Path) -> None:
    from torchx.schedulers.streams import Tee

    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    with open(a, "wb") as fa, open(b, "wb", buffering=0) as fb:
        fa.write(b"1\n")
        fa.flush()
        tee = Tee(io.open(out, "wb", buffering=0), str(a), str(b))
        fb.write(b"2\n")
        fa.write(b"3\n")
    tee.close()
    assert sorted(out.read_bytes().splitlines()) == [b"1", b"2", b"3"]


def test_component_test_case_validates_and_runs_builtins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))

    from torchx.components import utils
    from torchx.components.component_test_base import ComponentTestCase

    (tmp_path / "notcomp.py").write_text("def train(x):\n    return x\n")  # no types, no AppDef
    spec = importlib.util.spec_from_file_location("notcomp", tmp_path / "notcomp.py")
    notcomp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(notcomp)

    class T(ComponentTestCase):
        def test_it(self) -> None:
            self.validate(utils, "echo")
            status = self.run_component(utils.echo, {"msg": "hi"}, timeout=0)
            self.assertEqual(status.state.name, "SUCCEEDED")

        def test_not_a_component(self) -> None:
            self.validate(notcomp, "train")

    ok, bad = unittest.TestResult(), unittest.TestResult()
    T("test_it").run(ok)
    T("test_not_a_component").run(bad)
    assert ok.wasSuccessful(), ok.errors + ok.failures
    assert not bad.wasSuccessful()


def test_with_tmp_dir_helpers() -> None:
    from torchx.test.fixtures import TestWithTmpDir

    seen = {}

    class T(TestWithTmpDir):
        def test_it(self) -> None:
            self.write("d/f.txt", ["a\n", "b\n"])
            script = self.write_shell_script("bin/hi.sh", ["echo hi"])
            seen.update(dir=self.tmpdir, lines=self.read("d/f.txt"), mode=os.stat(script).st_mode & 0o777,
                        touched=self.touch("x/y").is_file())

    result = unittest.TestResult()
    T("test_it").run(result)
    assert result.wasSuccessful(), result.errors
    assert seen["lines"] == ["a\n", "b\n"] and seen["mode"] == 0o755 and seen["touched"]
    assert not seen["dir"].exists()  # removed by tearDown


def test_util_helpers() -> None:
    from torchx.util import shlex
    from torchx.util.modules import load_module
    from torchx.util.strings import normalize_str

    assert load_module("os.path:join") is os.path.join and load_module("no_such_module_here") is None
    assert normalize_str("-/_a/b/CD!123!") == "abcd123" and normalize_str("!!!") == ""
    assert shlex.join(["echo", "a b", "$x"]) == "echo 'a b' '$x'"


def test_load_group_defers_and_calls(install: Any, env: Dict[str, str], py: Any) -> None:
    install("acme-eps", "1.0", {"acme_eps.py": "def greet(who):\n    return 'hi ' + who\n"},
            "[acme.group]\ngreet = acme_eps:greet\nmod = acme_eps\n")
    code = ("from torchx.util.entrypoints import load, load_group\n"
            "g = load_group('acme.group')\n"
            "print(g['greet']('bob'), g['mod']('ignored').__name__, load('acme.group', 'greet')('al'),\n"
            "      load_group('acme.none', {'d': 1}), load('acme.group', 'nope', 'dflt'))\n")
    p = py(code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["hi", "bob", "acme_eps", "hi", "al", "{'d':", "1}", "dflt"]



def test_dist_components_have_torchx_shape() -> None:
    """``torchx.components.dist``'s ``ddp``/``spmd`` give TorchX 0.7.0's role: ``bash -c
    "torchrun ..."`` on one node too, ``--node_rank`` with the static backend, and
    ``TORCHX_TRACKING_EXPERIMENT_NAME``."""
    import shlex

    from torchx.components.dist import ddp, spmd

    role = ddp("--lr", "0.1 x", script="foo.py", rdzv_backend="static").roles[0]
    assert role.entrypoint == "bash" and role.args[0] == "-c"
    words = shlex.split(role.args[1])
    assert words[:5] == ["torchrun", "--rdzv_backend", "static", "--rdzv_endpoint", "localhost:0"], words
    assert words[words.index("--node_rank") + 1] == "${replica_id}"
    assert words[-3:] == ["foo.py", "--lr", "0.1 x"]
    role = spmd(m="pkg.train", name="exp/").roles[0]
    assert role.entrypoint == "bash" and shlex.split(role.args[1])[-2:] == ["-m", "pkg.train"]
    assert role.env["TORCHX_TRACKING_EXPERIMENT_NAME"] == "exp"
    assert ddp.__doc__ and "rdzv_backend" in ddp.__doc__  # the component's docstring (its -h) is tx's


def test_generic_named_resources_are_factories() -> None:
    """TorchX 0.7.0's ``NAMED_RESOURCES``: name -> a function returning a new ``Resource``."""
    from torchx.specs import Resource
    from torchx.specs.named_resources_generic import NAMED_RESOURCES

    assert {"cpu.small", "gpu.small", "gpu.xlarge"} <= set(NAMED_RESOURCES)
    made = NAMED_RESOURCES["gpu.small"]()
    assert isinstance(made, Resource) and made.gpu >= 1 and made is not NAMED_RESOURCES["gpu.small"]()
