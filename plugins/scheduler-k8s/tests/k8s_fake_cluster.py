"""The session fixture ``fake_cluster``: the fake Kubernetes API server (``fakekube``, beside
this file) on a free port of 127.0.0.1 with its own work directory, a kubeconfig for it
(contexts ``tx-test``: an admin user; ``tx-viewer``: a user who may only get and list) and
``KUBECONFIG`` pointing at it for the whole session, so the schedulers, and fresh processes,
find it as they find any cluster.

A pytest plugin, loaded by the repository's root ``conftest.py`` (``pytest_plugins``; this
directory is on ``pythonpath``), so that this plugin's tests and the repository's
cross-backend tests (tests/test_portability.py) share one server per session.
"""
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
from k8s_kubeconfig import ADMIN_TOKEN, VIEWER_TOKEN, kubeconfig  # beside this file (pytest.ini: pythonpath)

from tx.testing.backends import ServiceProcess, backend_unavailable, free_port, port_open, wait_for

__all__ = ["fake_cluster"]

HERE = Path(__file__).resolve().parent
SCHEMAS = HERE / "data" / "schemas"


@pytest.fixture(scope="session")
def fake_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """``{"url", "kubeconfig", "port", "log", "no_dns"}`` of the running fake API server
    (KUBECONFIG set); ``no_dns``: why its pods cannot resolve Service names, "" where they can."""
    try:
        import jsonschema  # noqa: F401
        import kubernetes  # noqa: F401
        import kubernetes_validate  # noqa: F401  (the server validates core kinds with it)
    except ImportError as e:
        backend_unavailable("kubernetes (fake API server)", f"{e.name} is not installed: pip install kubernetes jsonschema kubernetes-validate")
    import yaml  # only where the fixture runs

    base = tmp_path_factory.mktemp("fakekube")
    port = free_port()
    argv = [sys.executable, str(HERE / "fakekube" / "server.py"), "--port", str(port), "--workdir", str(base),
            "--schemas", str(SCHEMAS), "--token", f"admin={ADMIN_TOKEN}", "--token", f"viewer={VIEWER_TOKEN}:get,list",
            "--namespace", "team-a", "--localqueue", "default/user-queue", "--nodes", "2", "--node-cpu", "64", "--node-memory", "64Gi",
            "--cluster-queue", "cpu=16,memory=64Gi,nvidia.com/gpu=0"]  # Kueue's quota: less than the nodes have
    svc = ServiceProcess.start(argv, log=base / "server.log")
    try:
        wait_for(lambda: port_open(port), timeout=30, what="the fake API server to listen", service=svc)
        url = f"http://127.0.0.1:{port}"
        path = base / "kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig(url)))
        old = os.environ.get("KUBECONFIG")
        os.environ["KUBECONFIG"] = str(path)
        try:
            # pods resolve Service names only where the kubelet could give them namespaces
            # (fakekube/podnet.py): else the server said why, and DNS tests skip with it
            no_dns = [ln for ln in svc.log.read_text(errors="replace").splitlines() if ln.startswith("NO POD DNS")]
            yield {"url": url, "kubeconfig": str(path), "port": port, "log": svc.log,
                   "no_dns": no_dns[0] if no_dns else ""}
        finally:
            if old is None:
                os.environ.pop("KUBECONFIG", None)
            else:
                os.environ["KUBECONFIG"] = old
    finally:
        svc.stop()
    # the server validates every status its controllers write, as the API server validates a
    # controller's status update: one that its schema rejects is a bug of the fake
    invalid = [ln for ln in svc.log.read_text(errors="replace").splitlines() if ln.startswith("INVALID STATUS")]
    assert not invalid, f"the fake API server wrote {len(invalid)} invalid status(es), first: {invalid[0]}"
