"""dist.ddp and dist.spmd: the AppDefs they build, the -j grammar, and the shell quoting
of multi-node commands (run for real with bash, torchrun replaced by an argv printer)."""
import json
import shlex
import shutil
import subprocess
import sys

import pytest

from tx import specs
from tx.components import DEFAULT_IMAGE, dist
from tx.components.structured_arg import StructuredJArgument, StructuredNameArgument
from tx.components.system.builders import ComponentArgumentError, materialize_appdef
from tx.testing.backends import backends_required


def ddp(*args: str) -> specs.AppDef:
    return materialize_appdef(dist.ddp, list(args), name="dist.ddp")


class _Recorder:
    def __init__(self) -> None:
        self.events = []

    def __getattr__(self, level):
        return lambda event, **kw: self.events.append((level, event, kw))


@pytest.fixture
def logs(monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr("tx.components.structured_arg.get_logger", lambda name: rec)
    return rec.events


# -- -j grammar ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "j, nnodes, nproc, min_nnodes, rep",
    [
        ("2x4", 2, 4, 2, "2"),
        ("8", 1, 8, 1, "1"),
        ("1:4x8", 4, 8, 1, "1:4"),
        ("0:1x2", 1, 2, 0, "0:1"),
        (" 3x1 ", 3, 1, 3, "3"),
    ],
)
def test_j_grammar(j, nnodes, nproc, min_nnodes, rep):
    parsed = StructuredJArgument.parse(j)
    assert (parsed.nnodes, parsed.nproc_per_node, parsed.min_nnodes) == (nnodes, nproc, min_nnodes)
    assert parsed.nnodes_rep == rep


@pytest.mark.parametrize("j", ["", "x", "2x", "x4", "2y4", "1:2:3x4", "2x4x1", "-1x2", "a", "2.5x1", "0x2", "2x0", "4:2x1"])
def test_j_grammar_rejects(j):
    with pytest.raises(ValueError, match="-j"):
        StructuredJArgument.parse(j)


def test_ddp_bad_j_is_an_argument_error():
    with pytest.raises(ComponentArgumentError, match=r"^dist\.ddp: Invalid format for `-j` '2y4'"):
        ddp("-j", "2y4", "--script", "t.py")


# -- names -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, exp, run",
    [
        ("/", "default-experiment", "train"),
        ("foo/bar", "foo", "bar"),
        ("foo/", "foo", "train"),
        ("/bar", "default-experiment", "bar"),
        ("bar", "default-experiment", "bar"),
    ],
)
def test_structured_name(name, exp, run):
    arg = StructuredNameArgument.parse_from(name, script="path/to/train.py")
    assert (arg.experiment_name, arg.run_name) == (exp, run)


def test_structured_name_needs_exactly_one_program():
    # TorchX 0.7.0's wording first (its documented examples show it), then what to do
    with pytest.raises(ValueError, match="^No main module or script specified: give --script or -m$"):
        StructuredNameArgument.parse_from("a/b")
    with pytest.raises(ValueError, match="^Both main module and script set: give only one of --script and -m$"):
        StructuredNameArgument.parse_from("a/b", m="x", script="y.py")


# -- single node -----------------------------------------------------------------------
def test_ddp_single_node_is_plain_torchrun_argv(monkeypatch):
    monkeypatch.delenv("LOGLEVEL", raising=False)
    app = ddp("-j", "4", "--script", "path/train.py", "--", "--lr", "0.1", "a b", "$(x);'\"\n")
    assert app.name == "train"
    (role,) = app.roles
    assert role.name == "train"
    assert role.entrypoint == "torchrun"
    assert role.args == [
        "--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:0", "--rdzv_id", "${app_id}",
        "--nnodes", "1", "--nproc_per_node", "4", "--tee", "3", "--role", "",
        "path/train.py", "--lr", "0.1", "a b", "$(x);'\"\n",
    ]
    assert role.num_replicas == 1 and role.min_replicas == 1
    assert role.image == DEFAULT_IMAGE
    assert role.port_map == {"c10d": 29500}
    assert role.resource == specs.Resource(cpu=2, gpu=0, memMB=1024)
    assert role.env == {
        "TX_TRACKING_EXPERIMENT_NAME": "default-experiment",
        "TX_TRACKING_RUN_NAME": "train",
        "TORCHX_TRACKING_EXPERIMENT_NAME": "default-experiment",
        "LOGLEVEL": "WARNING",
    }
    assert role.max_retries == 0 and role.mounts == []


