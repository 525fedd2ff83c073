"""The preemption warning on Kubernetes, against the fake API server (fakekube, which runs
each pod as a process of this host and stops an evicted pod as a kubelet does: SIGTERM to
its processes, SIGKILL after the pod's ``terminationGracePeriodSeconds``).

The run option ``preempt_grace`` sets that grace on every pod and ``TX_PREEMPT_GRACE`` in
its env (``tx run --dryrun`` shows both); a pod evicted through the Eviction API
(``DisruptionTarget``) whose job saves with ``tx.distributed.save_checkpoint`` and leaves
with ``exit_preempted()`` is an ``infra`` attempt naming the eviction and the step saved,
and the next attempt resumes there; a job that ignores the warning is SIGKILLed at the end
of the grace and tx says nothing was saved."""
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from k8s_apps import shared
from test_k8s_eviction import evict_when
from tx.specs import AppDef, AppState, FailureKind, Resource, Role
from tx.testing.preemption import TRAIN
from tx_scheduler_k8s import kubernetes_scheduler
from tx_scheduler_k8s.scheduler import KubernetesBase

SMALL = Resource(cpu=1, gpu=0, memMB=64)
BIN = os.path.dirname(sys.executable)



@pytest.fixture
def volcano(fake_cluster: Dict[str, Any]) -> Iterator[KubernetesBase]:
    s = kubernetes_scheduler.create_scheduler("tx")
    s.submitted = []  # type: ignore[attr-defined]
    yield s
    for app_id in s.submitted:  # type: ignore[attr-defined]
        s.cancel(app_id)
    s.close()


