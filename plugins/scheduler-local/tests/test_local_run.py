"""Running apps: log layout, exit codes and signals, errors, environment, arguments."""
import contextlib
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from tx.specs import AppDef, AppState, Resource, RetryPolicy, Role
from tx.testing.backends import backend_unavailable
from tx_scheduler_local._memory import counter_file
from tx_scheduler_local.scheduler import create_cwd_scheduler, create_dir_scheduler


def test_log_dir_layout_and_success_file(sched: Any, cfg: Dict[str, Any], log_root: Path, h: Any) -> None:
    app_id, desc = h.run(sched, [h.sh("a", "echo a${replica_id}", 2), h.sh("b", "echo b${replica_id} >&2", 3)], cfg)
    assert desc.state == AppState.SUCCEEDED
    app_dir = log_root / "tx" / app_id
    assert sorted(os.listdir(app_dir / "a")) == ["0", "1"]
    assert sorted(os.listdir(app_dir / "b")) == ["0", "1", "2"]
    for role, n in (("a", 2), ("b", 3)):
        for k in range(n):
            files = set(os.listdir(app_dir / role / str(k)))
            assert {"stdout.log", "stderr.log", "combined.log"} <= files
    assert (app_dir / "a" / "1" / "stdout.log").read_text() == "a1\n"
    assert (app_dir / "b" / "2" / "stderr.log").read_text() == "b2\n"
    assert (app_dir / "b" / "2" / "combined.log").read_text() == "b2\n"
    success = json.loads((app_dir / "SUCCESS").read_text())
    assert success["app_id"] == app_id and success["final_state"] == "SUCCEEDED"
    assert [r["exitcode"] for r in success["roles"]["b"]] == [0, 0, 0]
    assert desc.ui_url == f"file://{app_dir}"
    assert desc.metadata["log_dir"] == str(app_dir)


# args are macro templates: "$$" is the escape of "$", so "$$$$" reaches the shell as "$$"
@pytest.mark.parametrize(
    "script,code,reason",
    [
        ("echo bye; exit 3", 3, "exited with code 3"),
        ("kill -9 $$$$", -9, "was killed by signal SIGKILL (9)"),
        ("kill -SEGV $$$$", -11, "was killed by signal SIGSEGV (11)"),
    ],
)
def test_exit_codes_and_signals(sched: Any, cfg: Dict[str, Any], h: Any, script: str, code: int, reason: str) -> None:
    app_id, desc = h.run(sched, [h.sh("w", script)], cfg)
    assert desc.state == AppState.FAILED
    r = h.replica(desc, "w", 0)
    assert (r.state, r.exit_code) == (AppState.FAILED, code)
    assert desc.msg.startswith(f"replica w/0 {reason}")