def test_ddp_module_and_defaults():
    app = ddp("-m", "pkg.trainer.main")
    (role,) = app.roles
    assert app.name == "main" and role.name == "main"
    assert role.args[-2:] == ["-m", "pkg.trainer.main"]
    assert role.args[role.args.index("--nproc_per_node") + 1] == "2"  # default -j 1x2


def test_ddp_all_options(monkeypatch):
    monkeypatch.setenv("LOGLEVEL", "INFO")
    app = ddp(
        "--script", "t.py", "--name", "exp1/run1", "--env", "A=1,PATHS=/a,/b", "--metadata", "k=v",
        "--mounts", "type=bind,src=/data,dst=/mnt/data,readonly,type=volume,src=vol,dst=/v",
        "--max_retries", "3", "--rdzv_port", "1234", "--rdzv_conf", "join_timeout=600",
        "--cpu", "4", "--gpu", "1", "--memMB", "2048", "--debug", "--tee", "2", "--image", "img:1",
    )
    (role,) = app.roles
    assert app.name == "run1" and role.name == "t"
    assert app.metadata == {"k": "v"}
    assert role.image == "img:1"
    assert role.env == {
        "A": "1", "PATHS": "/a,/b", "TX_TRACKING_EXPERIMENT_NAME": "exp1",
        "TX_TRACKING_RUN_NAME": "run1", "TORCHX_TRACKING_EXPERIMENT_NAME": "exp1", "LOGLEVEL": "INFO",
        **dist.TORCH_DEBUG_FLAGS,
    }
    assert role.mounts == [
        specs.BindMount("/data", "/mnt/data", True), specs.VolumeMount("vol", "/v", False)
    ]
    assert role.max_retries == 3
    assert role.port_map == {"c10d": 1234}
    assert role.resource == specs.Resource(cpu=4, gpu=1, memMB=2048)
    assert role.args[:4] == ["--rdzv_backend", "c10d", "--rdzv_conf", "join_timeout=600"]
    assert role.args[role.args.index("--tee") + 1] == "2"


def test_ddp_env_loglevel_given_wins(monkeypatch):
    monkeypatch.setenv("LOGLEVEL", "INFO")
    (role,) = ddp("--script", "t.py", "--env", "LOGLEVEL=DEBUG").roles
    assert role.env["LOGLEVEL"] == "DEBUG"


def test_ddp_named_resource_wins():
    (role,) = ddp("--script", "t.py", "-h", "gpu.medium", "--cpu", "1", "--gpu", "0").roles
    assert role.resource == specs.Resource(cpu=16, gpu=2, memMB=64 * 1024)


def test_ddp_does_not_mutate_callers_env():
    env = {"A": "1"}
    dist.ddp(script="t.py", env=env)
    assert env == {"A": "1"}


@pytest.mark.parametrize(
    "args, match",
    [
        (["--script", "a.py", "-m", "b"], "exactly one of --script and -m"),
        ([], "exactly one of --script and -m"),
        (["--script", "a.py", "-h", "gpu.bogus"], "unknown named resource 'gpu.bogus'"),
        (["--script", "a.py", "--mounts", "type=nfs,src=a,dst=b"], "unknown mount type"),
        (["--script", "a.py", "--env", "novalue"], "argument --env"),
        (["--script", "a.py", "--rdzv_port", "port"], "invalid int value: 'port'"),
    ],
)
def test_ddp_bad_inputs(args, match):
    with pytest.raises(ComponentArgumentError, match=match) as info:
        ddp(*args)
    assert str(info.value).startswith("dist.ddp: ")
    assert "\n" not in str(info.value)


# -- multi node ------------------------------------------------------------------------
TRICKY = ["--lr", "0.1", "a b", "; rm -rf /", "$(touch /tmp/pwned)", "`id`", "it's", '"q"', "line1\nline2", "$HOME", ""]


