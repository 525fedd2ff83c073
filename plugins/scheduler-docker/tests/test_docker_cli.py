"""The ``tx`` command with local_docker, in fresh processes, as the README shows it."""
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

TX = [os.path.join(os.path.dirname(sys.executable), "tx")]


def _tx(args: List[str], env: Dict[str, str], cwd: Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([*TX, *args], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=180)


def test_readme_echo_relays_both_replicas(podman_engine: Dict[str, str], image: str, tmp_path: Path) -> None:
    """The issue's command: both replicas' lines, prefixed by role/replica."""
    env = {**os.environ, **podman_engine}
    p = _tx(["run", "-s", "local_docker", "--workspace", "", "utils.sh", "--image", image, "--num_replicas", "2",
             "echo", "hi ${replica_id}"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines() + p.stderr.splitlines()
    assert "sh/0 hi 0" in out and "sh/1 hi 1" in out, (p.stdout, p.stderr)
    handle = next(ln for ln in out if ln.startswith("local_docker://"))
    st = _tx(["status", handle], env, tmp_path)
    assert st.returncode == 0 and "SUCCEEDED" in st.stdout, st.stdout + st.stderr
    ls = _tx(["list", "-s", "local_docker"], env, tmp_path)
    assert handle in ls.stdout, ls.stdout
    log = _tx(["log", handle + "/sh/1"], env, tmp_path)
    assert "hi 1" in log.stdout, log.stdout + log.stderr


def test_workspace_through_the_cli(podman_engine: Dict[str, str], image: str, tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hello from the workspace\n")
    env = {**os.environ, **podman_engine}
    args = ["run", "-s", "local_docker", "--workspace", str(tmp_path), "utils.sh", "--image", image, "cat", "hello.txt"]
    first = _tx(args, env, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "sh/0 hello from the workspace" in first.stdout + first.stderr
    assert "building workspace image" in first.stderr
    second = _tx(args, env, tmp_path)
    assert second.returncode == 0 and "workspace unchanged: reusing image" in second.stderr, second.stderr
    assert "STEP" not in second.stderr and "building" not in second.stderr


def test_no_engine_one_line(tmp_path: Path, image: str) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/nothing.sock"}
    p = _tx(["run", "-s", "local_docker", "--workspace", "", "utils.sh", "--image", image, "true"], env, tmp_path)
    assert p.returncode != 0
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and "no Docker engine answers" in err[0] and "start-podman.sh" in err[0], p.stderr


def test_local_cwd_run_does_not_import_docker(tmp_path: Path) -> None:
    """``tx run -s local_cwd``, ``tx --help`` and ``tx --version`` import neither docker nor
    this plugin's scheduler (hooks.py only, when the registry is built without its cache)."""
    for args in (["run", "-s", "local_cwd", "utils.echo", "--msg", "x"], ["--help"], ["--version"]):
        env = {**os.environ, "TX_NO_CACHE": "1"}
        p = subprocess.run([sys.executable, "-X", "importtime", *TX, *args], env=env, capture_output=True, text=True,
                           timeout=120, cwd=str(tmp_path))
        assert p.returncode == 0, p.stderr[-2000:]
        mods = {ln.rsplit("|", 1)[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
        assert mods, p.stderr[-2000:]
        assert not {m for m in mods if m == "docker" or m.startswith("docker.")}, args
        assert "tx_scheduler_docker.scheduler" not in mods and "tx_scheduler_docker.workspace" not in mods, args


def test_dryrun_shows_the_preemption_grace_and_refuses_a_negative_one(tmp_path: Path) -> None:
    """``tx run --dryrun`` (no engine needed) shows ``preempt_grace`` as every container's
    stop timeout and its ``TX_PREEMPT_GRACE``; a negative one is one line, exit 1 or 2."""
    env = {**os.environ, "TX_STATE_DIR": str(tmp_path / "state")}
    args = ["run", "--dryrun", "-s", "local_docker", "-cfg", "preempt_grace=12.5", "utils.sh", "--image", "busybox",
            "true"]
    p = _tx(args, env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "stop_timeout: 13" in p.stdout and "TX_PREEMPT_GRACE: '13'" in p.stdout, p.stdout
    args[5] = "preempt_grace=-1"
    p = _tx(args, env, tmp_path)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode != 0 and len(err) == 1 and "must be seconds >= 0" in err[0], p.stderr
