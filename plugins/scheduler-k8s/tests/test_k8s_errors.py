"""Bad input and an unhealthy cluster give one line and a non-zero exit from the ``tx``
CLI (each in its own process), and leave nothing behind."""
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml

from tx_scheduler_k8s.testing import kubeconfig
from tx.specs import AppDef, Resource, Role
from tx.testing.backends import free_port
from tx_scheduler_k8s._client import KubeError
from tx_scheduler_k8s.kubernetes_scheduler import create_scheduler

BIN = Path(sys.executable).parent


def tx(kubeconfig_path: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    env.update(KUBECONFIG=kubeconfig_path, HOME=str(cwd))
    return subprocess.run([str(BIN / "tx"), *args], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=120)


def one_line_error(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode != 0, p.stdout
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert "Traceback" not in p.stderr
    return lines[0]


def names(fake_cluster: Dict[str, Any], ns: str = "default") -> list:
    return [a.app_id for a in create_scheduler("t").list()]


def write_kubeconfig(tmp_path: Path, server: str, context: str = "tx-test") -> str:
    cfg = kubeconfig(server)
    cfg["current-context"] = context
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


RUN = ("run", "-s", "kubernetes", "-cfg")


def test_unknown_namespace(fake_cluster: Dict[str, Any], tmp_path: Path) -> None:
    p = tx(fake_cluster["kubeconfig"], *RUN, "queue=default,namespace=nope", "utils.echo", "--msg", "hi", cwd=tmp_path)
    one_line_error(p, 'namespaces "nope" not found', "HTTP 404")


def test_invalid_namespace_name(fake_cluster: Dict[str, Any], tmp_path: Path) -> None:
    p = tx(fake_cluster["kubeconfig"], *RUN, "queue=default,namespace=Not_Valid", "utils.echo", cwd=tmp_path)
    one_line_error(p, "run option 'namespace'", "Not_Valid")


def test_invalid_role_name(fake_cluster: Dict[str, Any], tmp_path: Path) -> None:
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump({"name": "bad", "roles": [{"name": "__", "image": "busybox", "entrypoint": "echo"}]}))
    p = tx(fake_cluster["kubeconfig"], *RUN, "queue=default", str(app), cwd=tmp_path)
    one_line_error(p, "role name '__' cannot be a Kubernetes name")


def test_forbidden(fake_cluster: Dict[str, Any], tmp_path: Path) -> None:
    before = names(fake_cluster)
    path = write_kubeconfig(tmp_path, fake_cluster["url"], context="tx-viewer")
    p = tx(path, *RUN, "queue=default", "utils.echo", "--msg", "hi", cwd=tmp_path)
    one_line_error(p, "forbidden", 'User "viewer" cannot create', "HTTP 403")
    assert names(fake_cluster) == before


def test_unreachable_server(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path, f"http://127.0.0.1:{free_port()}")
    p = tx(path, *RUN, "queue=default", "utils.echo", "--msg", "hi", cwd=tmp_path)
    one_line_error(p, "cannot reach the Kubernetes API server")
    p = tx(path, "status", "kubernetes://tx/default:foo-bcdfghjk", cwd=tmp_path)
    one_line_error(p, "cannot reach the Kubernetes API server")


def test_no_kubeconfig(tmp_path: Path) -> None:
    p = tx(str(tmp_path / "missing"), *RUN, "queue=default", "utils.echo", cwd=tmp_path)
    one_line_error(p, "no Kubernetes cluster configured", "KUBECONFIG")


def test_conflict(fake_cluster: Dict[str, Any]) -> None:
    sched = create_scheduler("t")
    app = AppDef("dup", roles=[Role("r", image="busybox", entrypoint="sleep", args=["30"],
                                    resource=Resource(cpu=1, gpu=0, memMB=64))])
    info = sched.submit_dryrun(app, {"queue": "default"})
    app_id = sched.schedule(info)
    try:
        with pytest.raises(KubeError) as e:
            sched.schedule(info)
        assert e.value.status == 409 and "already exists" in str(e.value) and "\n" not in str(e.value)
        assert [a for a in sched.list() if a.app_id == app_id]
    finally:
        sched.cancel(app_id)


def test_schema_rejection_is_one_line(fake_cluster: Dict[str, Any]) -> None:
    """What the API server refuses (here: an unknown field) is one line, and not created."""
    sched = create_scheduler("t")
    app = AppDef("typo", roles=[Role("r", image="busybox", entrypoint="true", resource=Resource(cpu=1, gpu=0, memMB=64))])
    info = sched.submit_dryrun(app, {"queue": "default"})
    info.request.resource["spec"]["minAvaliable"] = 1
    with pytest.raises(KubeError) as e:
        sched.schedule(info)
    assert e.value.status == 422 and "minAvaliable" in str(e.value) and "\n" not in str(e.value)
    assert sched.describe(f"default:{info.request.app_id}") is None
