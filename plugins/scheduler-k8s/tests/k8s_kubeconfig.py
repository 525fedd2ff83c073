"""The kubeconfig of the fake API server the tests start, and its users' tokens (a module of
its own: test modules cannot import conftest)."""
from typing import Any, Dict

ADMIN_TOKEN = "tx-test-admin-token"
VIEWER_TOKEN = "tx-test-viewer-token"


def kubeconfig(server: str) -> Dict[str, Any]:
    """A kubeconfig (https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/)."""
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