def _substituted_command(role: specs.Role, rank0_env: str = "TX_RANK0_HOST", replica_id: str = "1") -> str:
    values = specs.macros.Values(img_root="/img", app_id="app-123", replica_id=replica_id, rank0_env=rank0_env)
    return values.apply(role).args[1]


def test_ddp_multi_node_uses_bash_with_endpoint_macro():
    app = ddp("-j", "2x3", "--script", "train.py", "--", *TRICKY)
    (role,) = app.roles
    assert role.entrypoint == "bash" and role.args[0] == "-c"
    assert role.num_replicas == 2 and role.min_replicas == 2
    cmd = role.args[1]
    assert cmd.startswith(
        "torchrun --rdzv_backend c10d --rdzv_conf is_host=$$((${replica_id}==0))"
        " --rdzv_endpoint $${${rank0_env}:=localhost}:29500 "
    )
    words = shlex.split(_substituted_command(role))
    assert words[0] == "torchrun"
    assert words[words.index("--rdzv_endpoint") + 1] == "${TX_RANK0_HOST:=localhost}:29500"
    assert words[words.index("--rdzv_id") + 1] == "app-123"
    assert words[words.index("--nnodes") + 1] == "2"
    assert words[words.index("--role") + 1] == ""
    assert words[-len(TRICKY) - 1 :] == ["train.py", *TRICKY]


def test_ddp_elastic_and_static():
    (role,) = ddp("-j", "1:4x8", "-m", "a.b").roles
    assert role.num_replicas == 4 and role.min_replicas == 1
    assert "--nnodes 1:4 " in role.args[1]
    (role,) = ddp("-j", "2x1", "-m", "a.b", "--rdzv_backend", "static").roles
    words = shlex.split(_substituted_command(role))
    assert words[words.index("--node_rank") + 1] == "1"


@pytest.mark.skipif(shutil.which("bash") is None and not backends_required(), reason="needs bash")
@pytest.mark.parametrize("rank0", [None, "node0.example"])
def test_ddp_multi_node_command_survives_bash(tmp_path, rank0):
    """Run the substituted bash -c command with torchrun replaced by an argv printer."""
    (role,) = ddp("-j", "2x2", "--script", "train.py", "--", *TRICKY).roles
    cmd = _substituted_command(role)
    printer = "{} -c 'import json,sys; print(json.dumps(sys.argv[1:]))'".format(shlex.quote(sys.executable))
    assert cmd.startswith("torchrun ")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/someone"}
    if rank0:
        env["TX_RANK0_HOST"] = rank0
    out = subprocess.run(
        ["bash", "-c", printer + cmd[len("torchrun"):]], cwd=tmp_path, env=env,
        capture_output=True, text=True, check=True,
    )
    argv = json.loads(out.stdout)
    assert argv[argv.index("--rdzv_endpoint") + 1] == f"{rank0 or 'localhost'}:29500"
    assert argv[-len(TRICKY) - 1 :] == ["train.py", *TRICKY]
    assert list(tmp_path.iterdir()) == []  # nothing was executed by the shell


