"""The log archive on the fake cluster: the Runner that waits on a Volcano job copies each
replica's pod log; once the pods are deleted, ``tx log`` prints every byte from the archive
and says so, every attempt's when a retry recreated the pods, and while the pods are there
the attempts before the live pod's (docs/recovery.md)."""
from pathlib import Path
from typing import Any, Dict

import pytest

from k8s_apps import shared
from tx.cli.main import main
from tx.runner import get_runner
from tx.specs import AppDef, AppState, Resource, Role

SCRIPT = r'printf "r%s \377 line 1\n" "$TX_REPLICA_ID"; sleep 0.5; printf "r%s line 2\ntail, no newline" "$TX_REPLICA_ID"'


def expected(k: int) -> bytes:
    return b"r%d \xff line 1\nr%d line 2\ntail, no newline" % (k, k)


def delete_pods(fake_cluster: Dict[str, Any], handle: str, n: int) -> None:
    """The app's pods go (kubectl delete pod, the garbage collector, the node): their logs with them."""
    from kubernetes import client, config

    ns, name = handle.rsplit("/", 1)[1].split(":")
    api = client.CoreV1Api(config.new_client_from_config(fake_cluster["kubeconfig"]))
    try:
        pods = api.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/instance={name}").items
        assert len(pods) == n
        for pod in pods:
            api.delete_namespaced_pod(pod.metadata.name, ns)
        assert api.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/instance={name}").items == []
    finally:
        api.api_client.close()


def archive_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / ".txconfig"
    conf.write_text(f"[tx:logs]\narchive = {tmp_path / 'archive'}\ninterval = 0.2\n")
    monkeypatch.setenv("TXCONFIG", str(conf))


def test_logs_outlive_the_pods(fake_cluster: Dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    archive_conf(tmp_path, monkeypatch)
    role = Role("talker", image="busybox:1.36", entrypoint="sh", args=["-c", SCRIPT], num_replicas=2,
                resource=Resource(cpu=1, gpu=0, memMB=64))
    with get_runner() as runner:
        handle = runner.run(AppDef("archived", roles=[role]), "kubernetes", cfg={"queue": "default"})
        status = runner.wait(handle, wait_interval=0.2, timeout=60)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        archive = runner.log_archive
        assert archive.is_complete(handle)
        for k in (0, 1):
            assert b"".join(archive.read_blocks(handle, "talker", k)) == expected(k)
    delete_pods(fake_cluster, handle, 2)
    capfdbinary.readouterr()
    assert main(["log", handle]) == 0  # in this process: the kubernetes client is imported already
    out, err = capfdbinary.readouterr()
    for k in (0, 1):  # replicas' lines may interleave (whole lines): compare each replica's
        prefix = b"talker/%d " % k
        got = b"".join(line[len(prefix):] for line in out.splitlines(keepends=True) if line.startswith(prefix))
        assert got == expected(k) + b"\n", out  # the relay ends the last line
        assert b"reading the log from tx's log archive (the pod of replica talker/%d" % k in err, err


def test_every_attempt_outlives_the_pods(fake_cluster: Dict[str, Any], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    """A role that fails once and succeeds on retry (Volcano RestartJob recreates the pod
    under the same name, its log starting from zero, longer than attempt 1's by the next
    copy): the archive keeps both attempts, and ``tx log`` prints them in order."""
    archive_conf(tmp_path, monkeypatch)
    mark = tmp_path / "tried"
    # attempt 1 fails once its lines are archived (the pod sees the archive through the
    # hostPath mount), not after a guessed time: a copy every interval may come late
    part = tmp_path / "archive" / "kubernetes" / "*" / "*" / "flaky" / "0" / "part-000000"
    script = (f'if [ -e {mark} ]; then printf "attempt 2 line %s\\n" 1 2 3 4; exit 0; fi; touch {mark}; '
              f'printf "attempt 1 line %s\\n" 1 2; for i in $(seq 600); do [ -e {part} ] && exit 3; sleep 0.1; done')
    role = Role("flaky", image="busybox:1.36", entrypoint="sh", args=["-c", script], max_retries=1,
                mounts=shared(tmp_path), resource=Resource(cpu=1, gpu=0, memMB=64))
    with get_runner() as runner:
        handle = runner.run(AppDef("retried", roles=[role]), "kubernetes", cfg={"queue": "default"})
        status = runner.wait(handle, wait_interval=0.2, timeout=60)
        assert status is not None and status.state == AppState.SUCCEEDED, status
    both = b"".join(b"flaky/0 attempt %d line %d\n" % (a, i) for a, n in ((1, 2), (2, 4)) for i in range(1, n + 1))
    capfdbinary.readouterr()
    assert main(["log", handle]) == 0  # the pod holds attempt 2: attempt 1 from the archive first
    out, err = capfdbinary.readouterr()
    assert out == both, out
    assert err.count(b"printing 1 earlier attempt from tx's log archive, then the backend's log") == 1, err
    delete_pods(fake_cluster, handle, 1)
    assert main(["log", handle]) == 0
    out, err = capfdbinary.readouterr()
    assert out == both, out
    assert b"reading the log from tx's log archive" in err, err
