"""tx's scheduler conformance kit through the official ``kubernetes`` client, against the
fake API server of conftest.py (KUBECONFIG points at it, in fresh processes too)."""
from typing import Any, Dict, Tuple

import pytest

from tx.schedulers import Stream
from tx.testing import SchedulerConformance
from tx_scheduler_k8s.kubernetes_scheduler import KubernetesScheduler, create_scheduler

#: Kubernetes keeps one log per container (stdout and stderr apart only behind an alpha gate)
LOG_STREAMS = (Stream.COMBINED,)


class TestVolcanoConformance(SchedulerConformance):
    timeout = 90.0
    poll_interval = 0.2
    log_streams = LOG_STREAMS

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
    log_streams = LOG_STREAMS

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


class TestMCADConformance(SchedulerConformance):
    """MCAD AppWrappers (workload.codeflare.dev). MCAD cannot stop an app and keep it: cancel
    deletes the AppWrapper, as TorchX does, so the kit's checks that a cancelled app still
    describes as CANCELLED cannot hold (test_k8s_mcad.py tests cancel itself)."""

    timeout = 90.0
    poll_interval = 0.2
    log_streams = LOG_STREAMS

    @pytest.fixture
    def scheduler(self, fake_cluster: Dict[str, Any]) -> Any:
        from tx_scheduler_k8s.kubernetes_mcad_scheduler import create_scheduler as create_mcad

        return create_mcad("tx")

    @pytest.fixture
    def image(self) -> str:
        return "busybox:1.36"

    def unknown_app_id(self) -> str:
        return "default:tx-conformance-unknown-0000"

    def kept_run_option(self, scheduler: Any) -> Tuple[str, int]:
        return "priority", 5  # spec.priority: the only AppWrapper here

    def test_cancel(self, scheduler: Any, cfg: Dict[str, Any], image: str) -> None:
        pytest.skip("MCAD has no way to stop an AppWrapper and keep it: cancel deletes it (test_k8s_mcad.py)")

    def test_fresh_process_sees_the_app(self, scheduler: Any, cfg: Dict[str, Any], image: str) -> None:
        pytest.skip("ends with cancel, which deletes an AppWrapper (test_k8s_mcad.py covers a fresh process)")