def test_per_replica_states_and_stderr_tail(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    script = (
        'if [ "${replica_id}" = 2 ]; then i=1; while [ $i -le 30 ]; do echo "err line $i" >&2; i=$((i+1)); done; exit 5; fi; '
        'if [ "${replica_id}" = 1 ]; then exec sleep 60; fi; echo ok'
    )
    app_id, desc = h.run(sched, [h.sh("w", script, 3)], {**cfg, "cancel_timeout": 5.0})
    assert desc.state == AppState.FAILED
    states = {r.id: (r.state, r.exit_code) for r in desc.roles_statuses[0].replicas}
    assert states[2] == (AppState.FAILED, 5)
    assert states[1] == (AppState.CANCELLED, -15)  # stopped because replica 2 failed
    assert states[0] in ((AppState.SUCCEEDED, 0), (AppState.CANCELLED, -15))
    # why it failed, in one line: the replica, its exit code, its last stderr line
    assert h.replica(desc, "w", 2).structured_error_msg == "replica w/2 exited with code 5: err line 30"
    assert desc.structured_error_msg == "replica w/2 exited with code 5: err line 30"
    tail = "\n".join(f"err line {i}" for i in range(11, 31))
    assert desc.msg == "replica w/2 exited with code 5; last lines of stderr:\n" + tail


def test_torchelastic_error_file_is_the_structured_error(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    stack = 'Traceback (most recent call last):\\n  File \\"/x/train.py\\", line 42, in main\\n'
    err = ('{"message": {"message": "RuntimeError: boom\\nmore", "extraInfo": {"py_callstack": "'
           + stack + '", "timestamp": "1"}}}')
    _, desc = h.run(sched, [h.sh("w", f"printf '%s' '{err}' > $TORCHELASTIC_ERROR_FILE; echo failing >&2; exit 1")], cfg)
    # the message's lines joined, where it was raised, how it ended (tx.schedulers.why)
    want = "w/0: RuntimeError: boom more at train.py:42 (exit code 1)"
    assert h.replica(desc, "w", 0).structured_error_msg == want
    assert desc.structured_error_msg == want
    assert "failing" in desc.msg


#: where the supervisor cannot read its memory cgroup's OOM-kill counter, a SIGKILL may have
#: been the OOM killer's; where it can, the counter says (test_oom_killed_replica_is_named)
HINT = "" if counter_file() else " (SIGKILL is also what the kernel's OOM killer sends: check the replica's memory)"


@pytest.mark.parametrize("script,want", [
    ("kill -SEGV $$$$", "replica w/0 was killed by signal SIGSEGV (11)"),
    ("echo about to die >&2; kill -KILL $$$$", f"replica w/0 was killed by signal SIGKILL (9){HINT}: about to die"),
    ("sh -c 'kill -ABRT $$$$'; exit $$?", "replica w/0 exited with code 134 (128+6: a process it ran was killed by SIGABRT): Aborted"),
])
def test_why_a_replica_failed_names_the_signal(sched: Any, cfg: Dict[str, Any], h: Any, script: str, want: str) -> None:
    _, desc = h.run(sched, [h.sh("w", script)], cfg)
    assert desc.state == AppState.FAILED
    assert desc.structured_error_msg == want
    assert "\n" not in desc.structured_error_msg


def test_entrypoint_that_cannot_execute_fails_127(sched: Any, cfg: Dict[str, Any], tmp_path: Path, h: Any) -> None:
    script = tmp_path / "bad-interpreter.sh"
    script.write_text("#!/no/such/interpreter\necho never\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    app_id, desc = h.run(sched, [Role("bad", image="", entrypoint=str(script), num_replicas=2)], cfg)
    assert desc.state == AppState.FAILED
    r = h.replica(desc, "bad", 0)
    assert (r.state, r.exit_code) == (AppState.FAILED, 127)
    assert "could not be started" in desc.msg and "No such file or directory" in desc.msg
    assert "could not be started" in h.text(sched, app_id, "bad", 0, "stderr")


def test_arguments_and_env_reach_replicas_unchanged(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    args = [";", "$(echo pwned)", "`id`", "'single'", '"double"', "a\nb", "*", "&& rm -rf /tmp/x", "|", ">out",
            "$HOME", "${NOT_A_MACRO}", "\\", " lead", "\t", ""]
    weird = "; $(id) `id` 'q' \"d\"\nline2 | & > $PATH"
    code = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'env': os.environ['WEIRD']}))"
    role = Role("py", image="", entrypoint=h.py, args=["-c", code, *args], env={"WEIRD": weird})
    app_id, desc = h.run(sched, [role], cfg)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    got = json.loads(h.text(sched, app_id, "py", 0, "stdout"))
    assert got == {"argv": args, "env": weird}


def test_replica_environment(sched: Any, cfg: Dict[str, Any], h: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_TEST_FROM_SUBMITTER", "yes")
    monkeypatch.setenv("TX_TEST_OVERRIDDEN", "submitter")
    names = ["TX_RANK0_HOST", "TX_ROLE_NAME", "TX_REPLICA_ID", "TX_APP_ID", "TORCHELASTIC_ERROR_FILE",
             "PET_LOG_DIR", "PYTHONUNBUFFERED", "TX_TEST_FROM_SUBMITTER", "TX_TEST_OVERRIDDEN", "CUDA_VISIBLE_DEVICES"]
    code = f"import json, os; print(json.dumps({{n: os.environ.get(n) for n in {names!r}}}))"
    roles = [Role("r", image="", entrypoint=h.py, args=["-c", code], num_replicas=2, env={"TX_TEST_OVERRIDDEN": "role"},
                  resource=Resource(cpu=1, gpu=1, memMB=64))]
    s = create_cwd_scheduler("tx", state_dir=sched.state_dir, cuda_device_count=lambda: 2)
    app_id, desc = h.run(s, roles, {**cfg, "auto_set_cuda_visible_devices": True})
    app_dir = desc.metadata["log_dir"]
    for k in (0, 1):
        env = json.loads(h.text(s, app_id, "r", k, "stdout"))
        assert env == {
            "TX_RANK0_HOST": "localhost", "TX_ROLE_NAME": "r", "TX_REPLICA_ID": str(k), "TX_APP_ID": app_id,
            "TORCHELASTIC_ERROR_FILE": os.path.join(app_dir, "r", str(k), "error.json"),
            "PET_LOG_DIR": os.path.join(app_dir, "torchelastic", "r"), "PYTHONUNBUFFERED": "x",
            "TX_TEST_FROM_SUBMITTER": "yes", "TX_TEST_OVERRIDDEN": "role", "CUDA_VISIBLE_DEVICES": str(k),
        }


def test_local_dir_runs_in_the_image(state_dir: Path, cfg: Dict[str, Any], tmp_path: Path, h: Any) -> None:
    img = tmp_path / "img"
    img.mkdir()
    (img / "run.sh").write_text('#!/bin/sh\necho "cwd=$(pwd) root=$1"\n')
    (img / "run.sh").chmod(0o755)
    s = create_dir_scheduler("tx", state_dir=str(state_dir))
    app_id, desc = h.run(s, [Role("r", image=str(img), entrypoint="run.sh", args=["${img_root}"])], cfg)
    assert desc.state == AppState.SUCCEEDED
    assert h.text(s, app_id, "r") == f"cwd={img} root={img}\n"


def test_describe_rebuilds_roles_and_list_is_newest_first(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    roles = [
        h.sh("a", "true", 2, max_retries=1, retry_policy=RetryPolicy.ROLE, env={"K": "v"},
             resource=Resource(cpu=2, gpu=0, memMB=128, capabilities={"x": "y"}), port_map={"p": 29500},
             metadata={"local/k": [1, "two"]}),
        h.sh("b", "true"),
    ]
    ids = []
    for i in range(3):
        app_id, desc = h.run(sched, roles, cfg, name=f"app{i}")
        ids.append(app_id)
    assert desc.roles == roles
    listed = sched.list()
    assert [a.app_id for a in listed] == ids[::-1]
    assert all(a.state == AppState.SUCCEEDED for a in listed)
    assert listed[0].app_handle == f"local_cwd://tx/{ids[-1]}" and listed[0].name == "app2"
    # another scheduler instance (as in another process) knows them too
    other = create_cwd_scheduler("tx", state_dir=sched.state_dir)
    assert other.describe(ids[0]).roles == roles
    assert other.describe(ids[0]).state == AppState.SUCCEEDED


def test_describe_from_another_process_gives_back_the_whole_appdef(state_dir: Any, cfg: Dict[str, Any], h: Any,
                                                                   tmp_path: Any) -> None:
    """Stored through core's converter: mounts, base_image, resource tags and devices,
    retry settings, metadata and the app's own name and metadata all come back (the mounts
    local_cwd honours: writable binds of a host path at itself; it refuses the others)."""
    import subprocess
    import sys

    from tx.runner import get_runner
    from tx.specs import BindMount
    from tx.specs.files import appdef_from_dict

    app = AppDef("whole", metadata={"team": "ml", "n": "3"}, roles=[
        h.sh("a", "true", 2, max_retries=1, retry_policy=RetryPolicy.REPLICA, env={"K": "v"}, min_replicas=1,
             base_image="base:1",
             resource=Resource(cpu=2, gpu=0, memMB=128, capabilities={"node.kubernetes.io/instance-type": "m5"},
                               devices={"vpc.amazonaws.com/efa": 1}, tags={"x": "y"}),
             port_map={"p": 29500}, metadata={"local/k": [1, "two"]},
             mounts=[BindMount(str(tmp_path), str(tmp_path)), BindMount(f"{tmp_path}/in", f"{tmp_path}/in/")]),
        h.sh("b", "true"),
    ])
    with get_runner() as runner:
        handle = runner.run(app, "local_cwd", cfg)
        runner.wait(handle, wait_interval=0.1)
        submitted = runner.describe(handle)  # what this runner submitted (TX_JOB_ID added)
    code = ("import json, sys\nfrom tx.runner import get_runner\n"
            "from tx.specs.files import appdef_to_dict\n"
            "with get_runner() as r: print(json.dumps(appdef_to_dict(r.describe(sys.argv[1]))))")
    p = subprocess.run([sys.executable, "-c", code, handle], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    assert appdef_from_dict(json.loads(p.stdout)) == submitted
    assert submitted.roles[0].mounts == app.roles[0].mounts and submitted.metadata == app.metadata


def test_unknown_app_ids(sched: Any) -> None:
    for app_id in ("nope-123", "../etc", "a/b", "", ".hidden"):
        assert sched.describe(app_id) is None
        sched.cancel(app_id)
    assert sched.list() == []
    assert sched.wait("nope-123", timeout=1) is None


def test_wait_timeout_returns_the_running_state(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    app_id = sched.submit(AppDef("w", roles=[h.sh("s", "exec sleep 60")]), cfg)
    desc = sched.wait(app_id, timeout=0.2)
    assert desc.state in (AppState.PENDING, AppState.RUNNING)
    sched.cancel(app_id)
    assert sched.wait(app_id, timeout=30).state == AppState.CANCELLED


def test_deleted_registry_entry_is_unknown(sched: Any, cfg: Dict[str, Any], state_dir: Path, h: Any) -> None:
    import shutil

    app_id, _ = h.run(sched, [h.sh("r", "true")], cfg)
    shutil.rmtree(state_dir / "local" / "apps" / app_id)
    other = create_cwd_scheduler("tx", state_dir=str(state_dir))
    assert other.describe(app_id) is None
    assert other.list() == []


@pytest.mark.parametrize("name", ["Über-run", "(exp)", "日本語", "@team"])
def test_any_app_name_gives_an_id_every_command_reaches(state_dir: Any, cfg: Dict[str, Any], name: str) -> None:
    import subprocess
    import sys

    from tx.runner import get_runner

    app = AppDef(name, [Role("r", image="", entrypoint="sh", args=["-c", "sleep 30"])])
    with get_runner() as runner:
        handle = runner.run(app, "local_cwd", cfg)
        app_id = handle.rsplit("/", 1)[1]
        assert not app_id.startswith("-") and app_id.isascii(), app_id
        tx = os.path.join(os.path.dirname(sys.executable), "tx")
        for cmd in (["status", handle], ["cancel", handle]):
            p = subprocess.run([tx, *cmd], capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, (cmd, p.stderr)
        st = runner.wait(handle, wait_interval=0.1, timeout=30)
        assert st is not None and st.state == AppState.CANCELLED


@contextlib.contextmanager
def _memory_limited_cgroup(limit_mb: int) -> Iterator[Path]:
    """A new memory cgroup limited to ``limit_mb`` MB (no swap), made for the test (v1
    ``/sys/fs/cgroup/memory/<name>`` or v2 ``/sys/fs/cgroup/<name>``); yields its directory
    and removes it, killing what is left in it."""
    name = f"tx-test-oom-{os.getpid()}"
    v1, v2 = Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")
    if (v1 / "memory.limit_in_bytes").exists():
        d, files = v1 / name, [("memory.limit_in_bytes", f"{limit_mb}M"), ("memory.memsw.limit_in_bytes", f"{limit_mb}M")]
    elif "memory" in (v2 / "cgroup.subtree_control").read_text(errors="replace").split() if (
            v2 / "cgroup.subtree_control").exists() else False:
        d, files = v2 / name, [("memory.max", f"{limit_mb}M"), ("memory.swap.max", "0")]
    else:
        backend_unavailable("memory cgroup", "no cgroup memory controller (v1 /sys/fs/cgroup/memory or v2 "
                            "/sys/fs/cgroup with +memory) to limit a replica's memory")
    try:
        d.mkdir()
    except OSError as e:
        backend_unavailable("memory cgroup", f"cannot create a memory cgroup ({e}): run the tests as root "
                            "with a writable /sys/fs/cgroup")
    try:
        for f, value in files:
            if (d / f).exists():
                (d / f).write_text(value)
        yield d
    finally:
        for _ in range(50):
            pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
            if not pids:
                break
            for p in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
            time.sleep(0.1)
        d.rmdir()


def test_oom_killed_replica_is_named(state_dir: Path, log_root: Path, h: Any) -> None:
    """A replica over its memory cgroup's limit, killed by the kernel's OOM killer, is named
    so (the cgroup's OOM-kill counter grew while it ran), with the limit; a replica killed
    with SIGKILL by anything else is not (test_why_a_replica_failed_names_the_signal)."""
    hog = "b = []\nwhile True:\n    b.append(bytearray(16 * 2**20))\n    b[-1][::4096] = b'x' * (len(b[-1]) // 4096)"
    submit = (
        "import json, sys\n"
        "from tx.specs import AppDef, Role\n"
        "from tx_scheduler_local.scheduler import create_cwd_scheduler\n"
        "s = create_cwd_scheduler('tx')\n"
        f"role = Role('hog', image='', entrypoint=sys.executable, args=['-c', {hog!r}])\n"
        f"app_id = s.submit(AppDef('oom', roles=[role]), {{'log_dir': {str(log_root)!r}}})\n"
        "print(app_id, flush=True)\n"
        "s.wait(app_id, timeout=120)\n"
    )
    with _memory_limited_cgroup(200) as cg:
        # the submitter joins the cgroup first: the supervisor and the replica inherit it
        p = subprocess.run(["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$0" -c "$1"', h.py, submit],
                           env={**os.environ, "TX_STATE_DIR": str(state_dir)}, capture_output=True, text=True,
                           timeout=180)
    assert p.returncode == 0, p.stderr
    app_id = p.stdout.split()[0]
    desc = create_cwd_scheduler("tx", state_dir=str(state_dir)).describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED, desc
    assert desc.structured_error_msg.startswith(
        "replica hog/0 was killed by the kernel's OOM killer (SIGKILL; its memory cgroup's limit is 200 MB)"), desc
    assert h.replica(desc, "hog", 0).exit_code == -signal.SIGKILL
    assert "check the replica's memory" not in desc.structured_error_msg


def test_mounts_local_replicas_would_run_without_are_refused(sched: Any, cfg: Dict[str, Any], h: Any,
                                                             tmp_path: Any) -> None:
    """A writable bind of a host path at itself holds on the host: the replica runs and
    writes through it. Every other mount (another dst, read-only, relative, a volume, a
    device) would be run without: submit_dryrun refuses it in one line naming the role, the
    mount and what to do instead, and nothing starts."""
    from tx.specs import BindMount, DeviceMount, VolumeMount

    out = tmp_path / "out"
    out.mkdir()
    ok = BindMount(f"{out}/", str(out))  # the same path, spelt differently
    _, desc = h.run(sched, [h.sh("w", f"echo hi > {out}/f", mounts=[ok])], cfg)
    assert desc.state == AppState.SUCCEEDED and (out / "f").read_text() == "hi\n"
    assert len(sched.list()) == 1
    for bad, text in [(BindMount(str(out), "/data"), f"bind {out} -> /data"),
                      (BindMount(str(out), str(out), read_only=True), f"bind {out} -> {out} (read-only)"),
                      (BindMount("out", "out"), "bind out -> out"),
                      (VolumeMount("vol", "/vol"), "volume vol -> /vol"),
                      (DeviceMount("/dev/fuse", "/dev/fuse"), "device /dev/fuse -> /dev/fuse")]:
        app = AppDef("m", roles=[h.sh("w", "true", mounts=[ok, bad])])
        with pytest.raises(ValueError) as e:
            sched.submit_dryrun(app, cfg)
        assert str(e.value).startswith(f"role 'w': the local_cwd scheduler cannot honour mount {text} ("), e.value
        assert "\n" not in str(e.value) and "run on local_docker" in str(e.value)
    assert len(sched.list()) == 1  # nothing more started
