"""tx-scheduler-k8s: the Kubernetes schedulers of tx.

* ``kubernetes``: each app is a Volcano ``batch.volcano.sh/v1alpha1`` Job
  (:mod:`tx_scheduler_k8s.kubernetes_scheduler`).
* ``kubernetes_jobset``: each app is a ``jobset.x-k8s.io/v1alpha2`` JobSet, queued by Kueue
  with run option ``queue`` (:mod:`tx_scheduler_k8s.kubernetes_jobset_scheduler`).
* ``kubernetes_mcad``: each app is an MCAD AppWrapper (``workload.codeflare.dev`` or
  ``mcad.ibm.com``) (:mod:`tx_scheduler_k8s.kubernetes_mcad_scheduler`).

Importing this package is cheap: the ``kubernetes`` client is imported only when a
scheduler first talks to the API server (dryruns never import it).
"""
from tx_scheduler_k8s.version import __version__

__all__ = ["__version__"]
