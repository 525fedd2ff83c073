"""Registrations of tx-scheduler-k8s (entry point ``kubernetes`` in the group ``tx``).

Nothing heavy is imported here: schedulers are registered as dotted paths."""
from typing import Callable

from tx import hookimpl

TX_PLUGIN_API = 1

_INSTALL = "pip install tx-scheduler-k8s"


@hookimpl
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Register ``kubernetes`` (Volcano), ``kubernetes_jobset`` and ``kubernetes_mcad``."""
    register(
        "kubernetes",
        "tx_scheduler_k8s.kubernetes_scheduler:create_scheduler",
        description="Kubernetes: one Volcano Job per app (batch.volcano.sh/v1alpha1)",
        requires=("kubernetes",),
        install=_INSTALL,
    )
    register(
        "kubernetes_jobset",
        "tx_scheduler_k8s.kubernetes_jobset_scheduler:create_scheduler",
        description="Kubernetes: one JobSet per app (jobset.x-k8s.io/v1alpha2), queued by Kueue",
        requires=("kubernetes",),
        install=_INSTALL,
    )
    register(
        "kubernetes_mcad",
        "tx_scheduler_k8s.kubernetes_mcad_scheduler:create_scheduler",
        description="Kubernetes: one MCAD AppWrapper per app (workload.codeflare.dev or mcad.ibm.com)",
        requires=("kubernetes",),
        install=_INSTALL,
    )
