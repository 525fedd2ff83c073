"""``torchx.pipelines``: TorchX's package of pipeline adapters; ``torchx.pipelines.kfp`` is
tx-pipelines-kfp (Kubeflow Pipelines, KFP v2 SDK)."""
