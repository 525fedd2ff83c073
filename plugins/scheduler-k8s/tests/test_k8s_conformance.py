"""tx's scheduler conformance kit through the official ``kubernetes`` client, against the
fake API server of conftest.py (KUBECONFIG points at it, in fresh processes too)."""
from typing import Any, Dict

import pytest

from tx.testing import SchedulerConformance
from tx_scheduler_k8s.kubernetes_scheduler import KubernetesScheduler, create_scheduler


class TestVolcanoConformance(SchedulerConformance):
    timeout = 90.0
    poll_interval = 0.2

    @pytest.fixture
    def scheduler(self, fake_cluster: Dict[str, Any]) -> KubernetesScheduler:
        return create_scheduler("tx")

    @pytest.fixture
    def cfg(self) -> Dict[str, Any]:
        return {"queue": "default"}

    @pytest.fixture
    def image(self) -> str:
        return "busybox:1.36"

    def unknown_app_id(self) -> str:
        return "default:tx-conformance-unknown-0000"


class TestJobSetKueueConformance(SchedulerConformance):
    """JobSets queued by Kueue (LocalQueue ``user-queue`` exists in the fake cluster)."""

    timeout = 90.0
    poll_interval = 0.2

    @pytest.fixture
    def scheduler(self, fake_cluster: Dict[str, Any]) -> Any:
        from tx_scheduler_k8s.kubernetes_jobset_scheduler import create_scheduler as create_jobset

        return create_jobset("tx")

    @pytest.fixture
    def cfg(self) -> Dict[str, Any]:
        return {"queue": "user-queue"}

    @pytest.fixture
    def image(self) -> str:
        return "busybox:1.36"

    def unknown_app_id(self) -> str:
        return "default:tx-conformance-unknown-0000"
