"""``torchx.schedulers.lsf_scheduler``: tx-scheduler-lsf's ``tx_scheduler_lsf.scheduler``
(the ``lsf`` scheduler), under TorchX 0.7.0's names ``LsfScheduler`` and
``create_scheduler(session_name, **kwargs)``. TorchX's request helpers (``LsfBsub``,
``get_submit_script``, ``bjobs -o`` parsing) do not exist: tx submits one bsub per replica
that runs the program on the host rather than in ``docker run``, and never uses options that
an LSF other than IBM LSF 10 would misread (docs/migrating-from-torchx.md)."""
from tx_torchx_compat._missing import reexport

_lsf = reexport(globals(), "tx_scheduler_lsf.scheduler", "tx-scheduler-lsf")
