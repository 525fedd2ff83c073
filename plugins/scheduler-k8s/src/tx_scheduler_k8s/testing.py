"""pytest fixtures of a fake Kubernetes cluster, for this plugin's tests and every test of
the repository that needs one (tests/test_portability.py). Loaded as a pytest plugin by the
repository's root ``conftest.py`` (``pytest_plugins``), so the server exists once and is
started at most once per session.

* ``fake_cluster``: the fake Kubernetes API server (``fakekube``, test code beside this
  plugin's tests: ``plugins/scheduler-k8s/tests/fakekube``) on a free port of 127.0.0.1 with
  its own work directory, a kubeconfig for it (:func:`kubeconfig`; contexts ``tx-test``: an
  admin user; ``tx-viewer``: a user who may only get and list) and ``KUBECONFIG`` pointing at
  it for the whole session, so the schedulers, and fresh processes, find it as they find any
  cluster.

The server is the repository's: the fixture runs from a checkout.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from tx.testing import ServiceProcess, backend_unavailable

__all__ = ["ADMIN_TOKEN", "TESTS", "VIEWER_TOKEN", "fake_cluster", "kubeconfig"]

#: this plugin's tests/ (the fake API server ``fakekube`` and its schemas), from a checkout
TESTS = Path(__file__).resolve().parents[2] / "tests"
SCHEMAS = TESTS / "data" / "schemas"
#: the bearer tokens of the fake server's users: an admin, and a viewer who may only get and list
ADMIN_TOKEN = "tx-test-admin-token"
VIEWER_TOKEN = "tx-test-viewer-token"


def kubeconfig(server: str) -> Dict[str, Any]:
    """A kubeconfig (https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/)
    for the fake API server at ``server`` (its URL): contexts ``tx-test`` (admin, current) and
    ``tx-viewer``, namespace ``default``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "admin", "user": {"token": ADMIN_TOKEN}},
                  {"name": "viewer", "user": {"token": VIEWER_TOKEN}}],
        "contexts": [{"name": "tx-test", "context": {"cluster": "fake", "user": "admin", "namespace": "default"}},
                     {"name": "tx-viewer", "context": {"cluster": "fake", "user": "viewer", "namespace": "default"}}],
        "current-context": "tx-test",
    }


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

    if not (TESTS / "fakekube" / "server.py").is_file():
        backend_unavailable("kubernetes (fake API server)", f"{TESTS / 'fakekube'} is missing: run from a checkout")
    base = tmp_path_factory.mktemp("fakekube")
    argv = [sys.executable, str(TESTS / "fakekube" / "server.py"), "--port", "{port}", "--workdir", str(base),
            "--schemas", str(SCHEMAS), "--token", f"admin={ADMIN_TOKEN}", "--token", f"viewer={VIEWER_TOKEN}:get,list",
            "--namespace", "team-a", "--localqueue", "default/user-queue", "--nodes", "2", "--node-cpu", "64", "--node-memory", "64Gi",
            "--cluster-queue", "cpu=16,memory=64Gi,nvidia.com/gpu=0"]  # Kueue's quota: less than the nodes have
    port, svc = ServiceProcess.start_listening(lambda port: [a.format(port=port) if a == "{port}" else a for a in argv],
                                               log=base / "server.log", what="the fake API server", timeout=30)
    try:
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
