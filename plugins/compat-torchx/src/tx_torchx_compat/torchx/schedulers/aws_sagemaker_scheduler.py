"""``torchx.schedulers.aws_sagemaker_scheduler``: TorchX 0.7.0's ``aws_sagemaker`` scheduler (AWS SageMaker). tx has no
AWS SageMaker backend, so importing this module raises ModuleNotFoundError with one line that says
so (docs/migrating-from-torchx.md, "Schedulers tx does not provide")."""

raise ModuleNotFoundError(
    "torchx.schedulers.aws_sagemaker_scheduler: tx has no aws_sagemaker scheduler (AWS SageMaker); TorchX 0.7.0's aws_sagemaker "
    "scheduler is not provided by tx-torchx-compat (installed schedulers: tx runopts)",
    name="torchx.schedulers.aws_sagemaker_scheduler",
)
