"""Why a local_docker app failed is recorded when tx sees it end (beside its archived logs),
not read again from the container's log at each look: with that log gone, ``tx status``
still names the exception and file:line (issue 41, seam 9, on a backend other than the
local schedulers)."""
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

TX = [os.path.join(os.path.dirname(sys.executable), "tx")]

#: a Python traceback, as a failing job writes it to stderr (busybox has no Python)
FAIL = ("printf 'Traceback (most recent call last):\\n  File \"/job/fail.py\", line 5, in <module>\\n"
        "    raise ValueError(\"bad learning rate\")\\nValueError: bad learning rate\\n' >&2; exit 1")
WHY = "sh/0: ValueError: bad learning rate at fail.py:5 (exit code 1)"


def _tx(*args: str, env: Dict[str, str], cwd: Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([*TX, *args], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=180)


def test_the_root_cause_outlives_the_containers_log(podman_engine: Dict[str, str], docker_client: Any,
                                                    image: str, tmp_path: Path) -> None:
    env = {**os.environ, **podman_engine, "TX_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)}
    p = _tx("run", "-s", "local_docker", "--workspace", "", "utils.sh", "--image", image, "sh", "-c", FAIL, env=env, cwd=tmp_path)
    assert p.returncode != 0, p.stdout + p.stderr
    handle = next(ln for ln in (p.stdout + p.stderr).splitlines() if ln.startswith("local_docker://"))
    app_id = handle.rsplit("/", 1)[1]
    before = _tx("status", handle, env=env, cwd=tmp_path)
    assert f"  Structured Error Msg: {WHY}\n" in before.stdout, before.stdout + before.stderr
    # tx saw it end: the archive marks it complete (the wait's detached copier, or this look)
    deadline = time.monotonic() + 60
    while not glob.glob(str(tmp_path / "state" / "**" / app_id / "complete"), recursive=True):
        assert time.monotonic() < deadline, "the archive never marked the app complete"
        time.sleep(0.1)

    # the backend keeps the container but loses its log
    (container,) = docker_client.containers.list(all=True, filters={"label": f"tx.app-id={app_id}"})
    log_path = container.attrs.get("LogPath") or container.attrs["HostConfig"]["LogConfig"].get("Path")
    assert log_path and os.path.exists(log_path), container.attrs.get("HostConfig", {}).get("LogConfig")
    os.truncate(log_path, 0)
    assert docker_client.api.logs(container.id, stdout=True, stderr=True) == b""

    status = _tx("status", handle, env=env, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert f"  Structured Error Msg: {WHY}\n" in status.stdout, status.stdout
    assert f"      {WHY}\n" in status.stdout, status.stdout  # the replica's line too
    js = json.loads(_tx("status", "--json", handle, env=env, cwd=tmp_path).stdout)
    assert js["structured_error_msg"] == WHY and js["root_cause"]["text"] == WHY, js
    rc = js["root_cause"]
    assert (rc["exception_type"], rc["file"], rc["line"], rc["exit_code"]) == ("ValueError", "/job/fail.py", 5, 1), rc