def _bash_argv(tmp_path, cmd: str, env: dict) -> list:
    """Run a substituted ``bash -c`` torchrun command with torchrun replaced by an argv printer."""
    printer = "{} -c 'import json,sys; print(json.dumps(sys.argv[1:]))'".format(shlex.quote(sys.executable))
    assert cmd.startswith("torchrun ")
    out = subprocess.run(
        ["bash", "-c", printer + cmd[len("torchrun"):]], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(shutil.which("bash") is None and not backends_required(), reason="needs bash")
@pytest.mark.parametrize(
    "rdzv_conf, want",
    [
        (None, "is_host={}"),
        ("join_timeout=600", "join_timeout=600,is_host={}"),
        ("join_timeout=600,read_timeout=7", "join_timeout=600,read_timeout=7,is_host={}"),
        ("odd value='a b'", "odd value='a b',is_host={}"),
    ],
)
def test_ddp_multi_node_replica0_hosts_the_c10d_store(tmp_path, rdzv_conf, want):
    """Replica 0 is told to host the rendezvous store and the others not to, whatever the
    host name resolves to (torchrun's own guess fails where it resolves to loopback)."""
    conf = ["--rdzv_conf", rdzv_conf] if rdzv_conf is not None else []
    (role,) = ddp("-j", "3x1", "--script", "train.py", *conf).roles
    for replica_id, is_host in (("0", 1), ("1", 0), ("2", 0)):
        argv = _bash_argv(tmp_path, _substituted_command(role, replica_id=replica_id), {"TX_RANK0_HOST": "10.0.0.1"})
        assert argv[argv.index("--rdzv_conf") + 1] == want.format(is_host)
        assert argv[argv.index("--rdzv_endpoint") + 1] == "10.0.0.1:29500"


def test_ddp_is_host_given_by_the_user_is_kept_and_other_backends_get_none():
    (role,) = ddp("-j", "2x1", "--script", "t.py", "--rdzv_conf", "is_host=0,join_timeout=5").roles
    words = shlex.split(_substituted_command(role, replica_id="0"))
    assert words[words.index("--rdzv_conf") + 1] == "is_host=0,join_timeout=5"
    for backend in ("static", "etcd"):
        (role,) = ddp("-j", "2x1", "--script", "t.py", "--rdzv_backend", backend).roles
        assert "--rdzv_conf" not in shlex.split(_substituted_command(role))
    (role,) = ddp("-j", "1x2", "--script", "t.py").roles  # one node: localhost, nothing to decide
    assert "--rdzv_conf" not in role.args


# -- spmd ------------------------------------------------------------------------------
def spmd(*args: str) -> specs.AppDef:
    return materialize_appdef(dist.spmd, list(args), name="dist.spmd")


def test_spmd_infers_procs_from_gpus(logs):
    app = spmd("-j", "2", "-h", "gpu.xlarge", "--script", "t.py")
    (role,) = app.roles
    assert role.num_replicas == 2
    assert role.resource == specs.Resource(cpu=64, gpu=8, memMB=256 * 1024)
    assert "--nproc_per_node 8 " in role.args[1]
    assert not logs


def test_spmd_defaults_single_gpu_small(logs):
    (role,) = spmd("-m", "x.y").roles
    assert role.entrypoint == "torchrun"
    assert role.args[role.args.index("--nproc_per_node") + 1] == "1"
    assert role.resource.gpu == 1
    # TorchX 0.7.0's variable beside tx's, for TorchX's trackers and scripts that read it
    assert role.env["TORCHX_TRACKING_EXPERIMENT_NAME"] == role.env["TX_TRACKING_EXPERIMENT_NAME"] == "default-experiment"
    assert not logs


def test_spmd_warns_on_mismatch(logs):
    (role,) = spmd("-j", "1x4", "-h", "gpu.medium", "--script", "t.py").roles
    assert role.args[role.args.index("--nproc_per_node") + 1] == "4"
    assert [e[:2] for e in logs] == [("warning", "nproc_per_node_mismatch")]
    assert logs[0][2]["host_gpus"] == 2


def test_spmd_elastic():
    (role,) = spmd("-j", "1:3x1", "--script", "t.py").roles
    assert role.num_replicas == 3 and role.min_replicas == 1


def test_spmd_cpu_host_needs_procs():
    with pytest.raises(ComponentArgumentError, match=r"nproc_per_node cannot be inferred from GPU count\. `cpu\.large` is not a GPU instance\. Use -j 2xPROCS"):
        spmd("-j", "2", "-h", "cpu.large", "--script", "t.py")
    (role,) = spmd("-j", "2x3", "-h", "cpu.large", "--script", "t.py").roles
    assert role.num_replicas == 2 and "--nproc_per_node 3 " in role.args[1]


def test_spmd_passes_args_and_options():
    app = spmd("--script", "t.py", "--name", "e/r", "--env", "A=1", "--max_retries", "2",
               "--debug", "true", "--", "--x", "1")
    (role,) = app.roles
    assert app.name == "r"
    assert role.env["A"] == "1" and role.env["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"
    assert role.max_retries == 2
    assert role.args[-3:] == ["t.py", "--x", "1"]
