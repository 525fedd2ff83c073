"""``torchx.schedulers.lsf_scheduler``: TorchX 0.7.0's ``lsf`` scheduler (IBM Spectrum LSF). tx has no
IBM Spectrum LSF backend, so importing this module raises ModuleNotFoundError with one line that says
so (docs/migrating-from-torchx.md, "Schedulers tx does not provide")."""

raise ModuleNotFoundError(
    "torchx.schedulers.lsf_scheduler: tx has no lsf scheduler (IBM Spectrum LSF); TorchX 0.7.0's lsf "
    "scheduler is not provided by tx-torchx-compat (installed schedulers: tx runopts)",
    name="torchx.schedulers.lsf_scheduler",
)
