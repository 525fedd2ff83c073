"""utils.*, serve.torchserve and metrics.tensorboard: the AppDefs they build from command
lines, and their errors."""
import shlex
import shutil
import subprocess

import pytest

from tx import specs
from tx.components import DEFAULT_IMAGE, metrics, serve, utils
from tx.components.system.builders import ComponentArgumentError, materialize_appdef
from tx.testing.backends import backends_required

SMALL = specs.Resource(cpu=1, gpu=0, memMB=1024)


def run(fn, name, *args):
    return materialize_appdef(fn, list(args), name=name)


def test_echo():
    app = run(utils.echo, "utils.echo")
    (role,) = app.roles
    assert (app.name, role.name, role.entrypoint, role.args) == ("echo", "echo", "echo", ["hello world"])
    assert role.image == DEFAULT_IMAGE and role.resource == SMALL and role.num_replicas == 1
    (role,) = run(utils.echo, "utils.echo", "--msg", "hi $USER; x", "--num_replicas", "3").roles
    assert role.args == ["hi $USER; x"] and role.num_replicas == 3


def test_echo_bad_replicas():
    with pytest.raises(ComponentArgumentError, match="num_replicas must be an integer >= 1"):
        run(utils.echo, "utils.echo", "--num_replicas", "0")


def test_touch():
    (role,) = run(utils.touch, "utils.touch", "--file", "/tmp/a b").roles
    assert (role.entrypoint, role.args, role.resource) == ("touch", ["/tmp/a b"], SMALL)
    with pytest.raises(ComponentArgumentError, match="^utils.touch: the following arguments are required: --file$"):
        run(utils.touch, "utils.touch")


def test_sh_quotes_each_argument(monkeypatch):
    monkeypatch.delenv("LOGLEVEL", raising=False)
    app = run(utils.sh, "utils.sh", "--env", "A=1", "echo", "a b", "$HOME", ";", "ls")
    (role,) = app.roles
    assert role.entrypoint == "sh" and role.args[0] == "-c"
    assert shlex.split(role.args[1]) == ["echo", "a b", "$HOME", ";", "ls"]
    assert role.env == {"A": "1", "LOGLEVEL": "WARNING"}
    assert role.resource == SMALL