def submit(s: KubernetesBase, tmp_path: Path, args: list, **cfg: Any) -> str:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    role = Role("w", image="busybox:1.36", entrypoint=args[0], args=args[1:], resource=SMALL, mounts=shared(tmp_path),
                env={"PATH": f"{BIN}:/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                     "TX_CHECKPOINT_DIR": str(ckpt)})
    app_id = s.submit(AppDef("preempt", roles=[role]), {"queue": "default", **cfg})
    s.submitted.append(app_id)  # type: ignore[attr-defined]
    return app_id


def test_dryrun_shows_the_grace(tx: Any, one_line_error: Any, fake_cluster: Dict[str, Any]) -> None:
    """`tx run --dryrun` (the CLI) shows the pod's terminationGracePeriodSeconds and
    TX_PREEMPT_GRACE on all three schedulers: Kubernetes' 30 s by default, the run option's
    otherwise; a negative one is a one-line error."""
    for sched, cfg, want in (("kubernetes", "queue=default", 30), ("kubernetes", "queue=default,preempt_grace=120", 120),
                             ("kubernetes_jobset", "preempt_grace=7", 7), ("kubernetes_mcad", "preempt_grace=0", 0)):
        out = tx("run", "--dryrun", "-s", sched, "-cfg", cfg, "utils.echo", "--msg", "hi")
        assert out.returncode == 0, out.stderr
        assert f"terminationGracePeriodSeconds: {want}\n" in out.stdout, out.stdout
        assert re.search(rf"- name: TX_PREEMPT_GRACE\n *value: \"{want}\"\n", out.stdout), out.stdout
    bad = tx("run", "--dryrun", "-s", "kubernetes", "-cfg", "queue=default,preempt_grace=-1", "utils.echo")
    one_line_error(bad, "preempt_grace must be whole seconds >= 0")


def test_an_evicted_job_saves_leaves_and_resumes_there(volcano: KubernetesBase, tmp_path: Path) -> None:
    """infra_retries=1, max_retries=0: the pod evicted (Eviction API) is warned with
    SIGTERM, saves its step and dies of the signal; the attempt is infra, names the eviction
    and the step saved; the next attempt resumes from that step and the app SUCCEEDS."""
    marker = tmp_path / "started"
    app_id = submit(volcano, tmp_path, ["python", "-c", TRAIN, str(marker)], infra_retries=1, preempt_grace=20)
    evict_when(marker, app_id)
    desc = volcano.wait(app_id, timeout=90, poll_interval=0.2)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    logs = "".join(volcano.log_iter(app_id, "w", 0))
    saved = int(next(ln for ln in logs.splitlines() if ln.startswith("resumed at")).split()[2])
    assert f"resumed at {saved} grace 20.0" in logs, logs
    first = desc.attempts[0]
    assert first.kind == FailureKind.INFRA and first.reason.startswith(f"DisruptionTarget; saved step {saved} in "), \
        desc.attempts
    assert [a.text.split(" (")[0] for a in desc.attempts] == ["#0 FAILED", "#1 SUCCEEDED"], desc.attempts


def test_a_job_that_ignores_the_warning_is_killed_at_the_end_of_the_grace(volcano: KubernetesBase,
                                                                           tmp_path: Path) -> None:
    """preempt_grace=2: a job that traps SIGTERM and goes on is SIGKILLed 2 s after the
    eviction (the fake kubelet honours the pod's terminationGracePeriodSeconds, as a
    kubelet does); infra_retries=0: the app FAILS as infra and tx says nothing was saved."""
    from kubernetes import client, config

    marker = tmp_path / "started"
    script = f"trap 'echo warned' TERM; touch {marker}; while true; do sleep 0.1; done"
    app_id = submit(volcano, tmp_path, ["sh", "-c", script], infra_retries=0, preempt_grace=2)
    t0 = time.time()
    pod = evict_when(marker, app_id)
    api = client.CoreV1Api(config.new_client_from_config(os.environ["KUBECONFIG"]))
    try:
        ns = app_id.split(":")[0]
        term = None
        deadline = time.monotonic() + 30
        while term is None and time.monotonic() < deadline:  # until the pod ended (or is gone)
            try:
                got = api.read_namespaced_pod(pod, ns)
            except client.ApiException as e:
                assert e.status == 404
                break
            st = (got.status.container_statuses or [None])[0]
            term = st.state.terminated if st is not None else None
            if term is not None:  # the evicted pod is deleted soon after: its log now
                log = api.read_namespaced_pod_log(pod, ns)
            time.sleep(0.05)
        assert term is not None, "the evicted pod's end was never seen"
        assert "warned\n" in log, log  # SIGTERM first, trapped (the shell also reports its sleep Terminated)
        assert (term.exit_code, term.signal) == (137, 9), term
        assert got.spec.termination_grace_period_seconds == 2
        took = term.finished_at.timestamp() - t0
        assert took >= 2, took  # SIGKILLed (137, 9 above) at the end of the 2 s grace, not before
    finally:
        api.api_client.close()
    desc = volcano.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc is not None and desc.state == AppState.FAILED, desc
    last = desc.attempts[-1]
    assert last.kind == FailureKind.INFRA, desc.attempts
    assert last.reason.endswith("; no checkpoint saved before the kill; starts fresh"), desc.attempts


def test_a_checkpoint_dir_this_host_cannot_read_names_the_eviction_only(tmp_path: Path) -> None:
    """Where TX_CHECKPOINT_DIR is not a directory of this host (a path of the pods' own file
    system, an object store), tx says nothing of what was saved rather than 'no checkpoint'."""
    from tx_scheduler_k8s._attempts import Saves, build_attempts
    from tx_scheduler_k8s._preempt import checkpoint_dir

    assert checkpoint_dir([{"TX_CHECKPOINT_DIR": str(tmp_path / "not-here")}]) is None
    assert checkpoint_dir([{"TX_CHECKPOINT_DIR": "s3://bucket/run"}]) is None
    assert checkpoint_dir([{}, {"TX_CHECKPOINT_DIR": str(tmp_path)}]) == str(tmp_path)
    pod = {"metadata": {}, "status": {"phase": "Failed", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
         "lastTransitionTime": "2026-11-28T22:00:00Z"}],
        "containerStatuses": [{"state": {"terminated": {"exitCode": 143, "finishedAt": "2026-11-28T22:00:05Z"}}}]}}
    for saves, want in ((None, "DisruptionTarget PreemptionByScheduler"),
                        (Saves(str(tmp_path)), "DisruptionTarget PreemptionByScheduler; "
                                               "no checkpoint saved before the kill; starts fresh")):
        (last,) = build_attempts([FailureKind.INFRA], lambda: "", [pod], AppState.FAILED, 0, [], saves)
        assert (last.kind, last.reason) == (FailureKind.INFRA, want)
