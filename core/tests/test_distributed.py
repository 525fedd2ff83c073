"""tx.distributed: env fallbacks in-process, real gloo groups in subprocesses."""
import os
import socket
import subprocess
import sys
import textwrap

import pytest

import tx.distributed as txd
from tx.testing.backends import require_module

RANK_VARS = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def torch():
    return require_module("torch", "tx.distributed wraps torch.distributed: pip install torch==2.13.0")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in RANK_VARS:
        monkeypatch.delenv(var, raising=False)


def test_import_does_not_import_torch():
    code = "import sys, tx.distributed; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- no process group: environment fallbacks -----------------------------------------------
def test_defaults_without_env(torch):
    assert txd.local_rank() == 0
    assert txd.rank() == 0
    assert txd.world_size() == 1
    assert txd.is_rank0() and txd.is_local_rank0()


def test_env_fallbacks(torch, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("RANK", "11")
    monkeypatch.setenv("WORLD_SIZE", "16")
    assert txd.local_rank() == 3
    assert txd.rank() == 11
    assert txd.world_size() == 16
    assert not txd.is_rank0() and not txd.is_local_rank0()
    assert txd.local_cuda_device() == torch.device("cuda:3")


def test_rank0_env(torch, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert txd.is_rank0() and txd.is_local_rank0()
    assert txd.local_cuda_device() == torch.device("cuda:0")


@pytest.mark.parametrize("var,fn", [("LOCAL_RANK", "local_rank"), ("RANK", "rank"), ("WORLD_SIZE", "world_size")])
def test_bad_env_value(torch, monkeypatch, var, fn):
    monkeypatch.setenv(var, "two")
    with pytest.raises(ValueError, match=f"environment variable {var} must be an integer, got 'two'"):
        getattr(txd, fn)()


def test_local_device_without_group(torch):
    gpus = torch.cuda.is_available() and torch.cuda.device_count() > 0
    assert txd.local_device() == torch.device("cuda" if gpus else "cpu")


def test_rank0_first_without_group_just_runs(torch):
    ran = []
    with txd.on_rank0_first():
        ran.append("rank0")
    with txd.on_local_rank0_first():
        ran.append("local")
    assert ran == ["rank0", "local"]
    with pytest.raises(KeyError):
        with txd.on_rank0_first():
            raise KeyError("propagates")


def test_init_pg_bad_backend(torch):
    with pytest.raises(ValueError, match="backend must be one of auto, nccl, gloo, got 'mpi'"):
        txd.init_pg("mpi")


# -- real process groups (subprocesses) ----------------------------------------------------
SINGLE = """
import os, sys, warnings
import torch.distributed as dist
import tx.distributed as txd

dev = txd.init_pg()   # auto: gloo on a CPU host
assert dist.is_initialized()
print("device", dev, dist.get_backend())
print("rank", txd.rank(), txd.world_size(), txd.is_rank0())
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    print("local_rank", txd.local_rank(), len(w), "LOCAL_RANK is not set" in str(w[0].message))
print("local_device", txd.local_device())
try:
    txd.init_pg("gloo")
except RuntimeError as e:
    print("again", e)
print("env", os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"))
dist.destroy_process_group()
"""


def _run(script, env=None, timeout=180):
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=timeout)


def _base_env():
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    if sys.platform.startswith("linux"):  # gloo otherwise resolves the hostname, which may not route
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


def test_init_pg_single_process(torch):
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        pytest.skip("auto picks nccl on a GPU host; this checks the CPU path")
    out = _run(SINGLE, env=_base_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "device cpu gloo",
        "rank 0 1 True",
        "local_rank 0 1 True",
        "local_device cpu",
        "again the default process group is already initialized",
        "env None None",  # the trivial group leaves the environment alone
    ]


WORKER = """
import os, sys, time
import torch, torch.distributed as dist
import tx.distributed as txd
from tx.testing.backends import require_module

log = sys.argv[1]

def note(text):
    with open(log, "a") as f:
        f.write(text + "\\n")

dev = txd.init_pg(backend="gloo")
assert dev == torch.device("cpu"), dev
r = txd.rank()
os.environ["RANK"] = "99"            # the group's rank wins over the environment
os.environ["WORLD_SIZE"] = "99"
assert txd.rank() == r and txd.world_size() == 2, (txd.rank(), txd.world_size())
assert txd.local_rank() == r and txd.is_rank0() == (r == 0) and txd.is_local_rank0() == (r == 0)
assert txd.local_device() == torch.device("cpu")

t = torch.tensor([r + 1])
dist.all_reduce(t)
assert t.item() == 3

with txd.on_rank0_first():
    note(f"rank0_first enter {r}")
    if r == 0:
        time.sleep(0.5)   # gives a missing barrier the chance to show
    note(f"rank0_first exit {r}")

with txd.on_local_rank0_first():
    note(f"local_first enter {r}")
    if r == 0:
        time.sleep(0.5)
    note(f"local_first exit {r}")

try:
    with txd.on_rank0_first():
        if r == 0:
            raise RuntimeError("rank 0 failed inside the block")
        note(f"after_failure {r}")
except RuntimeError:
    note(f"caught {r}")

dist.barrier()
dist.destroy_process_group()
print("ok", r)
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_gloo_group(torch, tmp_path):
    log = tmp_path / "order.log"
    port = _free_port()
    procs = []
    for r in range(2):
        env = _base_env()
        env.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), TORCHELASTIC_RUN_ID="tx-test")
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, str(log)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=180))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for r, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {r} failed:\n{err}"
        assert out.strip() == f"ok {r}"

    lines = log.read_text().splitlines()

    def section(prefix):
        return [line for line in lines if line.startswith(prefix)]

    assert section("rank0_first") == [
        "rank0_first enter 0", "rank0_first exit 0", "rank0_first enter 1", "rank0_first exit 1"]
    assert section("local_first") == [
        "local_first enter 0", "local_first exit 0", "local_first enter 1", "local_first exit 1"]
    # rank 0 raised inside the block: its barrier still ran, so rank 1 was released
    assert sorted(section("after_failure") + section("caught")) == ["after_failure 1", "caught 0"]


@pytest.mark.slow
def test_under_torchrun(torch, tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import torch.distributed as dist
        import tx.distributed as txd

        txd.init_pg("gloo")
        with txd.on_rank0_first():
            print(f"rank={txd.rank()} local_rank={txd.local_rank()} world={txd.world_size()}", flush=True)
        dist.destroy_process_group()
    """))
    out = _run_cmd([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                    str(script)])
    assert out.returncode == 0, out.stderr
    assert sorted(line for line in out.stdout.splitlines() if line.startswith("rank=")) == [
        "rank=0 local_rank=0 world=2", "rank=1 local_rank=1 world=2"]


