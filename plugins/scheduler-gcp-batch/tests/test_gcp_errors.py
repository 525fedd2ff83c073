"""gcp_batch's errors through the official clients against the local Batch + Logging server
(fake_gcp): a denied project, rejected or missing credentials, an exceeded quota, an
unreachable endpoint, no project; each is one line naming what to do, through the Python
API and the ``tx`` CLI (the dryrun needs no credentials), and the CLI reaches the server
from the environment. The states, logs and operations are test_gcp_backend.py's."""
import os
import subprocess
import sys
from typing import Any, Dict

import pytest

from test_gcp_backend import lines, run, sched, sh  # noqa: F401 - sched: the fixture, shared
from fake_gcp import DENIED_PROJECT, QUOTA_PROJECT, UNAUTHENTICATED_PROJECT, FakeGcp
from tx.schedulers import SchedulerError
from tx.specs import AppDef, AppState
from tx_scheduler_gcp_batch.scheduler import GcpBatchScheduler, create_scheduler
from tx_scheduler_gcp_batch.testing import LOCATION, PROJECT


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and "Traceback" not in text, text
    return text


def test_permission_denied_says_what_to_set(sched: GcpBatchScheduler) -> None:
    app = AppDef("denied", roles=[sh("w", "true")])
    with pytest.raises(SchedulerError) as e:
        sched.submit(app, {"project": DENIED_PROJECT})
    text = one_line(e.value)
    assert text.startswith("gcp_batch: permission denied to create job") and "roles/batch.jobsEditor" in text
    assert "project=" in text and "GOOGLE_CLOUD_PROJECT" in text
    # describe reads the location's shared snapshot: its list_jobs is what is denied
    with pytest.raises(SchedulerError, match="permission denied to list jobs in projects/denied-project"):
        sched.describe(f"{DENIED_PROJECT}:{LOCATION}:some-job")


def test_rejected_credentials_say_how_to_log_in(sched: GcpBatchScheduler) -> None:
    with pytest.raises(SchedulerError) as e:
        sched.submit(AppDef("unauth", roles=[sh("w", "true")]), {"project": UNAUTHENTICATED_PROJECT})
    text = one_line(e.value)
    assert "not authenticated" in text and "gcloud auth application-default login" in text


def test_replicas_see_their_app_handle_through_the_runner(fake_gcp: FakeGcp) -> None:
    """Through the Runner (as ``tx run``): TX_JOB_ID is the app handle, TX_APP_ID its app id."""
    from tx.runner import get_runner

    app = AppDef("handle", roles=[sh("w", 'echo "$TX_JOB_ID|$TX_APP_ID|$TORCHX_JOB_ID"')])
    with get_runner() as runner:
        handle = runner.run(app, "gcp_batch")
        assert runner.wait(handle, wait_interval=0.2).state == AppState.SUCCEEDED
        (line,) = runner.log_lines(handle, "w", 0)
    app_id = handle.split("/", 3)[3]
    assert handle == f"gcp_batch://tx/{app_id}" and app_id.startswith(f"{PROJECT}:{LOCATION}:handle-")
    assert line == f"{handle}|{app_id}|{handle}\n"


def test_quota_exceeded_is_one_line(sched: GcpBatchScheduler) -> None:
    with pytest.raises(SchedulerError) as e:
        sched.submit(AppDef("big", roles=[sh("w", "true")]), {"project": QUOTA_PROJECT})
    text = one_line(e.value)
    assert "quota exceeded" in text and "Quota 'CPUS' exceeded" in text and "location=" in text
    assert not [a for a in sched.list() if "big-" in a.app_id]  # nothing half-created


def test_unreachable_endpoint(monkeypatch: pytest.MonkeyPatch, fake_gcp: FakeGcp) -> None:
    from tx.testing.backends import free_port

    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH", f"http://127.0.0.1:{free_port()}")
    sched = create_scheduler("tx")
    with pytest.raises(SchedulerError) as e:
        sched.describe(f"{PROJECT}:{LOCATION}:x")
    text = one_line(e.value)
    assert "cannot reach Google Cloud" in text and "CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH" in text


def test_no_project(monkeypatch: pytest.MonkeyPatch, fake_gcp: FakeGcp) -> None:
    for var in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    sched = create_scheduler("tx")
    with pytest.raises(SchedulerError) as e:
        sched.submit_dryrun(AppDef("p", roles=[sh("w", "true")]), {})
    text = one_line(e.value)
    assert "no Google Cloud project" in text and "project=" in text and "gcloud config set project" in text
    assert sched.submit_dryrun(AppDef("p", roles=[sh("w", "true")]), {"project": "given"}).request.project == "given"


def cli_env(tmp_path: Any, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLOUDSDK_", "GOOGLE_", "TX_")) and k != "NO_GCE_CHECK"}
    env.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"), NO_GCE_CHECK="true", **extra)
    return env


def test_no_credentials_cli_one_line(tmp_path: Any) -> None:
    """``tx status`` with no credentials anywhere: one line saying what to run or set."""
    env = cli_env(tmp_path, GOOGLE_CLOUD_PROJECT="p")
    p = subprocess.run([sys.executable, "-m", "tx.cli", "status", "gcp_batch://tx/p:us-central1:some-job"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "no Google Cloud credentials found" in err[0] and "gcloud auth application-default login" in err[0]
    assert "GOOGLE_APPLICATION_CREDENTIALS" in err[0]


def test_dryrun_needs_no_credentials(tmp_path: Any) -> None:
    """``tx run --dryrun`` with no credentials anywhere (an empty HOME, no
    GOOGLE_APPLICATION_CREDENTIALS, no metadata server): ``-cfg project=`` is all it needs,
    and without a project the one line says how to give one, not to log in."""
    env = cli_env(tmp_path)
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in env and env["HOME"] == str(tmp_path)
    assert not any(tmp_path.rglob("application_default_credentials.json"))
    ok = subprocess.run([sys.executable, "-m", "tx.cli", "run", "-s", "gcp_batch", "--dryrun", "-cfg", "project=p",
                         "utils.echo"], env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "projects/p/locations/us-central1" in ok.stdout, ok.stderr
    no = subprocess.run([sys.executable, "-m", "tx.cli", "run", "-s", "gcp_batch", "--dryrun", "utils.echo"],
                        env=env, capture_output=True, text=True, timeout=60)
    err = [ln for ln in no.stderr.splitlines() if ln.strip()]
    assert no.returncode == 1 and len(err) == 1, no.stderr
    assert "no Google Cloud project" in err[0] and "-cfg project=PROJECT" in err[0] and "gcloud auth" not in err[0]


def test_cli_status_reaches_the_server_from_the_environment(sched: GcpBatchScheduler, tmp_path: Any) -> None:
    app_id, _ = run(sched, AppDef("clistatus", roles=[sh("w", "echo via-cli")]))
    env = cli_env(tmp_path, **{k: os.environ[k] for k in (
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH", "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING", "GOOGLE_CLOUD_PROJECT",
        "CLOUDSDK_BATCH_LOCATION")})
    handle = f"gcp_batch://tx/{app_id}"
    st = subprocess.run([sys.executable, "-m", "tx.cli", "status", handle], env=env, capture_output=True, text=True,
                        timeout=60)
    assert st.returncode == 0 and "SUCCEEDED" in st.stdout, st.stdout + st.stderr
    lg = subprocess.run([sys.executable, "-m", "tx.cli", "log", f"{handle}/w/0"], env=env, capture_output=True,
                        text=True, timeout=60)
    assert lg.returncode == 0 and "via-cli" in lg.stdout, lg.stdout + lg.stderr
