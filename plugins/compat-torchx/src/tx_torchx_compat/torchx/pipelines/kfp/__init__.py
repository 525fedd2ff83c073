"""``torchx.pipelines.kfp``: tx-pipelines-kfp (``tx_pipelines_kfp``), TorchX's KFP adapter on
the KFP v2 SDK (TorchX 0.7.0's needed kfp 1.x; docs/migrating-from-torchx.md). As TorchX's,
importing it checks the SDK: without the plugin or kfp 2.x it fails in one line naming what
to install."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_pipelines_kfp._sdk", "tx-pipelines-kfp")
reexport(globals(), "tx_pipelines_kfp", "tx-pipelines-kfp")
