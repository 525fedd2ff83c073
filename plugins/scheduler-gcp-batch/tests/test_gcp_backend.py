"""The scheduler through the official clients against the local Batch + Logging server:
states as Batch documents them, retries and Spot preemption, logs with since/until/regex
and tailing, the request arriving intact, and errors as one-line messages."""
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import batch_v1

from fake_gcp import DENIED_PROJECT, QUOTA_PROJECT, UNAUTHENTICATED_PROJECT, FakeGcp
from tx.schedulers import SchedulerError
from tx.specs import AppDef, AppState, Resource, Role, is_terminal
from tx.testing import find_replica
from tx_scheduler_gcp_batch.scheduler import GcpBatchScheduler, create_scheduler

from gcp_settings import LOCATION, PROJECT


@pytest.fixture
def sched(fake_gcp: FakeGcp) -> GcpBatchScheduler:
    return create_scheduler("tx")


def sh(name: str, script: str, replicas: int = 1, **kw: Any) -> Role:
    return Role(name, image="busybox", entrypoint="sh", args=["-c", script], num_replicas=replicas, **kw)


def run(sched: GcpBatchScheduler, app: AppDef, cfg: Dict[str, Any] = None, timeout: float = 60) -> Any:
    app_id = sched.submit(app, cfg or {})
    desc = sched.wait(app_id, timeout=timeout, poll_interval=0.2)
    assert desc is not None and is_terminal(desc.state), desc
    return app_id, desc


def lines(sched: GcpBatchScheduler, app_id: str, role: str, k: int = 0, **kw: Any) -> List[str]:
    return list(sched.log_iter(app_id, role, k, **kw))


def test_request_reaches_batch_intact_and_roles_come_back(sched: GcpBatchScheduler, fake_gcp: FakeGcp) -> None:
    """The multi-role, multi-replica, GPU, Spot request the server parsed (REST JSON into
    ``batch_v1.Job``) equals the one built; describe gives the roles back."""
    app = AppDef("roundtrip", roles=[
        sh("trainer", "echo t ${replica_id}", 2, resource=Resource(cpu=4, gpu=8, memMB=2048), max_retries=1,
           env={"X": "1"}),
        sh("eval", "echo e", 1, resource=Resource(cpu=1, gpu=0, memMB=512)),
    ])
    info = sched.submit_dryrun(app, {"provisioning_model": "SPOT", "service_account": "sa@x.iam.gserviceaccount.com"})
    app_id = sched.schedule(info)
    assert fake_gcp.created[-1] == info.request.job
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    roles = {r.name: r for r in desc.roles}
    assert roles["trainer"].args == ["-c", "echo t ${replica_id}"]
    assert roles["trainer"].num_replicas == 2 and roles["trainer"].max_retries == 1
    assert roles["trainer"].resource.gpu == 8 and roles["eval"].resource.memMB == 512
    assert roles["trainer"].env == {"X": "1"}
    assert lines(sched, app_id, "trainer", 1) == ["t 1\n"]
    assert desc.app_id == app_id == f"{PROJECT}:{LOCATION}:{info.request.job_id}"


def test_states_queued_scheduled_running_succeeded(sched: GcpBatchScheduler) -> None:
    app_id = sched.submit(AppDef("states", roles=[sh("w", "sleep 1.5; echo done", 2)]), {})
    seen: List[AppState] = []
    msgs = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        desc = sched.describe(app_id)
        if not seen or seen[-1] != desc.state:
            seen.append(desc.state)
            msgs.append(desc.msg)
        if is_terminal(desc.state):
            break
        time.sleep(0.05)
    assert seen == [AppState.SUBMITTED, AppState.PENDING, AppState.RUNNING, AppState.SUCCEEDED], seen
    assert "QUEUED" in msgs[0] and "SCHEDULED" in msgs[1], msgs  # why it waits: Batch's status event
    assert desc.metadata["batch_state"] == "SUCCEEDED"
    assert [r.exit_code for r in desc.roles_statuses[0].replicas] == [0, 0]


def test_failure_names_the_replica_exit_code_and_last_lines(sched: GcpBatchScheduler) -> None:
    script = 'echo "step ${replica_id}"; if [ ${replica_id} = 1 ]; then echo "CUDA error: boom" >&2; exit 3; fi'
    app_id, desc = run(sched, AppDef("fails", roles=[sh("ok", "true"), sh("worker", script, 2)]))
    assert desc.state == AppState.FAILED
    r1 = find_replica(desc, "worker", 1)
    assert (r1.state, r1.exit_code) == (AppState.FAILED, 3)
    assert find_replica(desc, "worker", 0).state == AppState.SUCCEEDED
    err = desc.structured_error_msg
    assert err.startswith("worker[1] (task 2) failed with exit code 3") and "CUDA error: boom" in err, err
    assert "\n" not in err
    assert "task failure" in desc.msg


