"""The KFP v2 SDK, checked once: importing this module fails in one line when ``kfp`` is
missing or is not 2.x (TorchX's adapter needed kfp 1.x; this one needs 2.x)."""
try:
    import kfp
except ModuleNotFoundError as e:
    if e.name != "kfp":
        raise
    raise ModuleNotFoundError(
        "tx-pipelines-kfp needs the KFP v2 SDK, which is not installed: pip install 'kfp>=2,<3'",
        name="kfp") from None

if not kfp.__version__.startswith("2."):
    raise ImportError(f"tx-pipelines-kfp needs the KFP v2 SDK (kfp 2.x), found kfp {kfp.__version__}: "
                      "pip install 'kfp>=2,<3'")

KFP_VERSION: str = kfp.__version__
