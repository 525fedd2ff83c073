"""The log archive on the fake cluster: the Runner that waits on a Volcano job copies each
replica's pod log; once the pods are deleted, ``tx log`` prints every byte from the archive
and says so (docs/recovery.md)."""
from pathlib import Path
from typing import Any, Dict

import pytest

from tx.cli.main import main
from tx.runner import get_runner
from tx.specs import AppDef, AppState, Resource, Role

SCRIPT = r'printf "r%s \377 line 1\n" "$TX_REPLICA_ID"; sleep 0.5; printf "r%s line 2\ntail, no newline" "$TX_REPLICA_ID"'


def expected(k: int) -> bytes:
    return b"r%d \xff line 1\nr%d line 2\ntail, no newline" % (k, k)


def test_logs_outlive_the_pods(fake_cluster: Dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    from kubernetes import client, config

    conf = tmp_path / ".txconfig"
    conf.write_text(f"[tx:logs]\narchive = {tmp_path / 'archive'}\ninterval = 0.2\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
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
    ns, name = handle.rsplit("/", 1)[1].split(":")
    api = client.CoreV1Api(config.new_client_from_config(fake_cluster["kubeconfig"]))
    try:  # the pods go (kubectl delete pod, the garbage collector, the node): their logs with them
        pods = api.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/instance={name}").items
        assert len(pods) == 2
        for pod in pods:
            api.delete_namespaced_pod(pod.metadata.name, ns)
        assert api.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/instance={name}").items == []
    finally:
        api.api_client.close()
    capfdbinary.readouterr()
    assert main(["log", handle]) == 0  # in this process: the kubernetes client is imported already
    out, err = capfdbinary.readouterr()
    for k in (0, 1):  # replicas' lines may interleave (whole lines): compare each replica's
        prefix = b"talker/%d " % k
        got = b"".join(line[len(prefix):] for line in out.splitlines(keepends=True) if line.startswith(prefix))
        assert got == expected(k) + b"\n", out  # the relay ends the last line
        assert b"reading the log from tx's log archive (the pod of replica talker/%d" % k in err, err
