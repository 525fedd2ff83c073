"""``torchx.pipelines.kfp.version``: tx-pipelines-kfp's version."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_pipelines_kfp.version", "tx-pipelines-kfp")