@pytest.mark.skipif(shutil.which("sh") is None and not backends_required(), reason="needs sh")
def test_sh_command_runs_literally(tmp_path):
    (role,) = run(utils.sh, "utils.sh", "printf", "%s|", "a b", "$HOME", "$(touch x)", "it's").roles
    out = subprocess.run([role.entrypoint, *role.args], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout == "a b|$HOME|$(touch x)|it's|"
    assert list(tmp_path.iterdir()) == []


def test_sh_options():
    app = run(utils.sh, "utils.sh", "-h", "cpu.large", "--num_replicas", "2", "--max_retries", "1",
              "--mounts", "type=bind,src=/a,dst=/b", "--entrypoint", "/bin/echo", "x", "y z")
    (role,) = app.roles
    assert (role.entrypoint, role.args) == ("/bin/echo", ["x", "y z"])
    assert role.resource == specs.Resource(cpu=2, gpu=0, memMB=8 * 1024)
    assert role.num_replicas == 2 and role.max_retries == 1
    assert role.mounts == [specs.BindMount("/a", "/b", False)]


def test_sh_needs_a_command():
    with pytest.raises(ComponentArgumentError, match="no command given"):
        run(utils.sh, "utils.sh")


@pytest.mark.parametrize(
    "args, argv, env, name",
    [
        (["-m", "pkg.main", "--", "--lr", "1"], ["-m", "pkg.main", "--lr", "1"], {"HYDRA_MAIN_MODULE": "pkg.main"},
         "main"),
        (["-c", "import sys; print(sys.argv)", "a"], ["-c", "import sys; print(sys.argv)", "a"], {}, "python"),
        (["--script", "s.py", "--", "-x"], ["s.py", "-x"], {}, "s"),
        (["--script", "jobs/train.py"], ["jobs/train.py"], {}, "train"),
    ],
)
def test_python(args, argv, env, name):
    app = run(utils.python, "utils.python", *args)
    (role,) = app.roles
    assert app.name == name and role.name == "python"  # the app is named after what runs
    assert role.entrypoint == "python" and role.args == argv and role.env == env


@pytest.mark.parametrize("args, name", [
    (["--script", "my train (v2).py"], "my_train__v2_"),  # what an app name cannot hold becomes _
    (["--script", "_x.py"], "x"),  # an app name starts with a letter or digit
    (["--script", "a" * 50 + ".py"], "a" * 40),  # at most 40 characters
    (["--script", "dir/__.py"], "python"),  # nothing left: the -c default
    (["--script", "train.py", "--name", "mine"], "mine"),  # an explicit --name wins
    (["-m", "pkg.mod", "--name", "tx_utils_python"], "tx_utils_python"),
])
def test_python_name_is_a_valid_app_name(args, name):
    app = run(utils.python, "utils.python", *args)
    assert app.name == name and specs.check_app_name(app.name) == name


@pytest.mark.parametrize("args", [[], ["-m", "a", "-c", "b"], ["--script", "a", "-m", "b", "-c", "c"]])
def test_python_needs_exactly_one_program(args):
    with pytest.raises(ComponentArgumentError, match="exactly one of -m, -c and --script"):
        run(utils.python, "utils.python", *args)


def test_python_resources():
    (role,) = run(utils.python, "utils.python", "-m", "x", "--cpu", "3", "--gpu", "1", "--memMB", "10",
                  "--num_replicas", "2", "--name", "n").roles
    assert role.resource == specs.Resource(cpu=3, gpu=1, memMB=10) and role.num_replicas == 2


def test_binary():
    app = run(utils.binary, "utils.binary", "--entrypoint", "/usr/bin/env", "A=1", "printenv")
    (role,) = app.roles
    assert app.name == "tx_utils_binary"
    assert (role.image, role.entrypoint, role.args) == (specs.NONE, "/usr/bin/env", ["A=1", "printenv"])
    with pytest.raises(ComponentArgumentError, match="required: --entrypoint"):
        run(utils.binary, "utils.binary")


def test_copy():
    (role,) = run(utils.copy, "utils.copy", "--src", "s3://b/a", "--dst", "/tmp/a").roles
    assert role.entrypoint == "python"
    assert role.args == ["-m", "tx.apps.copy_main", "--src", "s3://b/a", "--dst", "/tmp/a"]
    assert role.resource == SMALL


def test_booth():
    (role,) = run(utils.booth, "utils.booth", "--x1", "1", "--x2", "-3.5", "--trial_idx", "7",
                  "--tracker_base", "memory://t").roles
    assert role.args == ["-m", "tx.apps.booth_main", "--x1", "1.0", "--x2", "-3.5", "--trial_idx", "7",
                         "--tracker_base", "memory://t"]
    with pytest.raises(ComponentArgumentError, match="invalid float value: 'one'"):
        run(utils.booth, "utils.booth", "--x1", "one", "--x2", "1")


def test_torchserve():
    app = run(serve.torchserve, "serve.torchserve", "--model_path", "s3://m/model.mar",
              "--management_api", "http://ts:8081", "--params", "model_name=resnet,initial_workers=2", "--dryrun")
    (role,) = app.roles
    assert role.name == "worker" and role.entrypoint == "python"
    assert role.args == ["-m", "tx.apps.serve", "--model_path", "s3://m/model.mar", "--management_api",
                         "http://ts:8081", "--model_name", "resnet", "--initial_workers", "2", "--dryrun"]
    assert role.port_map == {"model-download": 8222}
    assert role.resource == SMALL


def test_torchserve_program_params():
    """``port`` and ``timeout`` go to the upload program (TorchX passes every parameter on);
    the declared port follows ``port`` (0: a free port, none declared)."""
    app = run(serve.torchserve, "serve.torchserve", "--model_path", "m.mar", "--management_api", "http://ts:8081",
              "--params", "port=9000,timeout=5")
    assert app.roles[0].args[-4:] == ["--port", "9000", "--timeout", "5"]
    assert app.roles[0].port_map == {"model-download": 9000}
    app = run(serve.torchserve, "serve.torchserve", "--model_path", "m.mar", "--management_api", "http://ts:8081",
              "--params", "port=0")
    assert app.roles[0].port_map == {}
    with pytest.raises(ComponentArgumentError, match="port must be a number from 0 to 65535"):
        run(serve.torchserve, "serve.torchserve", "--model_path", "a", "--management_api", "b", "--params", "port=x")


def test_torchserve_rejects_unknown_params():
    with pytest.raises(ComponentArgumentError, match="unknown TorchServe parameter.*bogus"):
        run(serve.torchserve, "serve.torchserve", "--model_path", "a", "--management_api", "b", "--params", "bogus=1")


def test_tensorboard():
    app = run(metrics.tensorboard, "metrics.tensorboard", "--logdir", "s3://logs", "--port", "7000",
              "--timeout", "60", "--start_on_file", "/tmp/start", "--exit_on_file", "/tmp/done")
    (role,) = app.roles
    assert role.args == ["-m", "tx.apps.process_monitor", "--timeout", "60.0", "--start_on_file", "/tmp/start",
                         "--exit_on_file", "/tmp/done", "--", "tensorboard", "--bind_all", "--port", "7000",
                         "--logdir", "s3://logs"]
    assert role.port_map == {"http": 7000}
    (role,) = run(metrics.tensorboard, "metrics.tensorboard", "--logdir", "d").roles
    assert role.args[:4] == ["-m", "tx.apps.process_monitor", "--timeout", "3600.0"]
    assert "--start_on_file" not in role.args and "--exit_on_file" not in role.args