def test_retries_restart_a_failed_replica(sched: GcpBatchScheduler) -> None:
    script = 'echo "attempt $BATCH_TASK_RETRY_ATTEMPT"; [ "$BATCH_TASK_RETRY_ATTEMPT" -ge 1 ]'
    app_id, desc = run(sched, AppDef("retry", roles=[sh("w", script, max_retries=2)]))
    assert desc.state == AppState.SUCCEEDED, desc.structured_error_msg
    assert desc.num_restarts == 1
    assert lines(sched, app_id, "w") == ["attempt 0\n", "attempt 1\n"]


def test_spot_preemption_is_retried_but_app_failures_are_not(sched: GcpBatchScheduler, fake_gcp: FakeGcp) -> None:
    """SPOT with max_retries=0: a preempted VM (exit 50001) is retried, exit 3 fails at once."""
    script = (
        'echo "attempt $BATCH_TASK_RETRY_ATTEMPT"; '
        'if [ ${replica_id} = 0 ] && [ "$BATCH_TASK_RETRY_ATTEMPT" = 0 ]; then sleep 600; fi; '
        'if [ ${replica_id} = 1 ]; then sleep 1; exit 3; fi'
    )
    app_id = sched.submit(AppDef("spot", roles=[sh("w", script, 2)]), {"provisioning_model": "SPOT", "spot_retries": 2})
    wait_for_line(sched, app_id, "w", 0)
    fake_gcp.preempt(sched.describe(app_id).metadata["job_name"], 0)
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert lines(sched, app_id, "w", 0) == ["attempt 0\n", "attempt 1\n"]  # preempted, then ran again
    assert find_replica(desc, "w", 0).state == AppState.SUCCEEDED
    assert lines(sched, app_id, "w", 1) == ["attempt 0\n"]  # exit 3: not retried
    assert find_replica(desc, "w", 1).exit_code == 3
    assert desc.state == AppState.FAILED and desc.num_restarts == 1


def test_without_spot_a_preempted_vm_fails_the_replica(sched: GcpBatchScheduler, fake_gcp: FakeGcp) -> None:
    app_id = sched.submit(AppDef("std", roles=[sh("w", "echo up; sleep 600")]), {})
    wait_for_line(sched, app_id, "w", 0)
    fake_gcp.preempt(sched.describe(app_id).metadata["job_name"], 0)
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc.state == AppState.FAILED and find_replica(desc, "w", 0).exit_code == 50001
    assert "exit code 50001" in desc.structured_error_msg


def test_logs_streams_since_until_regex(sched: GcpBatchScheduler) -> None:
    script = "echo out1; echo err1 >&2; sleep 1.2; echo out2; echo err2 >&2"
    app_id, desc = run(sched, AppDef("logs", roles=[sh("w", script)]))
    assert desc.state == AppState.SUCCEEDED
    # combined: in time order; stdout and stderr lines of one instant may come either way
    # round (two pipes, as on a real VM), lines 1 always before the pause and lines 2
    combined = lines(sched, app_id, "w")
    assert sorted(combined[:2]) == ["err1\n", "out1\n"] and sorted(combined[2:]) == ["err2\n", "out2\n"]
    assert lines(sched, app_id, "w", streams="stdout") == ["out1\n", "out2\n"]
    assert lines(sched, app_id, "w", streams="stderr") == ["err1\n", "err2\n"]
    assert sorted(lines(sched, app_id, "w", regex=r"2$")) == ["err2\n", "out2\n"]
    assert lines(sched, app_id, "w", regex=r"^out", streams="stdout") == ["out1\n", "out2\n"]
    # find the pause: entries before it and after it
    from google.cloud import logging as gcl

    client = gcl.Client(project=PROJECT, credentials=AnonymousCredentials(), _use_grpc=False,
                        client_options={"api_endpoint": os.environ["CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING"].rstrip("/")})
    uid = desc.metadata["uid"]
    stamps = {e.payload: e.timestamp for e in client.list_entries(filter_=f'labels.job_uid="{uid}" AND timestamp>="1970-01-01T00:00:00Z"')}
    middle = stamps["err1"] + (stamps["out2"] - stamps["err1"]) / 2
    assert sorted(lines(sched, app_id, "w", since=middle)) == ["err2\n", "out2\n"]
    assert sorted(lines(sched, app_id, "w", until=middle)) == ["err1\n", "out1\n"]
    assert lines(sched, app_id, "w", since=middle, streams="stdout") == ["out2\n"]
    naive_local = middle.astimezone().replace(tzinfo=None)  # naive datetimes are local time
    assert sorted(lines(sched, app_id, "w", since=naive_local)) == ["err2\n", "out2\n"]