def _run_cmd(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, env=_base_env(), timeout=240)


_PREEMPT = """
import os, signal
from tx.distributed import exit_preempted, preempted
assert preempted() is False            # arms the handler, nothing noted yet
os.kill(os.getpid(), {sig})            # the warning: only noted
assert preempted() is True and preempted() is True
print("saving", flush=True)
exit_preempted()
print("never", flush=True)
"""


@pytest.mark.parametrize("name, sig", [(None, 15), ("USR1", 10), ("SIGUSR2", 12), ("10", 10)])
def test_preempted_without_a_group_and_exit_preempted_dies_of_the_signal(name, sig):
    """One process: the warning is noted, preempted() stays True, exit_preempted() ends the
    process killed by the warning's signal (what backends count as a preemption)."""
    env = {k: v for k, v in os.environ.items() if k != "TX_PREEMPT_SIGNAL"}
    if name is not None:
        env["TX_PREEMPT_SIGNAL"] = name
    p = subprocess.run([sys.executable, "-c", _PREEMPT.format(sig=sig)], env=env, capture_output=True, text=True,
                       timeout=60)
    assert (p.returncode, p.stdout) == (-sig, "saving\n"), p.stderr


@pytest.mark.parametrize("var, value, fn, match", [
    ("TX_PREEMPT_SIGNAL", "SIGNOPE", "preempt_signal", "must name a signal"),
    ("TX_PREEMPT_GRACE", "soon", "preempt_grace", "must be seconds >= 0"),
    ("TX_PREEMPT_GRACE", "-1", "preempt_grace", "must be seconds >= 0"),
])
def test_bad_preemption_env_is_one_clear_error(monkeypatch, var, value, fn, match):
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=match):
        getattr(txd, fn)()


def test_preemption_env_read(monkeypatch):
    import signal

    monkeypatch.setenv("TX_PREEMPT_GRACE", "12.5")
    monkeypatch.setenv("TX_PREEMPT_SIGNAL", "usr1")
    assert (txd.preempt_grace(), txd.preempt_signal()) == (12.5, signal.SIGUSR1)
    monkeypatch.delenv("TX_PREEMPT_GRACE")
    monkeypatch.delenv("TX_PREEMPT_SIGNAL")
    assert (txd.preempt_grace(), txd.preempt_signal()) == (None, signal.SIGTERM)


def test_saving_checkpoint_marks_another_librarys_save_complete_only_when_the_block_ends(tmp_path, monkeypatch):
    """What another library writes inside the block counts once it ends (the marker, with
    the block's duration; older ones beyond ``keep`` deleted); a block that raises leaves
    its step unread (the previous complete one is the newest)."""
    import json

    monkeypatch.setenv("TX_CHECKPOINT_DIR", str(tmp_path))
    for step in (1, 2, 3):
        with txd.saving_checkpoint(step) as where:
            assert where == str(tmp_path / f"step-{step:09d}") and os.path.isdir(where)
            assert txd.latest_checkpoint() == ((step - 1, str(tmp_path / f"step-{step - 1:09d}")) if step > 1 else None)
            (tmp_path / f"step-{step:09d}" / "lightning.ckpt").write_bytes(b"weights")
    assert txd.latest_checkpoint() == (3, str(tmp_path / "step-000000003"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000000002", "step-000000003"]  # keep=2
    marker = json.loads((tmp_path / "step-000000003" / txd.CHECKPOINT_COMPLETE).read_text())
    assert marker["step"] == 3 and marker["seconds"] >= 0
    with pytest.raises(OSError, match="disk full"):
        with txd.saving_checkpoint(4):
            raise OSError("disk full")
    assert txd.latest_checkpoint()[0] == 3 and not (tmp_path / "step-000000004" / txd.CHECKPOINT_COMPLETE).exists()
    with pytest.raises(ValueError, match="step must be >= 0"):
        with txd.saving_checkpoint(-1):
            pass