def test_tail_follows_until_the_job_ends(sched: GcpBatchScheduler) -> None:
    app_id = sched.submit(AppDef("tail", roles=[sh("w", "for i in 1 2 3; do echo tick $i; sleep 0.7; done")]), {})
    start = time.monotonic()
    got = list(sched.log_iter(app_id, "w", 0, should_tail=True))
    assert got == ["tick 1\n", "tick 2\n", "tick 3\n"]
    assert time.monotonic() - start >= 1.4  # it waited for the lines to come
    assert is_terminal(sched.describe(app_id).state)


def test_cancel_and_delete_move_through_batch_states(sched: GcpBatchScheduler, fake_gcp: FakeGcp) -> None:
    app_id = sched.submit(AppDef("cancelme", roles=[sh("w", "echo up; sleep 600", 2)]), {})
    deadline = time.monotonic() + 30
    while sched.describe(app_id).state != AppState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.1)
    sched.cancel(app_id)
    desc = sched.wait(app_id, timeout=30, poll_interval=0.1)
    assert desc.state == AppState.CANCELLED and desc.metadata["batch_state"] == "CANCELLED"
    assert {r.state for r in desc.roles_statuses[0].replicas} <= {AppState.CANCELLED, AppState.FAILED}
    sched.cancel(app_id)  # idempotent on an ended job
    # a user deletes the job (gcloud batch jobs delete): DELETION_IN_PROGRESS, then gone
    client = batch_v1.BatchServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                         client_options=ClientOptions(api_endpoint=fake_gcp.url))
    client.delete_job(name=desc.metadata["job_name"])
    gone = sched.describe(app_id)
    assert gone is None or (gone.state == AppState.UNKNOWN and "being deleted" in gone.msg)
    deadline = time.monotonic() + 10
    while sched.describe(app_id) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sched.describe(app_id) is None
    assert app_id not in [a.app_id for a in sched.list()]


def test_list_shows_only_tx_jobs_of_the_location(sched: GcpBatchScheduler, fake_gcp: FakeGcp) -> None:
    client = batch_v1.BatchServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                         client_options=ClientOptions(api_endpoint=fake_gcp.url))
    runnable = batch_v1.Runnable(script=batch_v1.Runnable.Script(text="true"))
    foreign = batch_v1.Job(task_groups=[batch_v1.TaskGroup(task_spec=batch_v1.TaskSpec(runnables=[runnable]))])
    client.create_job(parent=f"projects/{PROJECT}/locations/{LOCATION}", job=foreign, job_id="not-from-tx")
    elsewhere = sched.submit(AppDef("elsewhere", roles=[sh("w", "true")]), {"location": "asia-east1"})
    mine = sched.submit(AppDef("mine", roles=[sh("w", "true")]), {})
    listed = {a.app_id: a for a in sched.list()}
    assert mine in listed and listed[mine].name == "mine"
    assert f"{PROJECT}:{LOCATION}:not-from-tx" not in listed
    assert elsewhere not in listed
    assert sched.describe(elsewhere) is not None  # the app id carries its location
    sched.wait(elsewhere, timeout=30)
    sched.wait(mine, timeout=30)


def test_unknown_apps(sched: GcpBatchScheduler) -> None:
    unknown = f"{PROJECT}:{LOCATION}:never-submitted"
    assert sched.describe(unknown) is None
    assert sched.describe("never-submitted-either") is None  # bare job id: project/location from env
    sched.cancel(unknown)
    with pytest.raises(ValueError, match="unknown app"):
        list(sched.log_iter(unknown, "w", 0))
    with pytest.raises(ValueError, match="PROJECT:LOCATION:JOB_ID"):
        sched.describe("a:b")


def test_unknown_replica_of_a_known_app(sched: GcpBatchScheduler) -> None:
    app_id, _ = run(sched, AppDef("one", roles=[sh("w", "true")]))
    with pytest.raises(ValueError, match="no replica w/3"):
        list(sched.log_iter(app_id, "w", 3))


def wait_for_line(sched: GcpBatchScheduler, app_id: str, role: str, k: int, timeout: float = 30) -> None:
    """Until replica ``k`` of ``role`` has written a line (its process runs)."""
    deadline = time.monotonic() + timeout
    while not lines(sched, app_id, role, k):
        assert time.monotonic() < deadline, f"{app_id} {role}/{k} wrote nothing in {timeout} s"
        time.sleep(0.05)


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
    with pytest.raises(SchedulerError, match="permission denied to get job"):
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
